"""The SDK's models against the server's OpenAPI: fails when the two drift apart.

For each SDK model and the server component of the same meaning:
- every SDK field exists in the component, with a compatible JSON type (answers: the SDK
  accepts every type the server may send, ``null`` included; request bodies: the server
  accepts every type the SDK sends, which never sends ``null``), recursively through
  nested objects, arrays and maps;
- every field the server requires is in the SDK model; a request field the server
  requires is required by the SDK too, and an answer field the SDK requires is one the
  server always sends;
- closed vocabularies agree: an SDK ``Literal`` sent to the server is within the
  server's enum.
Every endpoint the client calls exists, with the request and answer components expected,
and the filters of each list call (RFC 10.7) are the route's query parameters, by name and
vocabulary: the server ignores a query parameter it does not know, so a misspelt filter
would widen a list without a word.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any, Literal, TypedDict, get_type_hints

import pytest
from membrane_client import _core, models
from pydantic import BaseModel, TypeAdapter

Direction = Literal["answer", "request"]

#: SDK model -> the server component it mirrors, and which way it travels.
PAIRS: list[tuple[type[BaseModel], str, Direction]] = [
    (models.Operation, "OperationView", "answer"),
    (models.OperationBatch, "OperationBatch", "answer"),
    (models.Record, "RecordView", "answer"),
    (models.RetrieveResult, "RetrieveResult", "answer"),
    (models.Edge, "Edge", "answer"),
    (models.Relation, "Relation", "answer"),
    (models.Validity, "Validity", "answer"),
    (models.Selection, "Selection", "answer"),
    (models.AuditEntry, "AuditEntry", "answer"),
    (models.AuditHistory, "AuditHistory", "answer"),
    (models.Metrics, "Metrics", "answer"),
    (models.ErrorBody, "ErrorBody", "answer"),
    (models.ErrorInfo, "ErrorInfo", "answer"),
    (models.ErrorDetail, "ErrorDetail", "answer"),
    (models.CaptureRequest, "CaptureRequest", "request"),
    (models.CaptureBatch, "CaptureBatch", "request"),
    (models.RetrieveRequest, "RetrieveRequest", "request"),
    (models.ExpandOptions, "ExpandOptions", "request"),
    (models.RevisedRecord, "RevisedRecord", "request"),
    (models.SupersedeBody, "SupersedeBody", "request"),
    (models.ForkBody, "ForkBody", "request"),
    (models.MergeBody, "MergeBody", "request"),
    (models.RetractBody, "RetractBody", "request"),
    (models.ContestBody, "ContestBody", "request"),
    (models.ReinforceBody, "ReinforceBody", "request"),
    (models.PenalizeBody, "PenalizeBody", "request"),
    (models.MaintenanceRun, "MaintenanceRun", "request"),
    (models.RecordPage, "RecordPage", "answer"),
    (models.ImportReport, "ImportReport", "answer"),
    (models.Erasure, "ErasureResult", "answer"),
    (models.PageDiagnostics, "PageDiagnostics", "answer"),
    (models.Lineage, "Lineage", "answer"),
    (models.LineageEdge, "LineageEdge", "answer"),
    (models.LineageEvidence, "Evidence", "answer"),
    (models.OperationSummary, "OperationSummary", "answer"),
    (models.OperationPage, "OperationPage", "answer"),
    (models.WorkOverview, "WorkOverview", "answer"),
    (models.JobBacklog, "JobBacklog", "answer"),
    (models.InboxCount, "InboxCount", "answer"),
    (models.BuriedItem, "BuriedItem", "answer"),
    (models.RequeueResult, "RequeueResult", "answer"),
    (models.ScopeList, "ScopeList", "answer"),
    (models.ScopeCount, "ScopeCount", "answer"),
    (models.RequeueBody, "RequeueRequest", "request"),
    (models.ReviewPage, "ReviewPage", "answer"),
    (models.ReviewEntry, "ReviewEntry", "answer"),
    (models.DecideResult, "DecideResult", "answer"),
    (models.DecisionResult, "DecisionResult", "answer"),
    (models.ErrorInfo, "DecisionError", "answer"),
    (models.DecideBody, "DecideRequest", "request"),
    (models.Decision, "DecisionRequest", "request"),
]

#: client method -> (request body component or None, answer component).
ROUTES: dict[str, tuple[str | None, str]] = {
    "capture": ("CaptureRequest", "OperationView"),
    "capture_many": ("CaptureBatch", "OperationBatch"),
    "get": (None, "RecordView"),
    "audit": (None, "AuditHistory"),
    "retrieve": ("RetrieveRequest", "RetrieveResult"),
    "supersede": ("SupersedeBody", "OperationView"),
    "fork": ("ForkBody", "OperationView"),
    "merge": ("MergeBody", "OperationView"),
    "retract": ("RetractBody", "OperationView"),
    "contest": ("ContestBody", "OperationView"),
    "reinforce": ("ReinforceBody", "OperationView"),
    "penalize": ("PenalizeBody", "OperationView"),
    "metrics": (None, "Metrics"),
    "run_maintenance": ("MaintenanceRun", "OperationView"),
    "operation": (None, "OperationView"),
    "list_records": (None, "RecordPage"),
    "lineage": (None, "Lineage"),
    "list_operations": (None, "OperationPage"),
    "work": (None, "WorkOverview"),
    "requeue_work": ("RequeueRequest", "RequeueResult"),
    "list_scopes": (None, "ScopeList"),
    "review_queue": (None, "ReviewPage"),
    "decide": ("DecideRequest", "DecideResult"),
    # RFC 15.1, 15.2: a bundle travels as a tar, not as JSON
    "export": (None, ""),
    "import_bundle": (None, "ImportReport"),
    "erase": ("ErasureRequest", "ErasureResult"),
}

#: list call -> the filters it takes, as query parameters of its route (RFC 10.7).
FILTERS: dict[str, type[Any]] = {
    "list_records": models.RecordFilters,
    "list_operations": models.OperationFilters,
    "work": models.WorkFilters,
    "review_queue": models.ReviewFilters,
    "export": models.ExportFilters,
}


@cache
def openapi() -> dict[str, Any]:
    """The server's OpenAPI document, built from the app without starting it."""
    from api.app import create_app

    spec: dict[str, Any] = create_app().openapi()
    return spec


