"""Review through HTTP (RFC 5.7, 10.3, 14.2): a reviewed key's capture is proposed, left out of
retrieval beside a trusted fact, listed in the queue for reviewer keys only, decided in batches
whose decisions fail alone, and counted in the Prometheus figures."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import httpx
import pytest

from api.keyfile import key_ring
from membrane_core import Settings, errors
from tests.support.api import ServeFn

SCOPE = "a"
KEYS: dict[str, dict[str, Any]] = {
    "model-key": {"read_scopes": [SCOPE], "write_scopes": [SCOPE], "actor": "model", "review": "required"},
    "writer-key": {"read_scopes": [SCOPE], "write_scopes": [SCOPE], "actor": "writer"},
    "reviewer-key": {"read_scopes": [SCOPE], "write_scopes": [SCOPE], "actor": "reviewer", "reviewer": True},
    "ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "actor": "ops", "operator": True},
}
QUERY = "Bob Ann lives in Rome Oslo"


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def observe(client: httpx.Client, key: str, s: str, o: str) -> dict[str, Any]:
    """One observation through ``POST /v1/captures?wait=``: its finished operation."""
    resp = client.post(
        "/v1/captures",
        params={"wait": 10},
        json={
            "source_kind": "observation",
            "scope": SCOPE,
            "content": {"subject": s, "predicate": "lives in", "object": o},
        },
        headers=bearer(key),
    )
    assert resp.status_code == 200, resp.text
    op: dict[str, Any] = resp.json()
    assert op["status"] == "succeeded", op
    return op


def retrieve(client: httpx.Client, key: str, **extra: Any) -> dict[str, str]:
    resp = client.post(
        "/v1/retrieve", json={"query": QUERY, "scopes": [SCOPE], "limit": 50, **extra}, headers=bearer(key)
    )
    assert resp.status_code == 200, resp.text
    return {r["id"]: r["status"] for r in resp.json()["records"]}


def decide(client: httpx.Client, key: str, decisions: Any) -> httpx.Response:
    return client.post("/v1/review:decide", json={"decisions": decisions}, headers=bearer(key))


def scrape(client: httpx.Client) -> str:
    resp = client.get("/metrics", headers=bearer("ops-key"))
    assert resp.status_code == 200, resp.text
    return resp.text


def test_a_reviewed_capture_is_proposed_queued_and_decided(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    trusted = observe(client, "writer-key", "Ann", "Oslo")
    proposed = observe(client, "model-key", "Bob", "Rome")
    assert trusted["result"] == {"fact": "created", "proposal_id": None}
    assert proposed["result"]["fact"] == "created"
    proposal = proposed["result"]["proposal_id"]
    assert proposal is not None
    trusted_fact, proposed_fact = trusted["record_ids"][1], proposed["record_ids"][1]

    # RFC 5.7: left out of a default retrieval, in the answer that returns the trusted fact
    seen = retrieve(client, "writer-key")
    assert seen.get(trusted_fact) == "active"
    assert proposed_fact not in seen and proposed["record_ids"][0] not in seen
    asked = retrieve(client, "writer-key", include_proposed=True)
    assert asked[proposed_fact] == "proposed" and asked[trusted_fact] == "active"
    by_id = client.get(f"/v1/records/{proposed_fact}", headers=bearer("writer-key"))
    assert by_id.status_code == 200 and by_id.json()["status"] == "proposed"

    # the queue is for reviewer keys only
    for key in ("writer-key", "model-key", "ops-key"):
        refused = client.get("/v1/review", headers=bearer(key))
        assert refused.status_code == 403, (key, refused.text)
        assert refused.json()["error"]["code"] == "forbidden"
    queue = client.get("/v1/review", headers=bearer("reviewer-key"))
    assert queue.status_code == 200, queue.text
    (entry,) = queue.json()["entries"]
    assert entry["proposal_id"] == proposal and entry["proposed_by"] == "model"
    assert entry["fact"]["id"] == proposed_fact and entry["fact"]["status"] == "proposed"
    assert proposed["record_ids"][0] in [e["id"] for e in entry["source_episodes"]]

    text = scrape(client)
    assert f'membrane_review_queue_depth{{scope="{SCOPE}"}} 1.0' in text
    assert 'membrane_review_decisions_total{decision="approved"} 0.0' in text

    # a non-reviewer decides nothing; a batch's unknown proposal fails alone
    assert decide(client, "writer-key", [{"proposal_id": proposal, "decision": "approve"}]).status_code == 403
    unknown = str(uuid.uuid4())
    resp = decide(
        client,
        "reviewer-key",
        [
            {"proposal_id": unknown, "decision": "approve"},
            {"proposal_id": proposal, "decision": "approve", "rationale": "checked the source"},
        ],
    )
    assert resp.status_code == 200, resp.text
    failed, done = resp.json()["results"]
    assert failed["proposal_id"] == unknown and failed["outcome"] is None
    assert failed["error"]["code"] == "not_found"
    assert done["proposal_id"] == proposal and done["outcome"] == "approved" and done["error"] is None
    assert set(proposed["record_ids"]) <= set(done["record_ids"])

    seen = retrieve(client, "writer-key")
    assert seen.get(proposed_fact) == "active" and seen.get(trusted_fact) == "active"
    assert client.get("/v1/review", headers=bearer("reviewer-key")).json()["entries"] == []
    text = scrape(client)
    assert 'membrane_review_decisions_total{decision="approved"} 1.0' in text
    assert f'membrane_review_queue_depth{{scope="{SCOPE}"}}' not in text  # no proposal waits
    again = decide(client, "reviewer-key", [{"proposal_id": proposal, "decision": "reject"}])
    assert again.json()["results"][0]["error"]["code"] == "revision_refused"


def test_a_rejected_proposal_is_retracted_and_not_proposed_again(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    first = observe(client, "model-key", "Bob", "Rome")
    resp = decide(
        client, "reviewer-key", [{"proposal_id": first["result"]["proposal_id"], "decision": "reject"}]
    )
    assert resp.json()["results"][0]["outcome"] == "rejected", resp.text
    fact = client.get(f"/v1/records/{first['record_ids'][1]}", headers=bearer("writer-key")).json()
    assert fact["status"] == "retracted"
    again = observe(client, "model-key", "Bob", "Rome")
    assert again["result"]["fact"] == "tombstoned" and len(again["record_ids"]) == 1
    trusted = observe(client, "writer-key", "Bob", "Rome")
    assert trusted["result"]["fact"] == "tombstoned"
    control = observe(client, "model-key", "Bob", "Paris")
    assert control["result"]["fact"] == "created" and control["result"]["proposal_id"]
    assert 'membrane_review_decisions_total{decision="rejected"} 1.0' in scrape(client)


def test_more_than_a_thousand_decisions_are_refused_naming_the_field(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    one = {"proposal_id": str(uuid.uuid4()), "decision": "reject"}
    resp = decide(client, "reviewer-key", [one] * 1001)
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_input"
    assert [d["field"] for d in error["details"]] == ["decisions"]
    full = decide(client, "reviewer-key", [one] * 1000)  # control: the most one call takes
    assert full.status_code == 200, full.text
    assert [r["error"]["code"] for r in full.json()["results"]] == ["not_found"] * 1000


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"decisions": []}, "decisions"),
        ({"decisions": "approve all"}, "decisions"),
        ({}, "decisions"),
        ({"decisions": [{"proposal_id": "not-a-uuid", "decision": "approve"}]}, "decisions.0.proposal_id"),
        (
            {"decisions": [{"proposal_id": str(uuid.UUID(int=1)), "decision": "maybe"}]},
            "decisions.0.decision",
        ),
        ({"decisions": [{"proposal_id": str(uuid.UUID(int=1)), "decision": "amend"}]}, "decisions.0"),
        (
            {"decisions": [{"proposal_id": str(uuid.UUID(int=1)), "decision": "reject", "mode": "beside"}]},
            "decisions.0",
        ),
        (
            {"decisions": [{"proposal_id": str(uuid.UUID(int=1)), "decision": "approve", "mode": "over"}]},
            "decisions.0.mode",
        ),
        (
            {"decisions": [{"proposal_id": str(uuid.UUID(int=1)), "decision": "approve", "x": 1}]},
            "decisions.0",
        ),
        ({"decisions": [{"decision": "approve"}]}, "decisions.0.proposal_id"),
    ],
)
def test_a_bad_decision_body_is_422_never_a_server_error(serve: ServeFn, body: Any, field: str) -> None:
    client = serve(keys=KEYS)
    resp = client.post("/v1/review:decide", json=body, headers=bearer("reviewer-key"))
    assert resp.status_code == 422, resp.text
    error = resp.json()["error"]
    assert error["code"] == "invalid_input"
    assert any(d["field"].startswith(field) for d in error["details"]), error


def test_bad_queue_filters_and_a_body_that_is_not_json_are_422(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    for params, field in (
        ({"order": "newest"}, "order"),
        ({"limit": 0}, "limit"),
        ({"limit": 201}, "limit"),
        ({"cursor": "garbage"}, "cursor"),
    ):
        resp = client.get("/v1/review", params=params, headers=bearer("reviewer-key"))
        assert resp.status_code == 422, (params, resp.text)
        assert any(field in d["field"] for d in resp.json()["error"]["details"]), (params, resp.text)
    raw = client.post(
        "/v1/review:decide",
        content=b"{not json",
        headers={**bearer("reviewer-key"), "Content-Type": "application/json"},
    )
    assert raw.status_code == 422, raw.text
    ok = client.get(
        "/v1/review", params={"order": "corroboration", "limit": 200}, headers=bearer("reviewer-key")
    )
    assert ok.status_code == 200 and ok.json() == {"entries": [], "next_cursor": None}  # control


@pytest.mark.parametrize(
    ("field", "value"),
    [("review", "maybe"), ("review", True), ("reviewer", "yes"), ("reviewer", 1)],
)
def test_the_review_fields_of_a_key_are_checked_when_the_keys_load(
    tmp_path: Path, field: str, value: object
) -> None:
    """RFC 10.3: the key ring the API loads at start (and on every reload of its file) refuses
    an entry whose ``review`` or ``reviewer`` is not one of its values, naming the field."""
    odd = {**KEYS, "odd-key": {"read_scopes": [SCOPE], "write_scopes": [SCOPE], field: value}}
    path = tmp_path / "keys.json"
    path.write_text(json.dumps(odd))
    for settings in (Settings(api_keys=odd), Settings(api_keys_file=path)):
        with pytest.raises(errors.InvalidInput, match=f"{field} must be"):
            key_ring(settings)
    ring = key_ring(Settings(api_keys=KEYS))  # control: the same ring without the odd entry
    assert ring.enabled
    path.write_text(json.dumps(KEYS))
    assert key_ring(Settings(api_keys_file=path)).enabled
