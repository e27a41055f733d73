"""Schemathesis over ``/openapi.json`` against the real API on the embedded Postgres: no input,
valid or not, gets a 5xx, every answer has a status and a body its operation declares, and a
request the schema allows is accepted, unless it breaks one of the few rules a JSON Schema
does not state (``UNSTATED``) (RFC 10.2, 10.4).

Bounded for CI: ``MEMBRANE_FUZZ_EXAMPLES`` examples per operation (default 25) with a fixed
seed. A longer run is one command (``docs/fuzzing.md``):

    MEMBRANE_FUZZ_EXAMPLES=1000 .venv/bin/python -m pytest tests/api/test_schemathesis.py
"""

from __future__ import annotations

import os
import re
from typing import Any

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from schemathesis.checks import CheckContext, not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    positive_data_acceptance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from tests.support.api import ServeFn

EXAMPLES = int(os.environ.get("MEMBRANE_FUZZ_EXAMPLES", "25"))

#: RFC 10.4: the rules the schema does not state, by a fragment of the refusal that names them:
#: no NUL in any text (RFC 2.4: keys of free-form JSON included, which a schema cannot reach),
#: one field compared with another, the shape one field's value asks of another, a cursor or a
#: tar only the server makes, what the deployment holds (its keys, its records' sizes).
UNSTATED = (
    "NUL character (U+0000)",
    "valid_to must be after valid_from",
    "_before must be later than",
    " content needs ",
    "amend needs record",
    "is taken by amend only",
    "is taken by approve only",
    "name exactly one target",
    "needs the confirmation of its dry run",
    "is not a cursor this server made",
    "open_sealed needs the deployment's encryption keys",
    "is not a folder or a tar of an export",
    "the bundle has no manifest.json",
    "a single record exceeds the budget",
)


def unstated(body: Any) -> bool:
    """Whether a refusal names only rules of ``UNSTATED``: each detail, or the message of one
    without details."""
    error = body.get("error", {}) if isinstance(body, dict) else {}
    texts = [d.get("message", "") for d in error.get("details", [])] or [error.get("message", "")]
    return all(any(rule in text for rule in UNSTATED) for text in texts)


def headers_match_their_patterns(case: schemathesis.Case) -> bool:
    """Whether each header sent matches its parameter's pattern: schemathesis builds header
    values from letters and digits, so one whose pattern needs another character (the
    consistency token's ``/``) may be sent outside it, which is not schema-valid input."""
    operation = SPEC["paths"][case.operation.path].get(case.method.lower(), {})
    for param in operation.get("parameters", []):
        value = (case.headers or {}).get(param["name"])
        pattern = param["schema"].get("pattern")
        if param["in"] == "header" and value is not None and pattern and not re.search(pattern, value):
            return False
    return True


@schemathesis.check
def schema_valid_input_is_accepted(ctx: CheckContext, response: Any, case: schemathesis.Case) -> bool | None:
    """``positive_data_acceptance``, but for a refusal that names an unstated rule."""
    if response.status_code in (413, 422) and unstated(response.json()):
        return None
    if not headers_match_their_patterns(case):
        return None
    return positive_data_acceptance(ctx, response, case)


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    schema_valid_input_is_accepted,
]


@pytest.fixture
def live(serve: ServeFn) -> httpx.Client:
    """A live server with a record to aim at, so that by-id routes reach their handlers too."""
    client = serve()
    resp = client.post(
        "/v1/captures",
        params={"wait": 5},
        json={
            "source_kind": "observation",
            "scope": "fuzz",
            "content": {"subject": "fuzz", "predicate": "is", "object": "running"},
        },
    )
    assert resp.status_code == 200 and resp.json()["status"] == "succeeded"
    return client


def test_the_served_schema_is_the_one_fuzzed(live: httpx.Client) -> None:
    assert live.get("/openapi.json").json() == SPEC


#: RFC 15.2: ``POST /v1/import`` takes a tar; any bytes, an empty tar among them, must get a 4xx.
schemathesis.openapi.media_type("application/x-tar", st.binary(max_size=4096) | st.just(b"\0" * 1024))

#: The app's OpenAPI document, built without starting anything; the live server serves the same
#: (checked above), and the cases are sent to it.
SPEC = create_app().openapi()
schema = schemathesis.openapi.from_dict(SPEC)


@schema.parametrize()
@seed(20261201)
@settings(max_examples=EXAMPLES, deadline=None, derandomize=False, suppress_health_check=list(HealthCheck))
def test_no_input_gets_a_server_error(case: schemathesis.Case, live: httpx.Client) -> None:
    # 503 is the one 5xx the contract allows (an outage); nothing here is down
    response = case.call(base_url=str(live.base_url), timeout=30)
    case.validate_response(response, checks=CHECKS)
    assert response.status_code < 500, (case.method, case.path, response.text)
