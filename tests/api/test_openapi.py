"""``/openapi.json`` names every body a client sends or receives, documents the one error
shape on every route, and declares the bearer scheme (RFC 10.2, 10.3, 10.4)."""

from __future__ import annotations

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
