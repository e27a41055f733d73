"""Real Celery worker subprocesses against the session's Postgres and a real redis-server."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import psycopg
import pytest
import redis

from membrane_core import Membrane, Settings
from membrane_core.storage.db import Database
from tests.conftest import EMBEDDING_DIM
from tests.support import services
from workers.app import make_app
from workers.dispatch import CeleryDispatcher

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.queue


class Proc:
    """A child process in its own session, so the whole group can be signalled."""

    def __init__(self, argv: list[str], env: dict[str, str], log: Path) -> None:
        self.log = log
        self._out = log.open("wb")
        self.popen = subprocess.Popen(argv, env=env, cwd=ROOT, stdout=self._out,
                                      stderr=subprocess.STDOUT, start_new_session=True)

    def text(self) -> str:
        return self.log.read_text(errors="replace")

    def wait_for(self, needle: str, timeout: float = 60.0) -> None:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if needle in self.text():
                return
            if self.popen.poll() is not None:
                raise RuntimeError(f"process exited ({self.popen.returncode}):\n{self.text()}")
            time.sleep(0.1)
        raise TimeoutError(f"{needle!r} not seen in {self.log}:\n{self.text()[-3000:]}")

    def kill(self) -> None:
        """SIGKILL the whole process group (main process and pool children)."""
        with contextlib.suppress(ProcessLookupError):
            os.killpg(self.popen.pid, signal.SIGKILL)
        self.popen.wait(timeout=30)
        self._out.close()

    def stop(self) -> None:
        if self.popen.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.kill()
                return
        self._out.close()


#: A restartable redis-server (shared with the fault tests).
Redis = services.Redis


@pytest.fixture
def worker_env(database_url: str, redis_url: str, tmp_path: Path) -> dict[str, str]:
    """Environment of worker and beat subprocesses for this test's database."""
    redis.Redis.from_url(redis_url).flushdb()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env.update(MEMBRANE_DATABASE_URL=database_url, MEMBRANE_REDIS_URL=redis_url,
               MEMBRANE_EMBEDDING_DIM=str(EMBEDDING_DIM), MEMBRANE_DATA_DIR=str(tmp_path),
               MEMBRANE_POOL_MAX_SIZE="4", PYTHONPATH=str(ROOT))
    return env


Spawn = Callable[..., Proc]


@pytest.fixture
def spawn(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Spawn]:
    """Start ``celery worker`` / ``celery beat`` subprocesses; all are stopped at the end."""
    procs: list[Proc] = []

    def start(kind: str, queues: str = "ingest", *, concurrency: int = 1,
              env: dict[str, str] | None = None, name: str | None = None) -> Proc:
        n = len(procs)
        base = [sys.executable, "-m", "celery", "-A", "workers.app:app"]
        if kind == "worker":
            node = f"{name or queues.replace(',', '-')}{n}@%h"
            argv = [*base, "worker", "-Q", queues, "-c", str(concurrency), "-n", node,
                    "--loglevel=INFO", "--without-gossip", "--without-mingle", "-E"]
            ready = "ready."
        else:
            argv = [*base, "beat", "-s", str(tmp_path / f"beat{n}"), "--loglevel=DEBUG"]
            ready = "beat: Starting"
        proc = Proc(argv, {**worker_env, **(env or {})}, tmp_path / f"{kind}{n}.log")
        procs.append(proc)
        proc.wait_for(ready)
        return proc

    yield start
    for p in procs:
        p.stop()


@pytest.fixture
def live(settings: Settings, db: Database) -> Membrane:
    """A Membrane on the test database with the real clock (workers use the real clock)."""
    return Membrane(settings, database=db)


@pytest.fixture
def dispatcher(redis_url: str) -> CeleryDispatcher:
    return CeleryDispatcher(make_app(Settings(redis_url=redis_url)))


def scalar(url: str, sql: str, *args: object) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql, args).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return int(row[0])


def wait_until(check: Callable[[], bool], timeout: float = 90.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return
        time.sleep(0.2)
    raise TimeoutError(f"{what} not reached after {timeout}s")
