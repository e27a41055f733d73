"""Never a 500 for bad input: arbitrary JSON at every write endpoint (RFC 10.2)."""

from __future__ import annotations

import uuid
from typing import Any

import httpx
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

_json = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=False)
    | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=12), children, max_size=4)
    ),
    max_leaves=20,
)
_capture_like = st.fixed_dictionaries(
    {
        "source_kind": st.sampled_from(["event", "observation", "working_state", "outcome", "nope"]),
        "scope": st.text(max_size=10),
    },
    optional={
        "content": _json,
        "tags": _json,
        "sensitivity": _json,
        "occurred_at": _json,
        "metadata": _json,
        "summary": _json,
    },
)
PATHS = ["/v1/captures", "/v1/captures:batch", "/v1/retrieve", "/v1/records:merge", "/v1/maintenance/run"]


def test_odd_strings_are_refused_or_stored_never_500(client: httpx.Client) -> None:
    for text in ("nul \u0000 char", "lone \ud800 surrogate", "emoji \U0001f600 ok", "\\u0000 escaped"):
        for body in (
            {"source_kind": "event", "scope": "a", "content": {"text": text}},
            {"source_kind": "event", "scope": text, "content": {"text": "x"}},
            {"source_kind": "event", "scope": "a", "content": {text: "key"}},
        ):
            resp = client.post(
                "/v1/captures",
                params={"wait": 5},
                content=_dumps(body),
                headers={"content-type": "application/json"},
            )
            assert resp.status_code in (200, 202, 413, 422), (text, resp.status_code, resp.text)
            if resp.status_code == 200:
                assert resp.json()["status"] in ("succeeded", "failed")


def _dumps(body: Any) -> bytes:
    import json

    # ensure_ascii keeps lone surrogates encodable as JSON escapes
    return json.dumps(body, ensure_ascii=True).encode()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(path=st.sampled_from(PATHS), body=_json | _capture_like)
def test_arbitrary_json_never_gets_a_500(client: httpx.Client, path: str, body: Any) -> None:
    if path.endswith(":batch"):
        body = {"captures": body if isinstance(body, list) else [body]}
    resp = client.post(path, content=_dumps(body), headers={"content-type": "application/json"})
    assert resp.status_code < 500, (path, body, resp.text)
    assert "error" in resp.json() or resp.status_code in (200, 202)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(kind=st.sampled_from(["supersede", "fork", "retract", "contest", "reinforce", "penalize"]), body=_json)
def test_arbitrary_revision_bodies_never_get_a_500(client: httpx.Client, kind: str, body: Any) -> None:
    resp = client.post(
        f"/v1/records/{uuid.uuid4()}/{kind}",
        content=_dumps(body),
        headers={"content-type": "application/json"},
    )
    assert resp.status_code < 500, (kind, body, resp.text)
