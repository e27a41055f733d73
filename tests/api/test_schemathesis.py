"""Schemathesis over ``/openapi.json`` against the real API on the embedded Postgres: no input,
valid or not, gets a 5xx, and every answer has a status and a body its operation declares
(RFC 10.2, 10.4).

Bounded for CI: ``MEMBRANE_FUZZ_EXAMPLES`` examples per operation (default 25) with a fixed
seed. A longer run is one command (``docs/fuzzing.md``):

    MEMBRANE_FUZZ_EXAMPLES=1000 .venv/bin/python -m pytest tests/api/test_schemathesis.py
"""

from __future__ import annotations

import os

import httpx
import pytest
import schemathesis
from hypothesis import HealthCheck, seed, settings
from hypothesis import strategies as st
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from api.app import create_app
from tests.support.api import ServeFn

EXAMPLES = int(os.environ.get("MEMBRANE_FUZZ_EXAMPLES", "25"))
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
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
