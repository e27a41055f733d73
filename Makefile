.PHONY: test check lint types run migrate

test:
	bash scripts/test.sh -q

lint:
	.venv/bin/ruff check .

types:
	.venv/bin/mypy membrane_core

check: lint types test

run:
	.venv/bin/membrane run

migrate:
	.venv/bin/membrane migrate
