"""Captures through HTTP: 202 + Location → operation → record; ?wait; batches; idempotency."""

from __future__ import annotations

import uuid

import httpx

from tests.support.api import BrokenDispatcher, ServeFn
from tests.support.sql import rows

EVENT = {
    "source_kind": "event",
    "scope": "project-a",
    "summary": "deploy started",
    "content": {"text": "the deploy of build 41 started", "entities": ["build 41"]},
}
FACT = {
    "source_kind": "observation",
    "scope": "project-a",
    "content": {"subject": "user", "predicate": "prefers", "object": "dark mode"},
}


def test_capture_answers_202_with_location_then_the_operation_and_record(client: httpx.Client) -> None:
    resp = client.post("/v1/captures", json=EVENT)
    assert resp.status_code == 202
    body = resp.json()
    assert body["status"] == "queued"
    assert resp.headers["location"] == f"/v1/operations/{body['operation_id']}"
    record_id = body["record_id"]

    op = client.get(resp.headers["location"])
    assert op.status_code == 200
    assert op.json()["status"] == "succeeded"
    assert op.json()["record_ids"] == [record_id]

    rec = client.get(f"/v1/records/{record_id}")
    assert rec.status_code == 200
    assert rec.json()["type"] == "episodic"
    assert rec.json()["status"] == "active"
    assert rec.json()["payload"]["text"] == "the deploy of build 41 started"


def test_wait_answers_200_with_the_finished_operation(client: httpx.Client) -> None:
    resp = client.post("/v1/captures", params={"wait": 5}, json=FACT)
    assert resp.status_code == 200
    op = resp.json()
    assert op["status"] == "succeeded"
    assert op["finished_at"]
    episode_id, fact_id = op["record_ids"]
    assert client.get(f"/v1/records/{episode_id}").json()["type"] == "episodic"
    fact = client.get(f"/v1/records/{fact_id}").json()
    assert fact["type"] == "semantic"
    assert fact["payload"]["object"] == "dark mode"


def test_wait_without_a_worker_answers_202_still_queued(serve: ServeFn) -> None:
    broken = BrokenDispatcher()
    client = serve(dispatcher=broken)
    resp = client.post("/v1/captures", params={"wait": 0.3}, json=EVENT)
    assert resp.status_code == 202
    assert resp.json()["status"] == "queued"
    assert broken.calls == 1


def test_broker_down_at_accept_still_answers_202_and_keeps_the_operation(serve: ServeFn) -> None:
    client = serve(dispatcher=BrokenDispatcher())
    resp = client.post("/v1/captures", json=EVENT)
    assert resp.status_code == 202
    op = client.get(resp.headers["location"])
    assert op.status_code == 200
    assert op.json()["status"] == "queued"  # durable in the inbox; beat re-dispatches it


def test_batch_with_one_bad_item_fails_only_that_item(client: httpx.Client) -> None:
    bad = {"source_kind": "observation", "scope": "project-a", "content": {"subject": "x"}}
    resp = client.post("/v1/captures:batch", params={"wait": 5}, json={"captures": [EVENT, bad, FACT]})
    assert resp.status_code == 200
    ops = resp.json()["operations"]
    assert [op["status"] for op in ops] == ["succeeded", "failed", "succeeded"]
    assert ops[1]["error"]["code"] == "invalid_input"
    assert "predicate" in ops[1]["error"]["message"]
    assert len(ops[2]["record_ids"]) == 2
    for op in (ops[0], ops[2]):
        assert client.get(f"/v1/records/{op['record_ids'][0]}").status_code == 200


def test_batch_without_wait_answers_202_in_input_order(client: httpx.Client) -> None:
    captures = [dict(EVENT, summary=f"event {i}") for i in range(25)]
    resp = client.post("/v1/captures:batch", json={"captures": captures})
    assert resp.status_code == 202
    ops = resp.json()["operations"]
    assert len(ops) == 25
    for i in (0, 24):
        rec = client.get(f"/v1/records/{ops[i]['record_id']}").json()
        assert rec["summary"] == f"event {i}"


def test_batch_over_1000_is_refused_naming_the_field(client: httpx.Client) -> None:
    resp = client.post("/v1/captures:batch", json={"captures": [EVENT] * 1001})
    assert resp.status_code == 422
    assert resp.json()["error"]["details"][0]["field"] == "captures"
    ok = client.post("/v1/captures:batch", json={"captures": [EVENT] * 3})
    assert ok.status_code == 202


def test_idempotency_key_same_body_same_operation_other_body_409(client: httpx.Client) -> None:
    key = {"Idempotency-Key": f"k-{uuid.uuid4()}"}
    first = client.post("/v1/captures", json=EVENT, headers=key)
    again = client.post("/v1/captures", json=EVENT, headers=key)
    assert first.status_code == 202
    assert again.status_code == 200  # a replay of a finished operation answers it finished
    assert again.json()["operation_id"] == first.json()["operation_id"]
    assert again.json()["status"] == "succeeded"

    other = client.post("/v1/captures", json=dict(EVENT, summary="another body"), headers=key)
    assert other.status_code == 409
    assert other.json()["error"]["code"] == "idempotency_conflict"


def test_operation_of_unknown_id_is_404(client: httpx.Client) -> None:
    resp = client.get(f"/v1/operations/{uuid.uuid4()}")
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "not_found"


def test_batch_idempotency_key_replays_the_same_operations(client: httpx.Client) -> None:
    key = {"Idempotency-Key": f"b-{uuid.uuid4()}"}
    body = {"captures": [EVENT, FACT]}
    first = client.post("/v1/captures:batch", json=body, headers=key)
    again = client.post("/v1/captures:batch", json=body, headers=key)
    ids = [op["operation_id"] for op in first.json()["operations"]]
    assert [op["operation_id"] for op in again.json()["operations"]] == ids
    other = client.post("/v1/captures:batch", json={"captures": [FACT, EVENT]}, headers=key)
    assert other.status_code == 409


def test_batch_of_only_invalid_items_is_answered_finished(client: httpx.Client) -> None:
    resp = client.post("/v1/captures:batch", json={"captures": [{"scope": "a"}, {"source_kind": "event"}]})
    assert resp.status_code == 200
    ops = resp.json()["operations"]
    assert [op["status"] for op in ops] == ["failed", "failed"]
    assert all(op["error"]["code"] == "invalid_input" for op in ops)


def test_a_capture_sets_its_records_max_age(client: httpx.Client, database_url: str) -> None:
    resp = client.post("/v1/captures", params={"wait": 5}, json={**EVENT, "max_age_seconds": 3600})
    assert resp.status_code == 200
    (record_id,) = resp.json()["record_ids"]
    assert rows(database_url, "SELECT max_age_seconds FROM memory_records WHERE id = %s", record_id) == [
        (3600,)
    ]
    refused = client.post("/v1/captures", json={**EVENT, "max_age_seconds": 0})
    assert refused.status_code == 422
    assert refused.json()["error"]["details"][0]["field"] == "max_age_seconds"
