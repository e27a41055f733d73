"""What reads and writes return: record views, retrieval results, capture results (RFC 10.4)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import datetime
from typing import Any, Literal
from uuid import UUID

from pydantic import Field

from membrane_core.enums import MemoryType, RevisionStatus, Sensitivity
from membrane_core.models import Frozen, MemoryRecord, Relation, Validity


class RecordView(Frozen):
    """A record as a caller may see it; redacted views carry metadata only (RFC 7.3)."""

    id: UUID
    type: MemoryType
    scope: str
    sensitivity: Sensitivity
    confidence: float
    salience: float
    status: RevisionStatus
    payload: dict[str, Any] | None
    summary: str | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    relations: list[Relation] = Field(default_factory=list)
    provenance: list[dict[str, Any]] = Field(default_factory=list)
    validity: Validity | None = None
    occurred_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    recorded_at: datetime
    retracted_at: datetime | None = None
    redacted: bool = False
    score: float | None = None


#: RFC 2.5: payload fields that name another record; each is carried by the relation of
#: the same name, and is shown only when the view shows that relation.
REFERENCE_FIELDS = ("supersedes", "superseded_by")


def has_references(payload: Mapping[str, Any]) -> bool:
    """RFC 2.5: whether ``payload`` names another record in a reference field."""
    # REFERENCE_FIELDS, spelled out: this runs for every record a read shows
    return payload.get("supersedes") is not None or payload.get("superseded_by") is not None


def shown_references(
    payload: dict[str, Any] | None, relations: Iterable[tuple[str, object]]
) -> dict[str, Any] | None:
    """RFC 2.5, 5.6: ``payload`` with each reference field emptied unless ``relations``
    (``(predicate, target_id)`` as the view shows them) hold its relation, so that a view
    never names a record its caller may not see, nor, as of a time, one made after it."""
    if not payload or not has_references(payload):
        return payload
    shown = {(p, str(t)) for p, t in relations}
    return {
        **payload,
        **{
            f: None
            for f in REFERENCE_FIELDS
            if payload.get(f) is not None and (f, str(payload[f])) not in shown
        },
    }


def view(
    record: MemoryRecord,
    *,
    salience: float,
    redacted: bool,
    visible_targets: set[UUID] | None = None,
    score: float | None = None,
) -> RecordView:
    """RFC 7.3: the caller's view of ``record``; relations to invisible records are dropped."""
    common: dict[str, Any] = {
        "id": record.id,
        "type": record.type,
        "scope": record.scope,
        "sensitivity": record.sensitivity,
        "confidence": record.confidence,
        "salience": salience,
        "status": record.status,
        "created_at": record.created_at,
        "updated_at": record.updated_at,
        "recorded_at": record.recorded_at,
        "retracted_at": record.retracted_at,
        "occurred_at": record.occurred_at,
        "redacted": redacted,
        "score": score,
    }
    if redacted:
        return RecordView(payload=None, **common)
    relations = [r for r in record.relations if visible_targets is None or r.target_id in visible_targets]
    return RecordView(
        payload=shown_references(
            record.payload.model_dump(mode="json"), ((r.predicate, r.target_id) for r in relations)
        ),
        summary=record.summary,
        tags=record.tags,
        metadata=record.metadata,
        relations=relations,
        provenance=[p.model_dump(mode="json") for p in record.provenance],
        validity=record.validity,
        **common,
    )


class Edge(Frozen):
    """A relation traversed by graph expansion (RFC 8.4)."""

    source_id: UUID
    predicate: str
    target_id: UUID


class Selection(Frozen):
    """The selector's choice among competence and plan_graph candidates (RFC 8.5)."""

    record_id: UUID
    confidence: float
    needs_more: bool


class ArmCounts(Frozen):
    """How many candidates each arm gave (RFC 8.1, 8.6)."""

    vector: int
    text: int
    entity: int
    salience: int


class DateWindow(Frozen):
    """A window of time read from the query, ``[start, end)`` in ISO 8601 (RFC 8.2.2)."""

    start: str
    end: str


class ExpansionDiagnostics(Frozen):
    """What the graph expansion returned and which of its limits cut it (RFC 8.4, 8.6)."""

    hops: int
    neighbors: int
    edges: int
    node_limit_applied: bool
    edge_limit_applied: bool
    filtered_in_python: int


def _absent(value: object) -> bool:
    return value is None


class RetrieveDiagnostics(Frozen):
    """What one retrieval read, which ranking ran and which bound cut it (RFC 8.6); nothing
    in it names or counts a record the caller cannot see, beyond the pool size."""

    candidates: int  # the fused pool, before any bound
    arms: ArmCounts
    #: the state of the vector arm (RFC 8.1.1), the fusion, late interaction (RFC 8.2.3) and
    #: the cross-encoder (RFC 8.2.4)
    vector: str
    fusion: str
    late_interaction: str
    reranker: str
    dates: list[DateWindow]
    #: roots, neighbours and edges returned, and the bytes of the returned views (RFC 8.3)
    returned: int
    neighbors: int
    edges: int
    bytes: int
    row_limit: int
    max_bytes: int
    row_limit_applied: bool
    byte_limit_applied: bool
    filtered_in_python: int  # hydrated rows the re-check in Python dropped (RFC 7.3)
    #: RFC 13.2: the server that answered: the replica, or the primary
    served_by: Literal["primary", "replica"] = "primary"
    #: only with expansion: an answer without one has no such key
    expansion: ExpansionDiagnostics | None = Field(default=None, exclude_if=_absent)


class RetrieveResult(Frozen):
    """Roots, neighbours, edges and diagnostics of one retrieval (RFC 8)."""

    records: list[RecordView]
    neighbors: list[RecordView] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    diagnostics: RetrieveDiagnostics
    selection: Selection | None = None


class CaptureResult(Frozen):
    """Ids written by one capture, primary first (RFC 3.3)."""

    record_ids: list[UUID]
    fact: str | None = None
    entities: dict[str, Any] | None = None
    #: RFC 5.7: set when the capture's records are proposed: the proposal a reviewer decides
    proposal_id: UUID | None = None
