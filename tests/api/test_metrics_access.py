"""The deployment's own figures are an operator's: the inbox and backlog in ``/v1/metrics``, and
Prometheus ``/metrics`` once keys are configured (RFC 7.1, 10.1, 14.2)."""

from __future__ import annotations

import httpx

from tests.support.api import ServeFn

KEYS = {
    "tenant-key": {"read_scopes": ["t1"], "write_scopes": ["t1"], "max_sensitivity": "low"},
    "wide-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "hyper"},
    "ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "hyper", "operator": True},
}


def _bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def test_inbox_and_backlog_only_for_an_operator(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    # another tenant's activity: a capture that stays queued is visible in the inbox figures
    other = client.post(
        "/v1/captures",
        headers=_bearer("wide-key"),
        json={"source_kind": "event", "scope": "t2", "content": {"text": "x"}},
    )
    assert other.status_code in (200, 202)
    for key in ("tenant-key", "wide-key"):
        m = client.get("/v1/metrics", headers=_bearer(key))
        assert m.status_code == 200
        body = m.json()
        assert body["operations"] is None and body["work_backlog"] is None, key
        assert "total_records" in body  # the caller's own records are still counted
    ops = client.get("/v1/metrics", headers=_bearer("ops-key")).json()
    assert ops["operations"] is not None and "capture" in ops["operations"]  # positive control
    assert ops["work_backlog"] is not None


def test_prometheus_needs_an_operator_key_or_the_metrics_token(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers=_bearer("tenant-key")).status_code == 403
    assert client.get("/metrics", headers=_bearer("wide-key")).status_code == 403
    assert client.get("/metrics", headers=_bearer("not-a-key")).status_code == 401
    ok = client.get("/metrics", headers=_bearer("ops-key"))
    assert ok.status_code == 200 and "membrane_http_requests_total" in ok.text


def test_prometheus_takes_a_separate_scrape_token(serve: ServeFn) -> None:
    client = serve(keys=KEYS, metrics_token="scrape-secret")
    assert client.get("/metrics", headers=_bearer("scrape-secret")).status_code == 200
    assert client.get("/metrics", headers=_bearer("scrape-secre")).status_code == 401
    # the token is not an API key: it reads no records
    assert client.get("/v1/metrics", headers=_bearer("scrape-secret")).status_code == 401
    assert client.get("/metrics", headers=_bearer("ops-key")).status_code == 200  # keys still work


def test_without_keys_prometheus_answers_on_loopback(client: httpx.Client) -> None:
    resp = client.get("/metrics")
    assert resp.status_code == 200 and "membrane_http_requests_total" in resp.text
    assert client.get("/v1/metrics").json()["operations"] is not None
