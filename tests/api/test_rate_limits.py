"""Per-key rate limits in Redis, shared by every API process, failing open (RFC 10.6)."""

from __future__ import annotations

import contextlib
import json
import logging
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis

from api.app import create_app
from api.auth import fingerprint
from api.ratelimit import Limit, RedisLimiter, bucket_key
from tests.support.api import ApiProcess, ServeFn, api_env
from tests.support.services import Redis

pytestmark = pytest.mark.queue  # each test runs a redis-server of its own or the run's

SCOPE = "rl"
EVENT = {"source_kind": "event", "scope": SCOPE, "content": {"text": "deploy finished"}}
TOKEN = "scrape-token"


def policy(**limits: float) -> dict[str, Any]:
    return {"read_scopes": [SCOPE], "write_scopes": [SCOPE], **limits}


def fresh_key() -> str:
    """A key of its own per test: its buckets start full whatever ran before."""
    return f"rl-sekrit-{uuid.uuid4().hex}"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def batch(n: int) -> dict[str, Any]:
    return {"captures": [dict(EVENT, content={"text": f"step {i}"}) for i in range(n)]}


@pytest.fixture
def limiter(redis_url: str) -> Iterator[RedisLimiter]:
    lim = RedisLimiter(redis_url)
    yield lim
    lim.close()


def test_a_key_past_its_burst_is_refused_429_with_retry_after(
    serve: ServeFn, limiter: RedisLimiter, redis_url: str
) -> None:
    key, other = fresh_key(), fresh_key()
    # 0.2 requests/s with 15 s of burst: a bucket of 3 requests, refilled every 5 s
    keys = {key: policy(requests_per_second=0.2, burst=15), other: policy(requests_per_second=0.2, burst=15)}
    client = serve(keys=keys, rate_limiter=limiter, metrics_token=TOKEN)
    for _ in range(3):
        assert client.get("/v1/metrics", headers=bearer(key)).status_code == 200  # control: the burst
    refused = client.get("/v1/metrics", headers=bearer(key))
    assert refused.status_code == 429
    error = refused.json()["error"]
    assert error["code"] == "rate_limited"
    assert error["details"][0]["field"] == "requests_per_second"
    assert 1 <= int(refused.headers["retry-after"]) <= 5
    # the captures bucket is another, and another key has its own
    assert client.post("/v1/captures", json=EVENT, headers=bearer(key)).status_code == 202
    assert client.get("/v1/metrics", headers=bearer(other)).status_code == 200

    # the bucket is in Redis, by key id; the refusal is counted by key id, never by key
    actor = f"key:{fingerprint(key)}"
    assert redis.Redis.from_url(redis_url).pttl(bucket_key(actor, Limit.REQUESTS)) > 0
    text = client.get("/metrics", headers=bearer(TOKEN)).text
    assert f'membrane_rate_limited_total{{actor="{actor}",limit="requests"}} 1' in text
    assert key not in text


def test_a_batch_spends_as_many_captures_as_it_carries(serve: ServeFn, limiter: RedisLimiter) -> None:
    key, big = fresh_key(), fresh_key()
    # 0.1 captures/s with 100 s of burst: a bucket of 10 captures
    keys = {key: policy(captures_per_second=0.1, burst=100), big: policy(captures_per_second=0.1, burst=100)}
    client = serve(keys=keys, rate_limiter=limiter)
    assert client.post("/v1/captures:batch", json=batch(8), headers=bearer(key)).status_code == 202
    refused = client.post("/v1/captures:batch", json=batch(3), headers=bearer(key))
    assert refused.status_code == 429  # 8 + 3 > 10, though it is only the second request
    assert refused.json()["error"]["details"][0]["field"] == "captures_per_second"
    assert int(refused.headers["retry-after"]) >= 1
    # the refused batch spent nothing: two more fill the bucket exactly
    assert client.post("/v1/captures:batch", json=batch(2), headers=bearer(key)).status_code == 202
    assert client.post("/v1/captures", json=EVENT, headers=bearer(key)).status_code == 429
    assert client.get("/v1/metrics", headers=bearer(key)).status_code == 200  # requests: another bucket

    # a batch larger than the bucket is admitted from a full one; its excess is then waited out
    assert client.post("/v1/captures:batch", json=batch(25), headers=bearer(big)).status_code == 202
    after = client.post("/v1/captures", json=EVENT, headers=bearer(big))
    assert after.status_code == 429
    assert 150 <= int(after.headers["retry-after"]) <= 161  # 25 captures = 250 s, less the 100 s bucket


