"""Rate limits while Redis is hung or dead: ``MEMBRANE_RATE_FAIL`` admits or refuses, and no
request waits on Redis (RFC 10.6)."""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Iterator

import httpx
import pytest
from pydantic import SecretStr

from api.app import create_app
from api.ratelimit import LIMITER_RETRY_SECONDS
from membrane_core import Membrane
from membrane_core.inbox.submit import InlineDispatcher
from tests.fault.stopped import stopped
from tests.support.api import Server
from tests.support.services import Redis

pytestmark = pytest.mark.queue

TOKEN = "scrape-token"
#: Each request must be answered well within this while Redis hangs: the limiter's own
#: timeouts are 0.1 s, and a hung request is what the setting must never cause.
ANSWER_WITHIN = 1.0


@contextlib.contextmanager
def fault(redis: Redis, kind: str) -> Iterator[None]:
    """Redis stopped (it accepts connections and answers nothing) or killed, then back."""
    assert redis.proc is not None
    if kind == "hung":
        with stopped(redis.proc.pid):
            yield
    else:
        redis.kill()
        try:
            yield
        finally:
            redis.start()  # empty: every bucket is full again


@pytest.mark.parametrize("kind", ["hung", "killed"])
@pytest.mark.parametrize("mode", ["open", "closed"])
def test_a_redis_outage_admits_or_refuses_as_set_and_never_waits_on_redis(
    mode: str,
    kind: str,
    api_membrane: Membrane,
    killable_redis: Redis,
    caplog: pytest.LogCaptureFixture,
) -> None:
    key = f"rf-sekrit-{uuid.uuid4().hex}"
    # 0.1 requests/s with 20 s of burst: a bucket of two requests, refilled every 10 s
    limits = {"read_scopes": ["rf"], "write_scopes": ["rf"], "requests_per_second": 0.1, "burst": 20}
    settings = api_membrane.settings.model_copy(
        update={
            "api_keys": {key: limits},
            "redis_url": killable_redis.url,  # the limiter the app builds from its settings
            "rate_fail": mode,
            "metrics_token": SecretStr(TOKEN),
        }
    )
    app = create_app(settings, membrane=api_membrane, dispatcher=InlineDispatcher(api_membrane.inbox_worker))
    auth = {"Authorization": f"Bearer {key}"}
    with Server(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:

        def timed() -> httpx.Response:
            start = time.monotonic()
            resp = client.get("/v1/metrics", headers=auth)
            assert time.monotonic() - start < ANSWER_WITHIN, (resp.status_code, resp.text)
            return resp

        # control: Redis answers and the limit holds
        assert [timed().status_code for _ in range(3)] == [200, 200, 429]

        caplog.set_level(logging.INFO, logger="api.ratelimit")
        with fault(killable_redis, kind):
            during = [timed() for _ in range(5)]
            text = client.get("/metrics", headers={"Authorization": f"Bearer {TOKEN}"}).text
        if mode == "open":
            # past the spent bucket: admitted because unchecked, not because under the limit
            assert [r.status_code for r in during] == [200] * 5
        else:
            assert [r.status_code for r in during] == [503] * 5
            for resp in during:
                error = resp.json()["error"]
                assert error["code"] == "unavailable"
                assert "rate limits cannot be checked" in error["message"]
                assert 1 <= int(resp.headers["retry-after"]) <= LIMITER_RETRY_SECONDS
        outcome = "admitted" if mode == "open" else "refused"
        assert f'membrane_rate_unchecked_total{{limit="requests",outcome="{outcome}"}} 5.0' in text
        warnings = [r for r in caplog.records if r.name == "api.ratelimit" and r.levelno == logging.WARNING]
        assert len(warnings) == 1 and "cannot be checked" in warnings[0].getMessage()  # once, not per request

        # Redis back: after the window the limit is checked again (a hung Redis kept the spent
        # bucket, a restarted one starts full)
        time.sleep(LIMITER_RETRY_SECONDS + 0.3)
        after = [timed().status_code for _ in range(3)]
        assert after == ([429] * 3 if kind == "hung" else [200, 200, 429])
        assert any("checked again" in r.getMessage() for r in caplog.records if r.name == "api.ratelimit")
