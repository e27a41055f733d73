"""A Celery worker pool serving its own ``/metrics``, started as ``membrane run`` starts it
(RFC 14.2)."""

from __future__ import annotations

import os
from pathlib import Path

import redis

from membrane_cli.stack import process_tree
from tests.support import prom, services
from tests.support.processes import ROOT, Proc
from workers.app import worker_argv


def pool_env(database_url: str, redis_url: str, data_dir: Path) -> dict[str, str]:
    """A pool's environment on the test's database and redis-server (flushed)."""
    redis.Redis.from_url(redis_url).flushdb()
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMBRANE_", "PROMETHEUS_"))}
    env.update(
        MEMBRANE_DATABASE_URL=database_url,
        MEMBRANE_REDIS_URL=redis_url,
        MEMBRANE_EMBEDDING_DIM=str(services.EMBEDDING_DIM),
        MEMBRANE_EMBEDDING_PROVIDER="none",
        MEMBRANE_DATA_DIR=str(data_dir),
        MEMBRANE_POOL_MAX_SIZE="4",
        PYTHONPATH=str(ROOT),
    )
    return env


class Pool:
    """``celery worker -Q <queue>`` with the argv of ``membrane run``, its ``/metrics`` on a free port."""

    def __init__(
        self,
        env: dict[str, str],
        log: Path,
        *,
        queue: str = "maintenance",
        concurrency: int = 2,
        host: str = "127.0.0.1",
    ) -> None:
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}/metrics"
        env = {**env, "MEMBRANE_WORKER_METRICS_HOST": host, "MEMBRANE_WORKER_METRICS_PORT": str(self.port)}
        argv = [*worker_argv(queue, concurrency=concurrency), "--without-gossip", "--without-mingle"]
        self.proc = Proc(argv, env, log)
        self.client = prom.fresh_connections()

    def wait_ready(self) -> Pool:
        """Block until the pool serves its metrics and consumes its queue."""
        self.proc.wait_for("worker metrics served")
        self.proc.wait_for("ready.")
        return self

    def text(self, headers: dict[str, str] | None = None) -> str:
        """One scrape of the pool's ``/metrics``."""
        return prom.scrape(self.client, self.url, headers)

    def samples(self, headers: dict[str, str] | None = None) -> dict[prom.Key, float]:
        """The samples of one scrape."""
        return prom.samples(self.text(headers))

    def children(self) -> list[int]:
        """The pids of the pool's processes but its main one."""
        return [p for p in process_tree(self.proc.popen.pid) if p != self.proc.popen.pid]

    def stop(self) -> None:
        self.client.close()
        self.proc.stop()
