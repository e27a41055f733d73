#!/usr/bin/env bash
# The static checks, in order, stopping at the first that fails: the format (ruff format
# --check), the lint (ruff check) and the types (mypy, strict). With arguments, only the
# named steps run: format, lint, types. scripts/test.sh runs all of them before pytest;
# they use the tools of .venv, which scripts/test.sh installs (the dev extra).
set -euo pipefail
cd "$(dirname "$0")/.."

#: What mypy checks (strict, [tool.mypy] in pyproject.toml).
MYPY_TARGETS=(membrane_core api workers membrane_cli beat_schedule.py)

if [ ! -x .venv/bin/ruff ] || [ ! -x .venv/bin/mypy ]; then
  echo "check: .venv/bin/ruff or .venv/bin/mypy is missing: run 'bash scripts/test.sh' once" \
    "(it installs the dev extra)" >&2
  exit 1
fi

step() {  # step NAME HINT COMMAND...
  local name=$1 hint=$2
  shift 2
  echo "check: $name: $*"
  if ! "$@"; then
    echo "check: $name failed: $hint" >&2
    exit 1
  fi
}

run() {
  case $1 in
    format) step format "run 'make format' (ruff format .) and commit the result" \
      .venv/bin/ruff format --check . ;;
    lint) step lint "fix the findings above ('.venv/bin/ruff check --fix .' fixes those marked [*])" \
      .venv/bin/ruff check . ;;
    types) step types "fix the type errors above" .venv/bin/mypy "${MYPY_TARGETS[@]}" ;;
    *) echo "check: unknown step '$1' (format, lint, types)" >&2; exit 2 ;;
  esac
}

if [ $# -eq 0 ]; then
  set -- format lint types
fi
for name in "$@"; do
  run "$name"
done
