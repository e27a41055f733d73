.PHONY: check test format format-check lint types run migrate

# Every check, stopping at the first failure: format, lint, types, then the tests.
check: format-check lint types
	SKIP_STATIC_CHECKS=1 bash scripts/test.sh -q

# The README's test command (what .ci/run runs): installs, runs the static checks, then pytest.
test:
	bash scripts/test.sh -q

format:
	.venv/bin/ruff format .

format-check:
	bash scripts/check.sh format

lint:
	bash scripts/check.sh lint

types:
	bash scripts/check.sh types

run:
	.venv/bin/membrane run

migrate:
	.venv/bin/membrane migrate
