"""Health, readiness, Prometheus metrics, OpenAPI and the listen-address guard (RFC 14.2, 7.5)."""

from __future__ import annotations

import os
import subprocess
import sys

import httpx
import psycopg
import pytest
from psycopg import sql

from api.auth import check_listen, is_loopback
from membrane_core import errors
from tests.support import services
from tests.support.api import ServeFn


def test_healthz_and_readyz(client: httpx.Client) -> None:
    assert client.get("/healthz").json() == {"status": "ok"}
    ready = client.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"]["postgres"] == "ok"


@pytest.mark.queue
def test_readyz_checks_the_real_broker_and_writes_survive_its_absence(serve: ServeFn, redis_url: str) -> None:
    up = serve(broker_url=redis_url)
    ready = up.get("/readyz")
    assert ready.status_code == 200
    assert ready.json()["checks"] == {"postgres": "ok", "broker": "ok"}
    assert (
        up.post(
            "/v1/captures", json={"source_kind": "event", "scope": "a", "content": {"text": "x"}}
        ).status_code
        == 202
    )

    down = serve(broker_url=f"redis://127.0.0.1:{services.free_port()}/0")
    ready = down.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"] == {"postgres": "ok", "broker": "unavailable"}
    # the driver's text (hosts, ports) goes to the log, not to an unauthenticated caller
    assert ready.json()["error"]["details"] == [
        {"field": "broker", "message": "broker unreachable", "type": "unavailable"}
    ]
    resp = down.post("/v1/captures", json={"source_kind": "event", "scope": "a", "content": {"text": "y"}})
    assert resp.status_code == 202  # the inbox row is committed; beat re-dispatches it
    assert down.get(resp.headers["location"]).json()["status"] == "queued"


def test_prometheus_metrics_count_requests_by_route_and_accepted_operations(client: httpx.Client) -> None:
    client.post("/v1/captures", json={"source_kind": "event", "scope": "a", "content": {"text": "x"}})
    client.get("/v1/records/00000000-0000-0000-0000-000000000000")
    text = client.get("/metrics").text
    assert 'membrane_http_requests_total{method="POST",route="/v1/captures",status="202"} 1' in text
    assert 'route="/v1/records/{record_id}",status="404"} 1' in text
    assert "membrane_http_request_duration_seconds_bucket" in text
    assert 'membrane_operations_accepted_total{kind="capture",status="queued"} 1' in text


def test_openapi_and_docs_are_served(client: httpx.Client) -> None:
    spec = client.get("/openapi.json").json()
    for path in (
        "/v1/captures",
        "/v1/captures:batch",
        "/v1/operations/{operation_id}",
        "/v1/records/{record_id}",
        "/v1/records/{record_id}/audit",
        "/v1/retrieve",
        "/v1/records/{record_id}/supersede",
        "/v1/records:merge",
        "/v1/maintenance/run",
        "/v1/metrics",
        "/healthz",
        "/readyz",
    ):
        assert path in spec["paths"], path
    docs = client.get("/docs")
    assert docs.status_code == 200
    assert "swagger" in docs.text.lower()


def test_postgres_down_is_503_with_a_clear_message(
    serve: ServeFn, database_url: str, pg_admin_url: str
) -> None:
    client = serve()
    assert client.get("/readyz").status_code == 200
    name = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(str(name))))
    ready = client.get("/readyz")
    assert ready.status_code == 503
    assert ready.json()["checks"]["postgres"] == "unavailable"
    resp = client.get("/v1/records/00000000-0000-0000-0000-000000000000")
    assert resp.status_code == 503
    assert resp.json()["error"]["code"] == "unavailable"
    assert "Postgres" in resp.json()["error"]["message"]


def test_loopback_detection() -> None:
    assert all(is_loopback(h) for h in ("127.0.0.1", "localhost", "::1", "[::1]", "127.8.0.1"))
    assert not any(is_loopback(h) for h in ("0.0.0.0", "::", "10.0.0.5", "example.com"))
    with pytest.raises(errors.Forbidden):
        check_listen("0.0.0.0", {})
    check_listen("0.0.0.0", {"k": {"read_scopes": ["a"]}})
    check_listen("127.0.0.1", {})


def test_entry_point_refuses_a_public_host_without_keys(database_url: str) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env["MEMBRANE_DATABASE_URL"] = database_url
    proc = subprocess.run(
        [sys.executable, "-m", "api", "--host", "0.0.0.0", "--port", "1"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode != 0
    assert "refusing to listen on '0.0.0.0' without API keys" in proc.stderr