class Side:
    """One document's schemas: resolves ``$ref`` within it."""

    def __init__(self, root: dict[str, Any]) -> None:
        self.root = root

    def resolve(self, schema: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in schema:
            node: Any = self.root
            for part in schema["$ref"].lstrip("#/").split("/"):
                node = node[part]
            schema = node
        return schema

    def branches(self, schema: dict[str, Any]) -> Iterator[dict[str, Any]]:
        """The alternatives of a schema, ``anyOf``/``oneOf``/``allOf`` flattened, refs resolved."""
        schema = self.resolve(schema)
        alternatives = schema.get("anyOf") or schema.get("oneOf") or schema.get("allOf")
        if alternatives:
            for alt in alternatives:
                yield from self.branches(alt)
        else:
            yield schema

    def types(self, schema: dict[str, Any]) -> set[str]:
        """The JSON types a schema admits; ``any`` when it constrains none."""
        out: set[str] = set()
        for branch in self.branches(schema):
            kind = branch.get("type")
            if isinstance(kind, list):
                out.update(kind)
            elif isinstance(kind, str):
                out.add(kind)
            elif "enum" in branch or "const" in branch:
                values = branch.get("enum", [branch.get("const")])
                out.update(_json_type(v) for v in values)
            else:
                out.add("any")
        return out

    def enum(self, schema: dict[str, Any]) -> set[Any] | None:
        """The closed set of values of a schema, or ``None`` when it is open."""
        values: set[Any] = set()
        for branch in self.branches(schema):
            if branch.get("type") == "null":
                continue
            if "enum" in branch:
                values.update(branch["enum"])
            elif "const" in branch:
                values.add(branch["const"])
            else:
                return None
        return values or None

    def part(self, schema: dict[str, Any], key: str) -> dict[str, Any] | None:
        """The first ``items``/``additionalProperties`` schema among the alternatives."""
        for branch in self.branches(schema):
            value = branch.get(key)
            if isinstance(value, dict):
                return value
        return None

    def object_branch(self, schema: dict[str, Any]) -> dict[str, Any] | None:
        for branch in self.branches(schema):
            if "properties" in branch:
                return branch
        return None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    return {int: "integer", float: "number", str: "string"}.get(type(value), "object")


def _covers(wide: set[str], narrow: set[str]) -> bool:
    """Whether every type of ``narrow`` is admitted by ``wide`` (an integer is a number)."""
    if "any" in wide:
        return True
    return all(t in wide or (t == "integer" and "number" in wide) for t in narrow if t != "any")


class Drift:
    """Compares one SDK schema with one server schema, collecting every mismatch."""

    def __init__(self, sdk: Side, server: Side, direction: Direction) -> None:
        self.sdk, self.server, self.direction = sdk, server, direction
        self.problems: list[str] = []
        self._seen: set[tuple[int, int]] = set()

    def objects(self, sdk: dict[str, Any], server: dict[str, Any], where: str) -> None:
        if (id(sdk), id(server)) in self._seen:
            return
        self._seen.add((id(sdk), id(server)))
        sdk_props, srv_props = sdk.get("properties", {}), server.get("properties", {})
        sdk_required, srv_required = set(sdk.get("required", [])), set(server.get("required", []))
        for name, schema in sdk_props.items():
            if name not in srv_props:
                self.problems.append(f"{where}.{name}: not a field of the server's schema")
                continue
            self.values(schema, srv_props[name], f"{where}.{name}")
        for name in sorted(srv_required - set(sdk_props)):
            self.problems.append(f"{where}.{name}: required by the server, missing in the SDK")
        if self.direction == "request":
            for name in sorted((srv_required & set(sdk_props)) - sdk_required):
                self.problems.append(f"{where}.{name}: required by the server, optional in the SDK")
        else:
            for name in sorted((sdk_required & set(srv_props)) - srv_required):
                self.problems.append(f"{where}.{name}: required by the SDK, the server may omit it")

    def values(self, sdk: dict[str, Any], server: dict[str, Any], where: str) -> None:
        sdk_types, srv_types = self.sdk.types(sdk), self.server.types(server)
        if self.direction == "answer":
            ok = _covers(sdk_types, srv_types)
        else:  # the SDK leaves out None: what it sends is its non-null types
            ok = _covers(srv_types, sdk_types - {"null"})
        if not ok:
            self.problems.append(f"{where}: SDK types {sorted(sdk_types)} vs server {sorted(srv_types)}")
            return
        self.enums(sdk, server, where)
        sdk_obj, srv_obj = self.sdk.object_branch(sdk), self.server.object_branch(server)
        if sdk_obj is not None and srv_obj is not None:
            self.objects(sdk_obj, srv_obj, where)
        for key in ("items", "additionalProperties"):
            sdk_part, srv_part = self.sdk.part(sdk, key), self.server.part(server, key)
            if sdk_part is not None and srv_part is not None:
                self.values(sdk_part, srv_part, f"{where}[{key}]")

    def enums(self, sdk: dict[str, Any], server: dict[str, Any], where: str) -> None:
        sdk_enum, srv_enum = self.sdk.enum(sdk), self.server.enum(server)
        if sdk_enum is None:
            return  # the SDK takes any value: a newer server's values included
        if self.direction == "request" and srv_enum is not None and not sdk_enum <= srv_enum:
            extra = sorted(sdk_enum - srv_enum)
            self.problems.append(f"{where}: SDK sends {extra}, not in the server's enum")
        if self.direction == "answer" and (srv_enum is None or not srv_enum <= sdk_enum):
            self.problems.append(f"{where}: the server may send values the SDK refuses")


def component(name: str, direction: Direction) -> dict[str, Any]:
    """The server component ``name`` (FastAPI suffixes one that differs by direction)."""
    schemas = openapi()["components"]["schemas"]
    suffix = "-Output" if direction == "answer" else "-Input"
    for candidate in (name, f"{name}{suffix}"):
        if candidate in schemas:
            return dict(schemas[candidate])
    raise AssertionError(f"component {name!r} is not in the server's OpenAPI: {sorted(schemas)}")


def drift(model: type[BaseModel], name: str, direction: Direction) -> list[str]:
    """Every mismatch between ``model`` and the server component ``name``."""
    mode: Literal["validation", "serialization"] = "validation" if direction == "answer" else "serialization"
    sdk_schema = model.model_json_schema(mode=mode)
    check = Drift(Side(sdk_schema), Side(openapi()), direction)
    check.objects(sdk_schema, component(name, direction), name)
    return check.problems


@pytest.mark.parametrize(("model", "name", "direction"), PAIRS, ids=[p[1] for p in PAIRS])
def test_sdk_model_matches_the_server_component(
    model: type[BaseModel], name: str, direction: Direction
) -> None:
    problems = drift(model, name, direction)
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("method", sorted(_core.ENDPOINTS))
def test_every_endpoint_exists_with_its_components(method: str) -> None:
    verb, path = _core.ENDPOINTS[method]
    operation = openapi()["paths"].get(path, {}).get(verb.lower())
    assert operation is not None, f"{verb} {path} is not in the server's OpenAPI"
    request, answer = ROUTES[method]
    body = operation.get("requestBody", {}).get("content", {}).get("application/json", {})
    assert body.get("schema", {}).get("$ref", "").rsplit("/", 1)[-1] == (request or ""), body
    success = [r for status, r in operation["responses"].items() if status.startswith("2")]
    refs = {
        r.get("content", {}).get("application/json", {}).get("schema", {}).get("$ref", "").rsplit("/", 1)[-1]
        for r in success
    }
    assert refs == {answer}, refs


def _vocabulary(side: Side, schema: dict[str, Any]) -> set[Any] | None:
    """The closed set of values of a query parameter, through its arrays; ``None`` when open."""
    values: set[Any] = set()
    for branch in side.branches(schema):
        if branch.get("type") == "null":
            continue
        items = branch.get("items")
        found = _vocabulary(side, items) if isinstance(items, dict) else side.enum(branch)
        if found is None:
            return None
        values |= found
    return values


def query_drift(filters: type[Any], method: str) -> list[str]:
    """Every mismatch between a list call's filters and its route's query parameters."""
    verb, path = _core.ENDPOINTS[method]
    parameters = openapi()["paths"][path][verb.lower()].get("parameters", [])
    server = {p["name"]: p["schema"] for p in parameters if p["in"] == "query"}
    # field by field: pydantic builds no schema of a typing.TypedDict on Python 3.11
    sdk = {name: TypeAdapter(hint).json_schema() for name, hint in get_type_hints(filters).items()}
    srv_side = Side(openapi())
    problems = [f"{method}.{n}: not a query parameter" for n in sorted(set(sdk) - set(server))]
    problems += [f"{method}.{n}: a query parameter the SDK lacks" for n in sorted(set(server) - set(sdk))]
    for name in sorted(set(sdk) & set(server)):
        sent, accepted = _vocabulary(Side(sdk[name]), sdk[name]), _vocabulary(srv_side, server[name])
        if sent is not None and accepted is not None and not sent <= accepted:
            problems.append(f"{method}.{name}: SDK sends {sorted(sent - accepted)}, not in the server's enum")
    return problems


@pytest.mark.parametrize("method", sorted(FILTERS))
def test_list_filters_are_the_query_parameters(method: str) -> None:
    assert _core.FILTERS[method] == FILTERS[method].__optional_keys__
    problems = query_drift(FILTERS[method], method)
    assert not problems, "\n".join(problems)


def test_the_comparison_catches_drift() -> None:
    """Positive controls: a renamed field, a wrong type, a missing required field, a
    required field the server may omit, vocabularies that disagree, a nested mismatch."""

    class Renamed(models.Answer):
        operation_id: str
        state: str  # the server calls it "status"

    class WrongType(models.Answer):
        operation_id: str
        status: str
        record_ids: str  # an array on the server

    class Strict(models.Answer):
        operation_id: str
        status: str
        kind: str
        created_at: str
        finished_at: str  # the server may send null

    class Narrow(models.Answer):
        operation_id: str
        status: Literal["queued", "succeeded"]  # the server also sends running and failed

    class Optional(models.Body):
        rationale: str | None = None

    class Dream(models.Body):
        source_kind: Literal["event", "dream"]
        scope: str
        content: dict[str, Any]

    class Nested(models.Answer):
        records: list[models.Edge]  # a record is not an edge, two levels down

    renamed = drift(Renamed, "OperationView", "answer")
    assert any(".state: not a field" in p for p in renamed)
    assert any(".status: required by the server" in p for p in renamed)
    assert any(".record_ids: SDK types" in p for p in drift(WrongType, "OperationView", "answer"))
    assert any(".finished_at: SDK types" in p for p in drift(Strict, "OperationView", "answer"))
    assert any("values the SDK refuses" in p for p in drift(Narrow, "OperationView", "answer"))
    assert any("optional in the SDK" in p for p in drift(Optional, "RetractBody", "request"))
    assert any(
        p.startswith("RetrieveResult.records[items].source_id: not a field")
        for p in drift(Nested, "RetrieveResult", "answer")
    )
    assert any("'dream'" in p for p in drift(Dream, "CaptureRequest", "request"))

    class Misspelt(TypedDict, total=False):
        scopes: list[str]  # the query parameter is "scope", repeated
        type: list[Literal["semantic", "gossip"]]

    misspelt = query_drift(Misspelt, "list_records")
    assert "list_records.scopes: not a query parameter" in misspelt
    assert "list_records.scope: a query parameter the SDK lacks" in misspelt
    assert "list_records.type: SDK sends ['gossip'], not in the server's enum" in misspelt
