"""The deployment gauges of ``GET /metrics``: inbox depth, due work, its oldest item and the
embedding lag, read from Postgres at scrape time, for an operator only (RFC 14.2, 7.1)."""

from __future__ import annotations

from typing import Any

import psycopg
import pytest
from psycopg import sql

from tests.support import prom
from tests.support.api import ServeFn
from tests.support.sql import execute

EVENT = {"source_kind": "event", "scope": "a", "content": {"text": "x"}}
KEYS = {
    "tenant-key": {"read_scopes": ["a"], "write_scopes": ["a"], "max_sensitivity": "low"},
    "ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "hyper", "operator": True},
}


class Idle:
    """A broker that takes every message and delivers none: operations stay queued."""

    def publish(self, kind: Any, operation_ids: Any) -> bool:
        return True


def work(database_url: str, kind: str, *, due: str, created: str, dead: bool = False) -> None:
    execute(
        database_url,
        "INSERT INTO work_items (kind, target_id, due_at, created_at, dead) "
        "VALUES (%s, gen_random_uuid(), now() + %s::interval, now() + %s::interval, %s)",
        kind,
        due,
        created,
        dead,
    )


def test_gauges_give_the_inbox_the_due_work_and_the_embedding_lag(serve: ServeFn, database_url: str) -> None:
    client = serve(dispatcher=Idle())
    for _ in range(2):
        assert client.post("/v1/captures", json=EVENT).status_code == 202
    work(database_url, "embed", due="-90 seconds", created="-100 seconds")
    work(database_url, "embed", due="-1000 seconds", created="-1000 seconds", dead=True)  # not waiting
    work(database_url, "extract", due="-30 seconds", created="-30 seconds")
    work(database_url, "decay", due="1 hour", created="-10 seconds")  # scheduled, not due
    found = prom.samples(client.get("/metrics").text)

    def gauge(name: str, **labels: str) -> float | None:
        return prom.value(found, name, **labels)

    assert gauge("membrane_inbox_operations", kind="capture", status="queued") == 2
    assert gauge("membrane_inbox_operations", kind="capture", status="running") == 0
    assert gauge("membrane_inbox_operations", kind="retract", status="queued") == 0  # every kind
    assert gauge("membrane_inbox_operations", kind="capture", status="succeeded") is None  # not depth
    assert gauge("membrane_work_due_items", kind="embed") == 1
    assert gauge("membrane_work_due_items", kind="extract") == 1
    assert gauge("membrane_work_due_items", kind="decay") == 0
    assert 89 <= (gauge("membrane_work_oldest_due_seconds", kind="embed") or 0) < 120
    assert 29 <= (gauge("membrane_work_oldest_due_seconds", kind="extract") or 0) < 60
    assert gauge("membrane_work_oldest_due_seconds", kind="decay") == 0
    assert 99 <= (gauge("membrane_embedding_lag_seconds") or 0) < 130  # the dead item is not waiting

    # the same figures as the operator's JSON document
    doc = client.get("/v1/metrics").json()
    assert doc["operations"]["capture"]["queued"] == 2
    assert doc["work_backlog"]["embed"]["due"] == 1 and doc["work_backlog"]["decay"]["due"] == 0
    assert doc["work_backlog"]["embed"]["oldest_due_seconds"] == pytest.approx(
        gauge("membrane_work_oldest_due_seconds", kind="embed"), abs=5
    )


def test_gauges_are_the_scrapers_only(serve: ServeFn) -> None:
    client = serve(keys=KEYS, metrics_token="scrape-secret")
    assert client.get("/metrics", headers={"Authorization": "Bearer tenant-key"}).status_code == 403
    for key in ("ops-key", "scrape-secret"):  # positive control: an operator and the token see them
        text = client.get("/metrics", headers={"Authorization": f"Bearer {key}"}).text
        assert "membrane_inbox_operations" in text and "membrane_embedding_lag_seconds" in text, key


def test_with_postgres_gone_a_scrape_still_gives_the_process_figures(
    serve: ServeFn, database_url: str, pg_admin_url: str
) -> None:
    client = serve(dispatcher=Idle())
    assert "membrane_work_due_items" in client.get("/metrics").text  # control: with Postgres
    name = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    with psycopg.connect(pg_admin_url, autocommit=True) as conn:
        conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(str(name))))
    resp = client.get("/metrics")
    assert resp.status_code == 200
    assert 'membrane_http_requests_total{method="GET",route="/metrics",status="200"}' in resp.text
    assert "membrane_work_due_items" not in resp.text and "membrane_inbox_operations" not in resp.text
