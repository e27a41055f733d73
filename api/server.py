"""The API entry point: checks the listen address and TLS, then runs uvicorn (RFC 7.5, 13.1)."""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import uvicorn

from api import metrics
from api.app import create_app
from api.keyfile import configured_keys
from membrane_core import Settings, errors, logs
from membrane_core.listen import plan_listen

log = logging.getLogger(__name__)


def serve(
    settings: Settings | None = None,
    *,
    host: str | None = None,
    port: int | None = None,
    log_level: str | None = None,
    workers: int = 1,
) -> None:
    """RFC 7.5: refuse an unsafe listen address, else serve (HTTPS with TLS files) until stopped.

    The checks run before the app (and its Membrane) is built and before binding, so a
    refused start connects to nothing. With ``workers > 1`` uvicorn forks that many
    processes, each building its own app (and Membrane) from the environment's settings,
    and every one writes its Prometheus figures to one multiprocess directory
    (:func:`metrics_dir`), so any of them answers a scrape with the sum (RFC 14.2).

    RFC 14.3: once the address is accepted, ``log_level`` (else ``MEMBRANE_LOG_LEVEL``, else
    INFO) and ``MEMBRANE_LOG_FORMAT`` set up this process's logging; uvicorn applies the
    same setup (its ``log_config``) in each worker process it starts.
    """
    s = settings or Settings()
    level = logs.level_name(log_level or s.log_level or "INFO")
    bind = host or s.host
    plan = plan_listen(
        bind,
        configured_keys(s),  # RFC 10.3: a key file that does not load refuses the start
        certfile=s.tls_certfile,
        keyfile=s.tls_keyfile,
        allow_insecure=s.allow_insecure_credentials,
    )
    logs.configure(s.log_format, level)
    if plan.warning:
        log.warning(plan.warning)
    common: dict[str, Any] = {
        "host": bind,
        "port": port or s.port,
        "log_level": level.lower(),
        "log_config": logs.config(s.log_format, level),
        "access_log": False,  # api.access writes the access log (RFC 14.3)
        "timeout_graceful_shutdown": 10,
    }
    if plan.certfile and plan.keyfile:
        common.update(ssl_certfile=str(plan.certfile), ssl_keyfile=str(plan.keyfile))
    with metrics_dir(workers):
        if workers > 1:
            uvicorn.run("api.app:create_app", factory=True, workers=workers, **common)
        else:
            uvicorn.run(create_app(s), **common)


@contextlib.contextmanager
def metrics_dir(workers: int) -> Iterator[str | None]:
    """RFC 14.2: the multiprocess directory of this API's processes, emptied for this start.

    ``PROMETHEUS_MULTIPROC_DIR`` when set (its files are removed: the totals start at this
    start); else, with ``workers > 1``, a new temporary directory, set in the environment
    before uvicorn spawns the processes (each imports prometheus_client afresh, so each
    writes its values there) and removed when the server stops. One process without it keeps
    its figures in memory (``None``).
    """
    given = os.environ.get(metrics.MULTIPROC_ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink(missing_ok=True)
        yield given
        return
    if workers <= 1:
        yield None
        return
    made = tempfile.mkdtemp(prefix="membrane-api-metrics-")
    os.environ[metrics.MULTIPROC_ENV] = made
    try:
        yield made
    finally:
        os.environ.pop(metrics.MULTIPROC_ENV, None)
        shutil.rmtree(made, ignore_errors=True)


def main(argv: list[str] | None = None) -> None:
    """``python -m api [--host H] [--port P] [--workers N]``."""
    parser = argparse.ArgumentParser(prog="python -m api", description="Membrane HTTP API")
    parser.add_argument("--host")
    parser.add_argument("--port", type=int)
    parser.add_argument(
        "--log-level",
        type=str.lower,
        choices=[n.lower() for n in logs.LEVELS],
        help="default MEMBRANE_LOG_LEVEL",
    )
    parser.add_argument("--workers", type=int, default=1, help="API processes (default 1)")
    args = parser.parse_args(argv)
    try:
        serve(host=args.host, port=args.port, log_level=args.log_level, workers=args.workers)
    except errors.MembraneError as exc:
        print(f"membrane api: {exc.message}", file=sys.stderr)
        raise SystemExit(2) from exc
