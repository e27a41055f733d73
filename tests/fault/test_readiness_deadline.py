"""``/readyz`` answers within a probe's 1 s timeout whether its services are up, dead or hung
(RFC 14.2, 10.5)."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from api.ratelimit import Unlimited
from api.readiness import Probes
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import InlineDispatcher
from tests.fault.stopped import postmaster_pid, stopped
from tests.support.api import ServeFn, Server
from tests.support.services import EMBEDDING_DIM, PrivatePostgres, Redis

#: The kubelet's default probe timeout: a slower answer is a failed probe, whatever it says.
PROBE_TIMEOUT = 1.0


def timed_ready(client: httpx.Client) -> tuple[httpx.Response, float]:
    start = time.monotonic()
    resp = client.get("/readyz")
    return resp, time.monotonic() - start


def wait_ready(client: httpx.Client, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while client.get("/readyz").status_code != 200:
        assert time.monotonic() < deadline, client.get("/readyz").text
        time.sleep(0.2)


def assert_not_ready_in_time(client: httpx.Client, down: str, up: str) -> None:
    # three in a row: the first starts the probes, the next ones find one still running
    for _ in range(3):
        ready, took = timed_ready(client)
        assert ready.status_code == 503, ready.text
        assert took < PROBE_TIMEOUT, took
        assert ready.json()["checks"][down] == "unavailable"
        assert ready.json()["checks"][up] in ("ok", "not checked")
        assert ready.json()["error"]["details"] == [
            {"field": down, "message": f"{down} unreachable", "type": "unavailable"}
        ]
        assert int(ready.headers["retry-after"]) >= 1


def test_a_hung_probe_holds_one_thread_however_often_readiness_is_asked() -> None:
    now = [0.0]
    probes = Probes(timeout=0.3, abandon_after=30.0, clock=lambda: now[0])
    release, started = threading.Event(), []

    def hung() -> None:
        started.append(threading.current_thread().name)
        release.wait(10)

    def refused() -> None:
        raise ConnectionRefusedError("connection refused")

    try:
        for _ in range(3):
            outcome = probes.run({"postgres": hung, "broker": refused})
            assert outcome == {
                "postgres": "no answer within 0.3 s",
                "broker": "ConnectionRefusedError: connection refused",
            }
        assert len(started) == 1  # the later calls waited on the first run, still hung
        now[0] = 31.0  # past abandon_after: that run is left to itself and another starts
        probes.run({"postgres": hung})
        assert len(started) == 2
    finally:
        release.set()
    # control: released, the run answers ok; a call after it has ended starts a new one
    deadline = time.monotonic() + 10
    while probes.run({"postgres": hung, "broker": lambda: None}) != {"postgres": None, "broker": None}:
        assert time.monotonic() < deadline
    before = len(started)
    while probes.run({"postgres": hung}) != {"postgres": None}:
        assert time.monotonic() < deadline
    assert len(started) > before


@pytest.mark.queue
def test_readyz_answers_503_within_a_second_when_redis_is_hung_or_killed(
    serve: ServeFn, killable_redis: Redis
) -> None:
    client = serve(broker_url=killable_redis.url)  # the app's real Celery broker probe
    ready, took = timed_ready(client)
    assert ready.status_code == 200, ready.text  # control: both up
    assert ready.json()["checks"] == {"postgres": "ok", "broker": "ok"}
    assert took < PROBE_TIMEOUT

    assert killable_redis.proc is not None
    with stopped(killable_redis.proc.pid):
        assert_not_ready_in_time(client, "broker", "postgres")
    wait_ready(client)  # continued: ready again, without a restart

    killable_redis.kill()
    assert_not_ready_in_time(client, "broker", "postgres")
    killable_redis.start()
    wait_ready(client)


@pytest.mark.slow
def test_readyz_answers_503_within_a_second_when_postgres_is_hung(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    settings = Settings(database_url=private_postgres.dsn, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM)
    membrane = Membrane(settings)
    app = create_app(
        settings,
        membrane=membrane,
        dispatcher=InlineDispatcher(membrane.inbox_worker),
        rate_limiter=Unlimited(),
    )
    try:
        with Server(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            ready, took = timed_ready(client)
            assert ready.status_code == 200, ready.text  # control: Postgres answers
            assert ready.json()["checks"] == {"postgres": "ok", "broker": "not checked"}
            assert took < PROBE_TIMEOUT

            # a fresh connection to a stopped postmaster waits past psycopg's 2 s minimum
            with stopped(postmaster_pid(private_postgres.data_dir / "pg")):
                assert_not_ready_in_time(client, "postgres", "broker")
            wait_ready(client)
    finally:
        membrane.close()
