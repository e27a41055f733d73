"""A worker pool's own ``/metrics``: its tasks by queue and outcome, their run time, retries and
failures, summed over its prefork children, through a real Celery worker (RFC 14.2)."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
import psycopg
import pytest
from psycopg import sql

from membrane_cli.stack import Stack, StackOptions, free_port, port_open
from membrane_core import Settings
from tests.support import prom
from tests.support.pools import Pool, pool_env
from tests.support.processes import wait_until
from tests.support.services import EMBEDDING_DIM
from workers.app import make_app

pytestmark = [pytest.mark.queue, pytest.mark.slow]

QUEUE = "maintenance"
TOKEN = "scrape-token-for-the-pools"


@pytest.fixture
def env(database_url: str, redis_url: str, tmp_path: Path) -> dict[str, str]:
    """The pool's environment on this test's database and the run's redis-server."""
    return pool_env(database_url, redis_url, tmp_path)


def tasks(found: dict[prom.Key, float], task: str, outcome: str) -> float | None:
    return prom.value(found, "membrane_worker_tasks_total", queue=QUEUE, task=task, outcome=outcome)


def test_a_pool_counts_its_tasks_by_outcome_with_their_run_time_and_retries(
    env: dict[str, str], redis_url: str, pg_admin_url: str, database_url: str, tmp_path: Path
) -> None:
    pool = Pool(env, tmp_path / "pool.log").wait_ready()
    celery = make_app(Settings(redis_url=redis_url))
    try:
        start = pool.samples()
        # every task of the pool's queue is exported from the start, at zero
        assert tasks(start, "membrane.reap", "succeeded") == 0
        assert tasks(start, "membrane.purge_operations", "failed") == 0
        reap = {"queue": QUEUE, "task": "membrane.reap"}
        assert prom.value(start, "membrane_worker_task_retries_total", **reap, reason="Unavailable") == 0
        assert (
            prom.value(
                start, "membrane_worker_task_duration_seconds_count", queue=QUEUE, task="membrane.reap"
            )
            == 0
        )

        for _ in range(6):
            celery.send_task("membrane.reap")
        celery.send_task("membrane.maintenance_job", args=["no-such-job"])  # fails: not transient
        wait_until(
            lambda: (
                tasks(pool.samples(), "membrane.reap", "succeeded") == 6
                and tasks(pool.samples(), "membrane.maintenance_job", "failed") == 1
            ),
            timeout=60,
            what="six reaps succeeded and one job failed",
        )
        done = pool.samples()
        assert prom.value(done, "membrane_worker_task_duration_seconds_count", **reap) == 6
        assert prom.value(done, "membrane_worker_task_duration_seconds_bucket", **reap, le="+Inf") == 6
        assert 0 < (prom.value(done, "membrane_worker_task_duration_seconds_sum", **reap) or 0) < 60
        assert tasks(done, "membrane.reap", "failed") == 0
        failures = {k: v for k, v in done.items() if k[0] == "membrane_worker_task_failures_total"}
        assert list(failures.values()) == [1]
        labels = dict(next(iter(failures))[1])
        assert labels["task"] == "membrane.maintenance_job" and labels["queue"] == QUEUE

        # A pool child that dies takes none of the counts: its files stay in the pool's sum.
        children = pool.children()
        assert len(children) == 2
        os.kill(children[0], signal.SIGKILL)
        wait_until(
            lambda: len(pool.children()) == 2 and children[0] not in pool.children(), what="a new child"
        )
        assert tasks(pool.samples(), "membrane.reap", "succeeded") == 6
        celery.send_task("membrane.reap")
        wait_until(lambda: tasks(pool.samples(), "membrane.reap", "succeeded") == 7, what="one more reap")

        # Postgres gone for this database: a reap raises Unavailable, which is retried.
        name = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
        with psycopg.connect(pg_admin_url, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(str(name))))
        celery.send_task("membrane.reap")
        wait_until(
            lambda: (tasks(pool.samples(), "membrane.reap", "retried") or 0) >= 1, timeout=60, what="a retry"
        )
        retried = pool.samples()
        assert (
            prom.value(retried, "membrane_worker_task_retries_total", **reap, reason="Unavailable") or 0
        ) >= 1
        assert tasks(retried, "membrane.reap", "succeeded") == 7  # positive control: it grew from 0
    finally:
        celery.close()
        pool.stop()


def test_the_token_guards_a_pools_metrics_and_is_needed_off_loopback(
    env: dict[str, str], tmp_path: Path
) -> None:
    # RFC 7.5: off loopback without the token the pool refuses to start
    refused = Pool(env, tmp_path / "refused.log", concurrency=1, host="0.0.0.0")
    assert refused.proc.popen.wait(timeout=60) == 2
    refused.stop()
    assert "needs MEMBRANE_METRICS_TOKEN" in refused.proc.text()

    pool = Pool({**env, "MEMBRANE_METRICS_TOKEN": TOKEN}, tmp_path / "pool.log", concurrency=1)
    try:
        pool.wait_ready()
        assert httpx.get(pool.url, timeout=10).status_code == 401
        assert httpx.get(pool.url, headers={"Authorization": "Bearer nope"}, timeout=10).status_code == 401
        ok = pool.samples({"Authorization": f"Bearer {TOKEN}"})  # control: the token opens it
        assert tasks(ok, "membrane.reap", "succeeded") == 0
        assert httpx.get(pool.url.replace("/metrics", "/"), timeout=10).status_code == 404
    finally:
        pool.stop()


def test_membrane_run_gives_each_pool_a_port_and_an_emptied_directory(
    monkeypatch: pytest.MonkeyPatch, database_url: str, redis_url: str, tmp_path: Path
) -> None:
    for name in list(os.environ):
        if name.startswith(("MEMBRANE_", "PROMETHEUS_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMBRANE_EMBEDDING_DIM", str(EMBEDDING_DIM))
    monkeypatch.setenv("MEMBRANE_EMBEDDING_PROVIDER", "none")
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path / "not-for-the-children"))
    base = free_port()
    options = StackOptions(
        data_dir=tmp_path,
        api_port=free_port(),
        queues=("maintenance",),
        beat=False,
        flower=False,
        worker_metrics_port=base,
    )
    stale = tmp_path / "metrics" / "worker-maintenance" / "counter_999999.db"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"an earlier run's")
    settings = Settings(
        database_url=database_url, redis_url=redis_url, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM
    )
    stack = Stack(settings, options)
    assert stack.worker_metrics_ports() == {"maintenance": base}
    try:
        stack.start(wait_ready=90)
        pool = next(c for c in stack.children if c.name == "worker-maintenance")
        with prom.fresh_connections() as client:
            wait_until(lambda: port_open("127.0.0.1", base), timeout=60, what="the pool's metrics port")
            found = prom.samples(prom.scrape(client, f"http://127.0.0.1:{base}/metrics"))
        assert tasks(found, "membrane.reap", "succeeded") == 0
        assert not stale.exists()  # emptied at the start
        assert pool.env["PROMETHEUS_MULTIPROC_DIR"] == str(stale.parent)
        assert any(stale.parent.glob("*.db"))  # the pool writes there, not in the inherited one
        assert not (tmp_path / "not-for-the-children").exists()
    finally:
        stack.stop()