#: One admissible call of every ``/v1`` route, by (method, route template).
NOWHERE = uuid.UUID(int=1)
CALLS: dict[tuple[str, str], tuple[str, dict[str, Any] | None]] = {
    ("GET", "/v1/operations/{operation_id}"): (f"/v1/operations/{NOWHERE}", None),
    ("GET", "/v1/records/{record_id}"): (f"/v1/records/{NOWHERE}", None),
    ("GET", "/v1/records/{record_id}/audit"): (f"/v1/records/{NOWHERE}/audit", None),
    ("POST", "/v1/retrieve"): ("/v1/retrieve", {"query": "deploy"}),
    ("GET", "/v1/metrics"): ("/v1/metrics", None),
    ("POST", "/v1/maintenance/run"): ("/v1/maintenance/run", {"jobs": ["decay"]}),
    ("POST", "/v1/captures"): ("/v1/captures", EVENT),
    ("GET", "/v1/records"): ("/v1/records", None),
    ("GET", "/v1/records/{record_id}/lineage"): (f"/v1/records/{NOWHERE}/lineage", None),
    ("GET", "/v1/operations"): ("/v1/operations", None),
    ("GET", "/v1/work"): ("/v1/work", None),
    ("POST", "/v1/work:requeue"): ("/v1/work:requeue", {"ids": [1]}),
    ("GET", "/v1/scopes"): ("/v1/scopes", None),
    ("GET", "/v1/review"): ("/v1/review", None),
    ("POST", "/v1/review:decide"): (
        "/v1/review:decide",
        {"decisions": [{"proposal_id": str(NOWHERE), "decision": "reject"}]},
    ),
    ("POST", "/v1/captures:batch"): ("/v1/captures:batch", batch(1)),
    ("GET", "/v1/export"): ("/v1/export", None),
    ("POST", "/v1/import"): ("/v1/import", None),
    ("POST", "/v1/erase"): ("/v1/erase", {"scope": "s", "reason": "asked"}),
    ("POST", "/v1/records:merge"): (
        "/v1/records:merge",
        {"record_ids": [str(NOWHERE), str(uuid.UUID(int=2))], "rationale": "same"},
    ),
    **{
        ("POST", f"/v1/records/{{record_id}}/{verb}"): (f"/v1/records/{NOWHERE}/{verb}", body)
        for verb, body in {
            "supersede": {"record": {}, "rationale": "newer"},
            "fork": {"rationale": "variant"},
            "retract": {"rationale": "wrong"},
            "contest": {"rationale": "doubtful"},
            "reinforce": {},
            "penalize": {},
        }.items()
    },
}


def test_every_v1_route_spends_from_a_bucket_before_its_work(serve: ServeFn, limiter: RedisLimiter) -> None:
    key = fresh_key()
    # a bucket of one request and one capture, refilled in 1,000 s
    keys = {
        key: {**policy(requests_per_second=0.001, captures_per_second=0.001, burst=1000), "operator": True}
    }
    client = serve(keys=keys, rate_limiter=limiter)
    routes = {
        (method.upper(), path)
        for path, ops in create_app().openapi()["paths"].items()
        if path.startswith("/v1/")
        for method in ops
    }
    assert routes == set(CALLS)  # a new /v1 route needs a call here
    assert client.get("/v1/metrics", headers=bearer(key)).status_code == 200  # control
    assert client.post("/v1/captures", json=EVENT, headers=bearer(key)).status_code == 202
    for (method, _), (path, body) in CALLS.items():
        resp = client.request(method, path, json=body, headers=bearer(key))
        assert resp.status_code == 429, (method, path, resp.text)


def test_nothing_is_limited_without_keys(serve: ServeFn, limiter: RedisLimiter, redis_url: str) -> None:
    client = serve(rate_limiter=limiter)
    assert all(client.get("/v1/metrics").status_code == 200 for _ in range(30))
    assert client.post("/v1/captures:batch", json=batch(50)).status_code == 202
    assert redis.Redis.from_url(redis_url).keys("membrane:rate:{development}*") == []


