"""The API entry point: checks the listen address and TLS, then runs uvicorn (RFC 7.5, 13.1)."""

from __future__ import annotations

import argparse
import logging
import sys
from typing import Any

import uvicorn

from api.app import create_app
from api.auth import plan_listen
from api.keyfile import configured_keys
from membrane_core import Settings, errors, logs

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
    processes, each building its own app (and Membrane) from the environment's settings.

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
    if workers > 1:
        uvicorn.run("api.app:create_app", factory=True, workers=workers, **common)
    else:
        uvicorn.run(create_app(s), **common)


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
