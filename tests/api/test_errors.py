"""Bad input: 422 naming fields, 413 over budgets, never a 500; nothing partially written."""

from __future__ import annotations

import httpx

from tests.support.api import ServeFn


def _fields(resp: httpx.Response) -> set[str]:
    body = resp.json()
    assert set(body) == {"error"}
    assert set(body["error"]) == {"code", "message", "details"}
    return {d["field"] for d in body["error"]["details"]}


def test_invalid_capture_is_422_naming_each_field(client: httpx.Client) -> None:
    resp = client.post("/v1/captures", json={"source_kind": "dream", "content": {}})
    assert resp.status_code == 422
    assert resp.json()["error"]["code"] == "invalid_input"
    assert {"source_kind", "scope"} <= _fields(resp)


def test_malformed_json_and_wrong_types_are_422(client: httpx.Client) -> None:
    resp = client.post("/v1/captures", content=b"{not json", headers={"content-type": "application/json"})
    assert resp.status_code == 422
    resp = client.post("/v1/retrieve", json={"limit": 0, "as_of": "yesterday"})
    assert resp.status_code == 422
    assert {"limit", "as_of"} <= _fields(resp)
    resp = client.post(
        "/v1/captures",
        params={"wait": 31},
        json={"source_kind": "event", "scope": "a", "content": {"text": "x"}},
    )
    assert resp.status_code == 422
    assert "query.wait" in _fields(resp)


def test_non_uuid_ids_are_422_not_500(client: httpx.Client) -> None:
    for path in ("/v1/records/not-a-uuid", "/v1/operations/42", "/v1/records/xyz/audit"):
        resp = client.get(path)
        assert resp.status_code == 422, path
        assert resp.json()["error"]["code"] == "invalid_input"


def test_content_over_the_payload_budget_is_413_and_writes_nothing(client: httpx.Client) -> None:
    big = {"source_kind": "event", "scope": "project-a", "content": {"text": "x" * 300_000}}
    resp = client.post("/v1/captures", json=big)
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "payload_too_large"
    assert "content" in _fields(resp)
    deep: dict[str, object] = {"text": "deep"}
    for _ in range(20):
        deep = {"nested": deep}
    resp = client.post("/v1/captures", json={"source_kind": "event", "scope": "project-a", "content": deep})
    assert resp.status_code == 413
    found = client.post("/v1/retrieve", json={"scopes": ["project-a"]})
    assert found.status_code == 200
    assert found.json()["records"] == []
    ok = client.post(
        "/v1/captures",
        params={"wait": 5},
        json={"source_kind": "event", "scope": "project-a", "content": {"text": "x" * 1000}},
    )
    assert ok.status_code == 200  # positive control: a capture within budget is written


def test_body_over_the_request_byte_budget_is_413(serve: ServeFn) -> None:
    client = serve(max_body_bytes=4096, max_batch_body_bytes=8192)
    capture = {"source_kind": "event", "scope": "project-a", "content": {"text": "y" * 5000}}
    resp = client.post("/v1/captures", json=capture)
    assert resp.status_code == 413
    assert "body" in _fields(resp)

    def chunks() -> object:  # no Content-Length: the limit is enforced while streaming
        yield b'{"source_kind": "event", "scope": "project-a", "content": {"text": "'
        for _ in range(10):
            yield b"z" * 1000
        yield b'"}}'

    resp = client.post(
        "/v1/captures",
        content=chunks(),  # type: ignore[arg-type]
        headers={"content-type": "application/json"},
    )
    assert resp.status_code == 413
    assert resp.json()["error"]["code"] == "payload_too_large"

    batch = {"captures": [dict(capture, content={"text": "w" * 1000})] * 5}
    assert client.post("/v1/captures:batch", json=batch).status_code == 202  # batch budget is larger
    small = dict(capture, content={"text": "fits"})
    assert client.post("/v1/captures", json=small).status_code == 202


def test_unknown_route_and_method_use_the_error_shape(client: httpx.Client) -> None:
    resp = client.get("/v1/nothing-here")
    assert resp.status_code == 404
    assert resp.json()["error"]["code"] == "not_found"
    resp = client.delete("/v1/captures")
    assert resp.status_code == 405
    assert resp.json()["error"]["code"] == "method_not_allowed"


def test_content_shape_errors_name_the_content_and_the_missing_keys(client: httpx.Client) -> None:
    resp = client.post(
        "/v1/captures", json={"source_kind": "observation", "scope": "a", "content": {"subject": "user"}}
    )
    assert resp.status_code == 422
    err = resp.json()["error"]
    assert err["details"][0]["field"] == "content"
    assert "predicate" in err["message"]