def test_a_killed_redis_fails_open_fast_and_the_limit_comes_back(
    serve: ServeFn, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    server = Redis(tmp_path / "redis")
    server.start()
    limiter = RedisLimiter(server.url)
    key = fresh_key()
    try:
        client = serve(keys={key: policy(requests_per_second=0.2, burst=10)}, rate_limiter=limiter)
        assert [client.get("/v1/metrics", headers=bearer(key)).status_code for _ in range(3)] == [
            200,
            200,
            429,
        ]

        server.kill()
        caplog.set_level(logging.INFO, logger="api.ratelimit")
        for _ in range(20):
            start = time.monotonic()
            assert client.get("/v1/metrics", headers=bearer(key)).status_code == 200
            assert time.monotonic() - start < 0.5
        warnings = [r for r in caplog.records if r.name == "api.ratelimit" and r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "cannot be checked" in warnings[0].getMessage()  # once, not per request

        server.start()  # empty: every bucket is full again
        time.sleep(limiter.retry_seconds + 0.2)  # the next request is the trial
        codes = [client.get("/v1/metrics", headers=bearer(key)).status_code for _ in range(3)]
        assert codes == [200, 200, 429]
        assert any("checked again" in r.getMessage() for r in caplog.records if r.name == "api.ratelimit")
    finally:
        limiter.close()
        server.kill()


@contextlib.contextmanager
def silent_server() -> Iterator[str]:
    """A TCP port that accepts connections and never answers: a Redis lost behind a network."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(64)
        yield f"redis://127.0.0.1:{sock.getsockname()[1]}/0"


def test_a_redis_that_does_not_answer_costs_one_timeout_per_window(serve: ServeFn) -> None:
    key = fresh_key()
    with silent_server() as url:
        limiter = RedisLimiter(url)
        client = serve(keys={key: policy(captures_per_second=0.1, burst=10)}, rate_limiter=limiter)
        start = time.monotonic()
        assert client.post("/v1/captures", json=EVENT, headers=bearer(key)).status_code == 202
        first = time.monotonic() - start
        assert first < 1.0  # the limiter's timeout, not redis-py's retries
        start = time.monotonic()
        for _ in range(20):  # a bucket of one capture: all but the first would be refused
            assert client.post("/v1/captures", json=EVENT, headers=bearer(key)).status_code == 202
        # twenty waits on the silent server would take 20 x 0.1 s; the open circuit skips it
        assert time.monotonic() - start < 1.5
        assert limiter.is_open
        limiter.close()


@pytest.mark.slow
def test_the_limit_is_shared_by_two_api_processes(database_url: str, redis_url: str, tmp_path: Path) -> None:
    key = fresh_key()
    # 0.1 captures/s with 60 s of burst: 6 captures for the deployment, whichever process
    keys = {key: policy(captures_per_second=0.1, burst=60)}
    env = api_env(database_url, redis_url, tmp_path, MEMBRANE_API_KEYS=json.dumps(keys))
    env["MEMBRANE_METRICS_TOKEN"] = TOKEN
    a, b = ApiProcess(env, tmp_path / "api-a.log"), ApiProcess(env, tmp_path / "api-b.log")
    try:
        a.wait_ready()
        b.wait_ready()
        with httpx.Client(base_url=a.url, timeout=10) as ca, httpx.Client(base_url=b.url, timeout=10) as cb:

            def capture(client: httpx.Client) -> int:
                return client.post("/v1/captures", json=EVENT, headers=bearer(key)).status_code

            assert [capture(ca) for _ in range(4)] == [202] * 4
            assert [capture(cb) for _ in range(2)] == [202] * 2
            # B has admitted 2 and A 4, each under 6 alone: their sum is the limit
            assert capture(cb) == 429
            assert capture(ca) == 429
            actor = f"key:{fingerprint(key)}"
            for client in (ca, cb):
                text = client.get("/metrics", headers=bearer(TOKEN)).text
                assert f'membrane_rate_limited_total{{actor="{actor}",limit="captures"}} 1' in text
    finally:
        a.stop()
        b.stop()
