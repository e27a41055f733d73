"""Retrieval and records through HTTP (RFC 8, 5.1)."""

from __future__ import annotations

import uuid

import httpx


def _capture(client: httpx.Client, **body: object) -> list[str]:
    resp = client.post("/v1/captures", params={"wait": 5}, json=body)
    assert resp.status_code == 200, resp.text
    ids: list[str] = resp.json()["record_ids"]
    return ids


def test_retrieve_returns_captured_records_in_scope_only(client: httpx.Client) -> None:
    _capture(
        client,
        source_kind="observation",
        scope="project-a",
        content={"subject": "billing service", "predicate": "runs_on", "object": "Python 3.12"},
    )
    _capture(
        client,
        source_kind="event",
        scope="project-b",
        content={"text": "billing service incident in another project"},
    )
    resp = client.post("/v1/retrieve", json={"query": "billing service", "scopes": ["project-a"]})
    assert resp.status_code == 200
    body = resp.json()
    assert set(body) >= {"records", "neighbors", "edges", "diagnostics"}
    assert body["records"], body
    assert {r["scope"] for r in body["records"]} == {"project-a"}
    assert any((r["payload"] or {}).get("object") == "Python 3.12" for r in body["records"])
    assert all("score" in r for r in body["records"])


def test_unknown_record_is_404(client: httpx.Client) -> None:
    resp = client.get(f"/v1/records/{uuid.uuid4()}")
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "not_found"
