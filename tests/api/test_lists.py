"""The list routes through HTTP (RFC 10.7): pages, trust, operator-only routes, clear errors."""

from __future__ import annotations

import httpx

from tests.support.api import ServeFn
from tests.support.records import bury

KEYS = {
    "low-key": {"read_scopes": ["a"], "write_scopes": ["a"], "max_sensitivity": "low", "actor": "low"},
    "full-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "hyper", "actor": "full"},
    "ops-key": {
        "read_scopes": ["*"],
        "write_scopes": ["*"],
        "max_sensitivity": "hyper",
        "actor": "ops",
        "operator": True,
    },
}


def _auth(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"} if key else {}


def _capture(client: httpx.Client, key: str, **body: object) -> list[str]:
    resp = client.post("/v1/captures", params={"wait": 5}, json=body, headers=_auth(key))
    assert resp.status_code == 200, resp.text
    ids: list[str] = resp.json()["record_ids"]
    return ids


def test_records_pages_and_trust(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    low = _capture(
        client, "full-key", source_kind="event", scope="a", sensitivity="low", content={"text": "plain"}
    )
    med = _capture(
        client, "full-key", source_kind="event", scope="a", sensitivity="medium", content={"text": "m"}
    )
    other = _capture(client, "full-key", source_kind="event", scope="b", content={"text": "elsewhere"})
    full = client.get("/v1/records", headers=_auth("full-key"))
    assert full.status_code == 200, full.text
    assert {r["id"] for r in full.json()["records"]} >= {*low, *med, *other}  # positive control
    seen = client.get("/v1/records", headers=_auth("low-key")).json()["records"]
    assert {r["id"] for r in seen} == {*low, *med}
    assert [r["redacted"] for r in seen if r["id"] in med] == [True]
    assert client.get("/v1/records", params={"scope": "b"}, headers=_auth("low-key")).status_code == 403
    assert client.get("/v1/records", headers={}).status_code == 401

    first = client.get("/v1/records", params={"limit": 1, "scope": "a"}, headers=_auth("full-key")).json()
    nxt = client.get(
        "/v1/records",
        params={"limit": 1, "scope": "a", "cursor": first["next_cursor"]},
        headers=_auth("full-key"),
    ).json()
    assert first["records"][0]["id"] != nxt["records"][0]["id"]
    assert first["diagnostics"]["row_limit_applied"] is True


def test_bad_filters_are_named_not_server_errors(serve: ServeFn) -> None:
    client = serve()
    for params, field in (
        ({"limit": 0}, "limit"),
        ({"cursor": "garbage"}, "cursor"),
        ({"entity": "nope"}, "entity"),
        ({"type": "memo"}, "type"),
        ({"created_after": "yesterday"}, "created_after"),
        ({"created_after": "2026-01-02T00:00:00Z", "created_before": "2026-01-01T00:00:00Z"}, ""),
    ):
        resp = client.get("/v1/records", params=params)
        assert resp.status_code == 422, (params, resp.text)
        body = resp.json()["error"]
        assert body["code"] == "invalid_input"
        if field:
            assert any(field in d["field"] for d in body["details"]), (params, body)
    assert client.get("/v1/operations", params={"status": "done"}).status_code == 422
    assert client.post("/v1/work:requeue", json={"ids": []}).status_code == 422


def test_lineage_through_http(serve: ServeFn) -> None:
    client = serve()
    _, fact = _capture(
        client,
        "",
        source_kind="observation",
        scope="a",
        content={"subject": "ann", "predicate": "lives in", "object": "x"},
    )
    resp = client.post(
        f"/v1/records/{fact}/supersede",
        params={"wait": 5},
        json={
            "record": {"object": "y"},
            "rationale": "moved",
            "evidence": [{"kind": "observation", "ref": "r"}],
        },
    )
    assert resp.status_code == 200, resp.text
    new = resp.json()["record_ids"][0]
    lin = client.get(f"/v1/records/{fact}/lineage").json()
    assert [(e["kind"], e["source_id"], e["target_id"], e["rationale"]) for e in lin["edges"]] == [
        ("supersedes", new, fact, "moved")
    ]
    assert client.get("/v1/records/00000000-0000-0000-0000-000000000000/lineage").status_code == 404


def test_work_is_for_operators_and_requeue_puts_items_back(serve: ServeFn, database_url: str) -> None:
    client = serve(keys=KEYS)
    (rid,) = _capture(client, "full-key", source_kind="event", scope="a", content={"text": "work"})
    item = bury(database_url, rid, error="boom")
    assert client.get("/v1/work", headers=_auth("full-key")).status_code == 403
    work = client.get("/v1/work", headers=_auth("ops-key"))
    assert work.status_code == 200, work.text
    assert [(b["id"], b["last_error"]) for b in work.json()["buried"]] == [(item, "boom")]
    done = client.post("/v1/work:requeue", json={"ids": [item]}, headers=_auth("ops-key"))
    assert done.json() == {"requeued": [item], "unchanged": []}
    again = client.post("/v1/work:requeue", json={"ids": [item]}, headers=_auth("ops-key"))
    assert again.json() == {"requeued": [], "unchanged": [item]}
    assert client.post("/v1/work:requeue", json={"ids": [item]}, headers=_auth("full-key")).status_code == 403


def test_operations_and_scopes(serve: ServeFn) -> None:
    client = serve(keys=KEYS)
    _capture(client, "low-key", source_kind="event", scope="a", content={"text": "mine"})
    _capture(client, "full-key", source_kind="event", scope="b", content={"text": "theirs"})
    own = client.get("/v1/operations", headers=_auth("low-key")).json()["operations"]
    assert [o["principal"] for o in own] == ["low"]
    every = client.get("/v1/operations", headers=_auth("ops-key")).json()["operations"]
    assert {o["principal"] for o in every} == {"low", "full"}
    scopes = client.get("/v1/scopes", headers=_auth("low-key")).json()["scopes"]
    assert [(s["scope"], s["records"]) for s in scopes] == [("a", 1)]
