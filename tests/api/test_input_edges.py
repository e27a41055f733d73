"""What cannot be stored as sent is refused, naming the field; a bug is a 500 that keeps the
connection (RFC 2.4, 10.2).

Each refusal has a positive control beside it: the same request without the bad part is
accepted, so a test cannot pass because everything is refused.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest

from membrane_core import Membrane
from tests.support.api import ServeFn

EVENT = {"source_kind": "event", "scope": "edges", "content": {"text": "plain"}}


def _post(client: httpx.Client, path: str, text: str, **params: Any) -> httpx.Response:
    # the body as raw JSON text: NaN, Infinity and 1e400 cannot be written by json= (httpx
    # refuses them), and a client may send them all the same
    return client.post(
        path, content=text.encode(), params=params, headers={"content-type": "application/json"}
    )


def _refused(resp: httpx.Response, field: str, kind: str) -> None:
    assert resp.status_code == 422, resp.text
    err = resp.json()["error"]
    assert err["code"] == "invalid_input"
    assert {"field": field, "type": kind} in [
        {"field": d["field"], "type": d["type"]} for d in err["details"]
    ], err


@pytest.mark.parametrize(
    ("path", "body", "field"),
    [
        ("/v1/retrieve", '{"query": "a\\u0000"}', "query"),
        ("/v1/retrieve", '{"scopes": ["edges\\u0000"]}', "scopes.0"),
        ("/v1/captures", '{"source_kind": "event", "scope": "s\\u0000", "content": {"text": "x"}}', "scope"),
        (
            "/v1/captures",
            '{"source_kind": "event", "scope": "edges", "content": {"a\\u0000": 1}}',
            "content.a\\u0000",
        ),
        (
            "/v1/captures",
            '{"source_kind": "event", "scope": "edges", "content": {"text": "x"}, '
            '"metadata": {"k": ["ok", "b\\u0000"]}}',
            "metadata.k.1",
        ),
        (
            "/v1/captures",
            '{"source_kind": "event", "scope": "edges", "content": {"text": "x"}, "tags": ["t\\u0000"]}',
            "tags.0",
        ),
    ],
)
def test_a_nul_anywhere_is_422_naming_the_field(
    client: httpx.Client, path: str, body: str, field: str
) -> None:
    _refused(_post(client, path, body), field, "nul_character")
    # positive control: the same body without the NUL is accepted
    assert _post(client, path, body.replace("\\u0000", "")).status_code in (200, 202)


def test_an_escaped_backslash_before_u0000_is_text_not_a_nul(client: httpx.Client) -> None:
    resp = _post(client, "/v1/captures", json.dumps({**EVENT, "content": {"text": "\\u0000"}}), wait=5)
    assert resp.status_code == 200 and resp.json()["status"] == "succeeded"


@pytest.mark.parametrize("number", ["NaN", "Infinity", "-Infinity", "1e400", "-1e400"])
def test_non_finite_and_out_of_range_numbers_are_422_naming_the_field(
    client: httpx.Client, number: str
) -> None:
    capture = '{"source_kind": "event", "scope": "edges", "content": {"text": "x", "n": [%s]}}'
    _refused(_post(client, "/v1/captures", capture % number), "content.n.0", "finite_number")
    _refused(_post(client, "/v1/retrieve", f'{{"min_salience": {number}}}'), "min_salience", "finite_number")
    supersede = (
        '{"rationale": "r", "record": {"subject": "a", "predicate": "b", "object": "c", "confidence": %s}}'
    )
    _refused(
        _post(client, "/v1/records/00000000-0000-0000-0000-000000000001/supersede", supersede % number),
        "record.confidence",
        "finite_number",
    )
    # positive control: a finite number in the same place is stored as sent
    ok = _post(client, "/v1/captures", capture % "-2.5e-3", wait=5)
    assert ok.status_code == 200 and ok.json()["status"] == "succeeded"
    record_id = ok.json()["record_ids"][0]
    assert client.get(f"/v1/records/{record_id}").json()["payload"]["data"] == {"n": [-2.5e-3]}


def test_a_time_without_a_zone_is_refused(client: httpx.Client) -> None:
    resp = client.post("/v1/captures", json={**EVENT, "occurred_at": "2026-03-01T10:00:00"})
    assert resp.status_code == 422
    assert "occurred_at" in {d["field"] for d in resp.json()["error"]["details"]}
    resp = client.post("/v1/retrieve", json={"as_of": "2026-03-01T10:00:00"})
    assert resp.status_code == 422
    resp = client.post(
        "/v1/captures",
        json={
            "source_kind": "observation",
            "scope": "edges",
            "content": {"subject": "a", "predicate": "b", "object": "c", "valid_from": "2026-03-01T10:00:00"},
        },
    )
    assert resp.status_code == 422
    assert "content.valid_from" in {d["field"] for d in resp.json()["error"]["details"]}
    resp = client.get(
        "/v1/records/00000000-0000-0000-0000-000000000001", params={"as_of": "2026-03-01T10:00:00"}
    )
    assert resp.status_code == 422
    # positive control: the same times with a zone are accepted
    ok = client.post(
        "/v1/captures", params={"wait": 5}, json={**EVENT, "occurred_at": "2026-03-01T10:00:00+02:00"}
    )
    assert ok.status_code == 200 and ok.json()["status"] == "succeeded"
    assert client.post("/v1/retrieve", json={"as_of": "2026-03-01T10:00:00Z"}).status_code == 200


@pytest.mark.parametrize(
    ("path", "param"),
    [
        ("/v1/records/00000000-0000-0000-0000-000000000001", "valid_at"),
        ("/v1/records/00000000-0000-0000-0000-000000000001", "as_of"),
        ("/v1/records", "created_after"),
        ("/v1/records/00000000-0000-0000-0000-000000000001/lineage", "as_of"),
        ("/v1/operations", "created_before"),
        ("/v1/export", "created_after"),
    ],
)
def test_a_date_time_parameter_is_an_iso8601_string_never_a_unix_time(
    client: httpx.Client, path: str, param: str
) -> None:
    """RFC 10.4: ``format: date-time`` is what the server reads; pydantic alone would take
    ``-565`` as 1969-12-31T23:50:35Z."""
    for number in ("-565", "1700000000", "1.5e9"):
        resp = client.get(path, params={param: number})
        assert resp.status_code == 422, (number, resp.text)
        detail = resp.json()["error"]["details"][0]
        assert detail["field"] == f"query.{param}"
        assert "ISO 8601" in detail["message"]
    # positive control: the same parameter as ISO 8601 passes validation (a 404 for the record
    # that does not exist, else the list)
    resp = client.get(path, params={param: "2026-03-01T10:00:00+02:00"})
    assert resp.status_code in (200, 404), resp.text


def test_one_bad_batch_item_fails_alone(client: httpx.Client) -> None:
    second = json.dumps({**EVENT, "content": {"text": "second"}})
    text = (
        '{"captures": [{"a\\u0000": null}, ' + json.dumps(EVENT) + ", "
        '{"source_kind": "event", "scope": "edges", "content": {"n": NaN}}, ' + second + "]}"
    )
    resp = _post(client, "/v1/captures:batch", text, wait=5)
    assert resp.status_code == 200, resp.text
    ops = resp.json()["operations"]
    assert [op["status"] for op in ops] == ["failed", "succeeded", "failed", "succeeded"]
    assert ops[0]["error"]["details"][0]["type"] == "nul_character"
    assert ops[2]["error"]["details"][0] == {
        "field": "content.n",
        "message": "not a finite number",
        "type": "finite_number",
    }


def test_an_unhandled_error_is_a_500_in_the_error_shape_that_keeps_the_connection(
    serve: ServeFn, api_membrane: Membrane, monkeypatch: pytest.MonkeyPatch
) -> None:
    client = serve()

    def broken(*args: object, **kwargs: object) -> None:
        raise RuntimeError("the secret detail")

    monkeypatch.setattr(api_membrane, "retrieve", broken)
    resp = client.post("/v1/retrieve", json={"query": "x"})
    assert resp.status_code == 500
    assert resp.json()["error"]["code"] == "internal"
    assert "secret detail" not in resp.text  # the traceback goes to the log only
    assert resp.headers.get("connection") != "close"
    # the next request on the same keep-alive connection is served
    assert client.get("/healthz").status_code == 200
    monkeypatch.undo()
    assert client.post("/v1/retrieve", json={"query": "x"}).status_code == 200
