"""Two API processes behind one scrape: ``python -m api --workers 2`` sums every process's counters
in each scrape, so they never go back whichever process answers (RFC 14.2)."""

from __future__ import annotations

from pathlib import Path

import pytest
from prometheus_client.mmap_dict import MmapedDict, mmap_key

from tests.support import prom
from tests.support.api import ApiProcess, api_env

pytestmark = [pytest.mark.queue, pytest.mark.slow]  # the API's broker and limiter: the run's redis

#: Requests sent between the scrapes.
N = 300

HEALTHZ = {"method": "GET", "route": "/healthz", "status": "200"}


def healthz(text: str) -> float:
    return prom.value(prom.samples(text), "membrane_http_requests_total", **HEALTHZ) or 0.0


def stale_file(directory: Path, value: float) -> Path:
    """A counter file an earlier start left, holding ``value`` for the probe's series."""
    path = directory / "counter_999999.db"
    key = mmap_key(
        "membrane_http_requests",
        "membrane_http_requests_total",
        ["method", "route", "status"],
        list(HEALTHZ.values()),
        "HTTP requests by route and status.",
    )
    stale = MmapedDict(str(path))
    stale.write_value(key, value, 0.0)
    stale.close()
    return path


def test_two_api_processes_behind_one_scrape_give_monotonic_counters(
    database_url: str, redis_url: str, tmp_path: Path
) -> None:
    shared = tmp_path / "prometheus"
    shared.mkdir()
    stale = stale_file(shared, 1e6)
    env = api_env(database_url, redis_url, tmp_path, PROMETHEUS_MULTIPROC_DIR=str(shared))
    api = ApiProcess(env, tmp_path / "api.log", workers=2)
    metrics = f"{api.url}/metrics"
    client = prom.fresh_connections()  # each request and each scrape lands on either process
    try:
        api.wait_ready()
        assert not stale.exists()  # the API emptied the directory at its start
        seen = [healthz(prom.scrape(client, metrics))]
        for i in range(N):
            assert client.get(f"{api.url}/healthz").status_code == 200
            if i % 10 == 9:
                seen.append(healthz(prom.scrape(client, metrics)))
        seen += [healthz(prom.scrape(client, metrics)) for _ in range(30)]
        last = prom.samples(prom.scrape(client, metrics))
    finally:
        client.close()
        api.stop()

    assert seen == sorted(seen), seen  # never decreases
    assert seen[-1] >= seen[0] + N  # positive control: it grew by every request sent
    assert seen[-1] < 1e6  # nothing of the earlier start
    count = prom.value(last, "membrane_http_request_duration_seconds_count", method="GET", route="/healthz")
    assert count is not None and count >= seen[-1]

    # Both processes served, and neither alone holds the total a scrape gives: what one
    # process's own registry would have answered, at random, before.
    per_process = {
        path.name: sum(
            v for key, v, _, _ in MmapedDict.read_all_values_from_file(str(path)) if "/healthz" in key
        )
        for path in shared.glob("counter_*.db")
    }
    assert len(per_process) == 2, per_process
    assert all(0 < n < seen[-1] for n in per_process.values()), per_process
