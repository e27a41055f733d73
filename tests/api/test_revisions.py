"""Revisions, audit, maintenance and JSON metrics through HTTP (RFC 5.2, 5.5, 6.5, 14.2)."""

from __future__ import annotations

import uuid

import httpx

FACT = {
    "source_kind": "observation",
    "scope": "project-a",
    "content": {"subject": "acme-api", "predicate": "runs_on", "object": "Python 3.12"},
}


def _fact(client: httpx.Client) -> str:
    resp = client.post("/v1/captures", params={"wait": 5}, json=FACT)
    assert resp.status_code == 200, resp.text
    return str(resp.json()["record_ids"][1])


def _objects(client: httpx.Client) -> list[str]:
    resp = client.post(
        "/v1/retrieve",
        json={"query": "acme-api runs on", "scopes": ["project-a"], "memory_types": ["semantic"]},
    )
    assert resp.status_code == 200
    return [r["payload"]["object"] for r in resp.json()["records"]]


def test_supersede_through_http_replaces_the_fact(client: httpx.Client) -> None:
    old = _fact(client)
    assert _objects(client) == ["Python 3.12"]
    resp = client.post(
        f"/v1/records/{old}/supersede",
        params={"wait": 5},
        json={
            "record": {"subject": "acme-api", "predicate": "runs_on", "object": "Python 3.13"},
            "rationale": "the Dockerfile moved to 3.13",
            "evidence": [{"kind": "artifact", "ref": "Dockerfile"}],
        },
    )
    assert resp.status_code == 200, resp.text
    op = resp.json()
    assert op["status"] == "succeeded", op["error"]
    new = op["record_ids"][0]
    assert client.get(f"/v1/records/{old}").json()["status"] == "retracted"
    assert client.get(f"/v1/records/{new}").json()["payload"]["object"] == "Python 3.13"
    assert _objects(client) == ["Python 3.13"]


def test_retract_then_audit_keeps_the_rationale(client: httpx.Client) -> None:
    rid = _fact(client)
    resp = client.post(f"/v1/records/{rid}/retract", json={"rationale": "wrong service"})
    assert resp.status_code == 202
    assert resp.headers["location"] == f"/v1/operations/{resp.json()['operation_id']}"
    assert client.get(resp.headers["location"]).json()["status"] == "succeeded"
    assert _objects(client) == []
    audit = client.get(f"/v1/records/{rid}/audit")
    assert audit.status_code == 200
    body = audit.json()
    assert body["chain_valid"] is True
    assert body["entries"][0]["action"] == "create"
    assert any(e["rationale"] == "wrong service" for e in body["entries"])


def test_revision_of_unknown_record_is_404_and_bad_body_is_refused(client: httpx.Client) -> None:
    resp = client.post(f"/v1/records/{uuid.uuid4()}/retract", json={"rationale": "x"})
    assert resp.status_code == 404
    rid = _fact(client)
    resp = client.post("/v1/records:merge", json={"record_ids": [rid], "record": {}, "rationale": "x"})
    assert resp.status_code == 422
    assert resp.json()["error"]["details"][0]["field"] == "record_ids"
    ok = client.post(f"/v1/records/{rid}/reinforce", params={"wait": 5}, json={})
    assert ok.status_code == 200
    assert ok.json()["status"] == "succeeded"


def test_maintenance_run_and_json_metrics(client: httpx.Client) -> None:
    _fact(client)
    resp = client.post("/v1/maintenance/run", params={"wait": 10}, json={"jobs": ["decay", "prune"]})
    assert resp.status_code == 200, resp.text
    assert resp.json()["status"] == "succeeded"
    bad = client.post("/v1/maintenance/run", json={"jobs": ["defrag"]})
    assert bad.status_code == 422
    # RFC 9.2: the Idempotency-Key header holds for maintenance runs too
    key = {"Idempotency-Key": "nightly-1"}
    first = client.post("/v1/maintenance/run", json={"jobs": ["decay"]}, headers=key)
    again = client.post("/v1/maintenance/run", json={"jobs": ["decay"]}, headers=key)
    assert first.json()["operation_id"] == again.json()["operation_id"]
    other = client.post("/v1/maintenance/run", json={"jobs": ["prune"]}, headers=key)
    assert other.status_code == 409
    metrics = client.get("/v1/metrics")
    assert metrics.status_code == 200
    body = metrics.json()
    assert body, body
