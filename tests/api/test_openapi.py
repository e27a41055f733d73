"""``/openapi.json`` names every body a client sends or receives, documents the one error
shape on every route, and declares the bearer scheme (RFC 10.2, 10.3, 10.4)."""

from __future__ import annotations

import re
from typing import Any

import httpx

from api.app import create_app

SPEC: dict[str, Any] = create_app().openapi()
JSON = "application/json"
#: RFC 15.1, 15.2: a bundle travels as a tar, not as JSON
TAR = "application/x-tar"


def _operations() -> list[tuple[str, str, dict[str, Any]]]:
    return [(method.upper(), path, op) for path, ops in SPEC["paths"].items() for method, op in ops.items()]


def _ref(content: dict[str, Any]) -> str:
    return str(content.get(JSON, {}).get("schema", {}).get("$ref", ""))


def test_every_success_and_request_body_is_a_named_model() -> None:
    named = {
        "POST /v1/captures": "OperationView",
        "POST /v1/captures:batch": "OperationBatch",
        "GET /v1/records/{record_id}": "RecordView",
        "POST /v1/retrieve": "RetrieveResult",
        "GET /v1/records/{record_id}/audit": "AuditHistory",
        "GET /v1/metrics": "Metrics",
        "GET /v1/operations/{operation_id}": "OperationView",
        "POST /v1/records/{record_id}/supersede": "OperationView",
    }
    seen = 0
    for method, path, op in _operations():
        for status, answer in op["responses"].items():
            if status.startswith("2") and JSON in answer.get("content", {}):
                assert _ref(answer["content"]).startswith("#/components/schemas/"), (method, path, status)
                seen += 1
        if "requestBody" in op and TAR in op["requestBody"]["content"]:
            assert (method, path) == ("POST", "/v1/import")
            assert op["requestBody"]["content"][TAR]["schema"] == {"type": "string", "format": "binary"}
        elif "requestBody" in op:
            assert _ref(op["requestBody"]["content"]).startswith("#/components/schemas/"), (method, path)
        want = named.get(f"{method} {path}")
        if want:
            ok = op["responses"]["202" if "202" in op["responses"] else "200"]
            assert _ref(ok["content"]) == f"#/components/schemas/{want}", (method, path)
    assert seen >= 20  # positive control: the walk found the answers
    bodies = {
        _ref(op["requestBody"]["content"]).rsplit("/", 1)[-1]
        for _, _, op in _operations()
        if "requestBody" in op and JSON in op["requestBody"]["content"]
    }
    assert {
        "CaptureRequest",
        "CaptureBatch",
        "RetrieveRequest",
        "SupersedeBody",
        "ForkBody",
        "MergeBody",
        "RetractBody",
        "ContestBody",
        "ReinforceBody",
        "PenalizeBody",
        "MaintenanceRun",
        "ErasureRequest",
    } <= bodies
    export = SPEC["paths"]["/v1/export"]["get"]["responses"]["200"]["content"]
    assert export[TAR]["schema"] == {"type": "string", "format": "binary"}


def test_every_error_answer_is_the_error_shape_and_none_is_fastapis_default() -> None:
    schemas = SPEC["components"]["schemas"]
    assert "HTTPValidationError" not in schemas and "ValidationError" not in schemas
    assert set(schemas["ErrorBody"]["properties"]) == {"error"}
    for method, path, op in _operations():
        errors = {s: a for s, a in op["responses"].items() if s[0] in "45"}
        if path.startswith("/v1/"):
            assert {"401", "500", "503"} <= set(errors), (method, path)
            if "requestBody" in op or op.get("parameters"):
                assert "422" in errors, (method, path)
        for status, answer in errors.items():
            assert _ref(answer["content"]) in (
                "#/components/schemas/ErrorBody",
                "#/components/schemas/NotReady",
            ), (method, path, status)


def test_bearer_auth_is_a_security_scheme_of_every_v1_route() -> None:
    schemes = SPEC["components"]["securitySchemes"]
    assert [s["scheme"] for s in schemes.values()] == ["bearer"]
    name = next(iter(schemes))
    for method, path, op in _operations():
        if path.startswith("/v1/") or path == "/metrics":
            assert {name: []} in op.get("security", []), (method, path)
        else:
            assert "security" not in op, (method, path)  # probes answer without a key


def test_the_served_document_is_the_one_checked(client: httpx.Client) -> None:
    assert client.get("/openapi.json").json() == SPEC
    assert "swagger-ui" in client.get("/docs").text


def _params(path: str) -> dict[str, dict[str, Any]]:
    """A GET route's parameters by name, each its schema without the ``null`` of an optional one."""
    out = {}
    for p in SPEC["paths"][path]["get"]["parameters"]:
        schema = p["schema"]
        out[p["name"]] = next((s for s in schema.get("anyOf", []) if s != {"type": "null"}), schema)
    return out


def test_the_rules_the_server_enforces_are_stated() -> None:
    """RFC 10.4: a request the schema allows is one the server accepts (the schemathesis run
    checks it on generated requests); these are the rules it first found left out."""
    jobs = SPEC["components"]["schemas"]["MaintenanceRun"]["properties"]["jobs"]["items"]
    assert jobs == {"$ref": "#/components/schemas/Job"}
    assert set(SPEC["components"]["schemas"]["Job"]["enum"]) >= {"decay", "prune", "consolidate", "embed"}
    for path in ("/v1/records", "/v1/operations", "/v1/work", "/v1/review"):
        params = _params(path)
        assert (params["limit"]["minimum"], params["limit"]["maximum"]) == (1, 200), path
        assert (params["cursor"]["minLength"], params["cursor"]["maxLength"]) == (1, 512), path
    records = _params("/v1/records")
    assert (records["max_bytes"]["minimum"], records["max_bytes"]["maximum"]) == (1024, 16 * 1024 * 1024)
    assert records["entity"]["format"] == "uuid"
    assert records["scope"]["items"]["pattern"] and records["scope"]["items"]["minLength"] == 1
    assert records["status"]["maxItems"] == 4
    # a header is sent or not: the schema never says null, which a client would send as "null"
    assert records["Membrane-Consistency"] == {
        "type": "string",
        "pattern": "^[0-9A-Fa-f]{1,8}/[0-9A-Fa-f]{1,8}$",
        "title": "Membrane-Consistency",
    }
    retrieve = SPEC["components"]["schemas"]["RetrieveRequest"]["properties"]["scopes"]["anyOf"][0]
    assert retrieve["minItems"] == 1
    requeue = SPEC["components"]["schemas"]["RequeueRequest"]["properties"]["ids"]["items"]
    assert requeue["maximum"] == 2**53 - 1


def test_a_blank_text_is_refused_by_the_schema_as_by_the_server(client: httpx.Client) -> None:
    """RFC 10.4: the core strips a scope before it checks its length; the schema's pattern
    refuses what the strip empties, the separators Python strips included."""
    pattern = SPEC["components"]["schemas"]["CaptureRequest"]["properties"]["scope"]["pattern"]
    event = {"source_kind": "event", "content": {"text": "x"}}
    for blank in (" ", "\t", "\u00a0", "\x1f", "\x85"):
        assert not re.search(pattern, blank)
        resp = client.post("/v1/captures", json={**event, "scope": blank})
        assert resp.status_code == 422, (blank, resp.text)
        assert resp.json()["error"]["details"][0]["field"] == "scope"
    # positive control: a scope with a character that is not a space, spaces around it
    assert re.search(pattern, " s ")
    assert client.post("/v1/captures", json={**event, "scope": " s "}).status_code == 202
