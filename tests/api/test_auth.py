"""Bearer keys mapped to trust policies: 401 without a valid key, 403 beyond the policy."""

from __future__ import annotations

import uuid

import httpx
import pytest

from api.auth import KeyRing
from tests.support.api import ServeFn

KEYS = {
    "writer-key": {"read_scopes": ["team-a"], "write_scopes": ["team-a"], "max_sensitivity": "medium"},
    "reader-key": {"read_scopes": ["team-a"], "write_scopes": [], "max_sensitivity": "low"},
    "ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "hyper"},
}
EVENT = {"source_kind": "event", "scope": "team-a", "content": {"text": "standup moved to 10:00"}}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


@pytest.fixture
def keyed(serve: ServeFn) -> httpx.Client:
    return serve(keys=KEYS)


def test_missing_or_unknown_key_is_401(keyed: httpx.Client) -> None:
    resp = keyed.post("/v1/captures", json=EVENT)
    assert resp.status_code == 401
    assert resp.json()["error"]["code"] == "unauthorized"
    assert resp.headers["www-authenticate"] == "Bearer"
    assert keyed.post("/v1/retrieve", json={}, headers=bearer("nope")).status_code == 401
    assert keyed.get("/v1/metrics", headers={"Authorization": "Basic abc"}).status_code == 401
    ok = keyed.post("/v1/captures", json=EVENT, headers=bearer("writer-key"))
    assert ok.status_code == 202


def test_writes_and_reads_beyond_the_policy_are_403(keyed: httpx.Client) -> None:
    resp = keyed.post("/v1/captures", json=EVENT, headers=bearer("reader-key"))
    assert resp.status_code == 403
    assert resp.json()["error"]["details"][0]["field"] == "scope"
    resp = keyed.post("/v1/captures", json=dict(EVENT, scope="team-b"), headers=bearer("writer-key"))
    assert resp.status_code == 403
    resp = keyed.post("/v1/captures", json=dict(EVENT, sensitivity="high"), headers=bearer("writer-key"))
    assert resp.status_code == 403
    resp = keyed.post("/v1/retrieve", json={"scopes": ["team-b"]}, headers=bearer("reader-key"))
    assert resp.status_code == 403
    resp = keyed.post("/v1/retrieve", json={"max_sensitivity": "high"}, headers=bearer("reader-key"))
    assert resp.status_code == 403
    ok = keyed.post("/v1/retrieve", json={"scopes": ["team-a"]}, headers=bearer("reader-key"))
    assert ok.status_code == 200


def test_each_key_reads_what_its_policy_allows(keyed: httpx.Client) -> None:
    medium = keyed.post(
        "/v1/captures",
        params={"wait": 5},
        headers=bearer("writer-key"),
        json=dict(EVENT, sensitivity="medium", content={"text": "salary bands"}),
    )
    plain = keyed.post("/v1/captures", params={"wait": 5}, headers=bearer("writer-key"), json=EVENT)
    assert medium.status_code == plain.status_code == 200
    medium_id, plain_id = medium.json()["record_ids"][0], plain.json()["record_ids"][0]

    as_reader = keyed.get(f"/v1/records/{medium_id}", headers=bearer("reader-key")).json()
    assert as_reader["redacted"] is True  # one level above the reader's maximum
    assert as_reader["payload"] is None
    as_writer = keyed.get(f"/v1/records/{medium_id}", headers=bearer("writer-key")).json()
    assert as_writer["redacted"] is False
    assert as_writer["payload"]["text"] == "salary bands"
    assert keyed.get(f"/v1/records/{plain_id}", headers=bearer("reader-key")).json()["redacted"] is False


def test_operations_are_visible_to_their_submitter_and_operators_only(keyed: httpx.Client) -> None:
    resp = keyed.post("/v1/captures", json=EVENT, headers=bearer("writer-key"))
    location = resp.headers["location"]
    assert keyed.get(location, headers=bearer("writer-key")).status_code == 200
    assert keyed.get(location, headers=bearer("ops-key")).status_code == 200
    assert keyed.get(location, headers=bearer("reader-key")).status_code == 404


def test_revisions_answer_at_submission_as_they_would_when_run(keyed: httpx.Client) -> None:
    """RFC 5.2, 7.2, 9.1: a target seen redacted is 403 (a hidden or missing one 404), and a
    new record above the caller's level is 403, before anything is written."""
    made = keyed.post(
        "/v1/captures",
        params={"wait": 5},
        headers=bearer("ops-key"),
        json={
            "source_kind": "observation",
            "scope": "team-a",
            "sensitivity": "high",
            "content": {"subject": "svc", "predicate": "runs_on", "object": "x"},
        },
    )
    high = made.json()["record_ids"][1]
    assert keyed.get(f"/v1/records/{high}", headers=bearer("writer-key")).json()["redacted"]
    retract = {"rationale": "wrong"}
    assert (
        keyed.post(
            f"/v1/records/{uuid.uuid4()}/retract", json=retract, headers=bearer("writer-key")
        ).status_code
        == 404
    )  # control: missing
    assert (
        keyed.post(f"/v1/records/{high}/retract", json=retract, headers=bearer("writer-key")).status_code
        == 403
    )
    own = keyed.post(
        "/v1/captures",
        params={"wait": 5},
        headers=bearer("writer-key"),
        json={
            "source_kind": "observation",
            "scope": "team-a",
            "content": {"subject": "svc", "predicate": "runs_on", "object": "y"},
        },
    ).json()["record_ids"][1]
    up = {
        "record": {"sensitivity": "hyper"},
        "rationale": "r",
        "evidence": [{"kind": "observation", "ref": "said so"}],
    }
    resp = keyed.post(
        f"/v1/records/{own}/supersede", json=up, headers=bearer("writer-key"), params={"wait": 5}
    )
    assert resp.status_code == 403 and resp.json()["error"]["details"][0]["field"] == "record.sensitivity"
    ok = keyed.post(
        f"/v1/records/{own}/supersede",
        headers=bearer("writer-key"),
        params={"wait": 5},
        json={**up, "record": {"sensitivity": "medium"}},
    )
    assert ok.status_code == 200 and ok.json()["status"] == "succeeded"  # control


def test_an_operator_is_cleared_for_every_level(serve: ServeFn) -> None:
    """RFC 9.1: an operation's record ids may name any level; reading another principal's
    operation needs every scope and every level."""
    keys = {
        **KEYS,
        "ops-low": {
            "read_scopes": ["*"],
            "write_scopes": ["*"],
            "max_sensitivity": "low",
            "actor": "ops-low",
        },
    }
    c = serve(keys=keys)
    location = c.post("/v1/captures", json=EVENT, headers=bearer("writer-key")).headers["location"]
    assert c.get(location, headers=bearer("ops-key")).status_code == 200  # control
    assert c.get(location, headers=bearer("ops-low")).status_code == 404


def test_keys_of_one_actor_share_one_policy() -> None:
    """RFC 9.1, 10.3: operations and idempotency keys belong to the actor."""
    same = {"read_scopes": ["a"], "write_scopes": ["a"], "actor": "pipeline"}
    assert KeyRing({"old": same, "new": same}).enabled  # control: a rotated key
    with pytest.raises(ValueError, match="actor 'pipeline'"):
        KeyRing({"old": same, "new": {**same, "read_scopes": ["a", "b"]}})
