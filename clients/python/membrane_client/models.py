"""Typed answers and request bodies of the Membrane HTTP API (v1).

Answers (:class:`Operation`, :class:`Record`, ...) keep fields they do not know
(``extra="allow"``, reachable through ``model_extra``) and give most fields a default,
so a newer server that adds fields or values does not break an older client.
Vocabularies the server may grow (record types, statuses, kinds) are plain strings
in answers for the same reason.

Request bodies (:class:`CaptureRequest`, :class:`SupersedeBody`, ...) are a typed way
to build what the client sends; every method also takes a plain mapping. The server
is the authority on validation: these models check types only, so its answer (and
its field-by-field error details) is the one a caller sees.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime
from typing import Any, Literal, TypedDict
from uuid import UUID

from pydantic import BaseModel, ConfigDict, Field

from membrane_client.errors import error_from

__all__ = [
    "AuditEntry",
    "AuditHistory",
    "BacklogEntry",
    "BuriedItem",
    "CaptureBatch",
    "CaptureRequest",
    "ContestBody",
    "DecideBody",
    "DecideResult",
    "Decision",
    "DecisionResult",
    "Edge",
    "Erasure",
    "ErrorBody",
    "ErrorDetail",
    "ErrorInfo",
    "EvidenceRef",
    "ExpandOptions",
    "ExportFilters",
    "ForkBody",
    "ImportReport",
    "InboxCount",
    "JobBacklog",
    "Lineage",
    "LineageEdge",
    "LineageEvidence",
    "MaintenanceRun",
    "MergeBody",
    "Metrics",
    "Operation",
    "OperationBatch",
    "OperationFilters",
    "OperationPage",
    "OperationSummary",
    "PageDiagnostics",
    "PenalizeBody",
    "ProvenanceSource",
    "Record",
    "RecordFilters",
    "RecordPage",
    "ReinforceBody",
    "Relation",
    "RequeueBody",
    "RequeueResult",
    "RetractBody",
    "RetrieveRequest",
    "RetrieveResult",
    "ReviewEntry",
    "ReviewFilters",
    "ReviewPage",
    "RevisedRecord",
    "ScopeCount",
    "ScopeList",
    "Selection",
    "SupersedeBody",
    "Validity",
    "WorkFilters",
    "WorkOverview",
]

#: Operation statuses after which nothing changes (RFC 9.1).
FINISHED_STATUSES = frozenset({"succeeded", "failed"})

SourceKind = Literal["event", "tool_output", "observation", "outcome", "working_state"]
SensitivityLevel = Literal["public", "low", "medium", "high", "hyper"]
MemoryTypeName = Literal["episodic", "working", "semantic", "competence", "plan_graph", "entity"]
ProvenanceKindName = Literal["event", "artifact", "tool_call", "observation", "outcome"]
MaintenanceJob = Literal["decay", "prune", "consolidate", "embed", "extract"]
RecordStatusName = Literal["active", "contested", "retracted", "proposed"]
OperationKindName = Literal[
    "capture", "supersede", "fork", "merge", "retract", "contest", "reinforce", "penalize", "maintenance"
]
OperationStatusName = Literal["queued", "running", "succeeded", "failed"]
WorkKindName = Literal["embed", "extract", "consolidate", "compress", "decay", "prune", "seal"]
#: RFC 5.7: the order of the review queue: oldest first, or most corroborated first.
ReviewOrder = Literal["age", "corroboration"]
DecisionName = Literal["approve", "reject", "amend"]
#: RFC 5.7: an approval beside an active fact of the same subject and predicate replaces it
#: or keeps both.
ApprovalMode = Literal["replace", "beside"]


class Answer(BaseModel):
    """Base of every model the server sends: unknown fields are kept, never refused."""

    model_config = ConfigDict(extra="allow")


class Body(BaseModel):
    """Base of every model the client sends.

    Extra fields are allowed (and sent) so a caller can use a field a newer server
    accepts before this client knows it.
    """

    model_config = ConfigDict(extra="allow")

    def to_json(self) -> dict[str, Any]:
        """The JSON object sent to the server; unset optional fields (``None``) are left out."""
        data: dict[str, Any] = self.model_dump(mode="json", exclude_none=True)
        return data


# -- errors (RFC 10.2) --------------------------------------------------------------


class ErrorDetail(Answer):
    """One problem of a refused request: the field by its path, a message, a type."""

    field: str = ""
    message: str = ""
    type: str = ""


class ErrorInfo(Answer):
    """The ``error`` object of an error answer, or of a failed operation."""

    code: str = "unknown"
    message: str = ""
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(Answer):
    """Every error answer: ``{"error": {"code", "message", "details"}}``."""

    error: ErrorInfo


# -- operations (RFC 9.1) -----------------------------------------------------------


class Operation(Answer):
    """An asynchronous write: queued, running, succeeded or failed, and the records it wrote."""

    operation_id: UUID
    status: str
    kind: str | None = None
    record_id: UUID | None = None
    record_ids: list[UUID] = Field(default_factory=list)
    error: ErrorInfo | None = None
    result: dict[str, Any] | None = None
    created_at: datetime | None = None
    finished_at: datetime | None = None
    #: The id of the request that submitted it, as the server's log lines name it.
    request_id: str | None = None

    @property
    def finished(self) -> bool:
        """True once the operation succeeded or failed; it changes no more."""
        return self.status in FINISHED_STATUSES

    @property
    def succeeded(self) -> bool:
        """True when the operation finished without error."""
        return self.status == "succeeded"

    @property
    def failed(self) -> bool:
        """True when the operation finished with an error (see :attr:`error`)."""
        return self.status == "failed"

    def raise_for_error(self) -> Operation:
        """``self``, unless it failed: then its error as the typed exception of its code."""
        if self.failed:
            info = self.error.model_dump() if self.error is not None else {"code": "unknown"}
            raise error_from(None, info)
        return self

    @property
    def fact(self) -> str | None:
        """What a finished capture did with its fact (``created``, ``known``, ``corroborated``,
        ``tombstoned``), from its ``result``; ``None`` for other writes (RFC 3.4, 5.7)."""
        value = (self.result or {}).get("fact")
        return value if isinstance(value, str) else None

    @property
    def proposal_id(self) -> UUID | None:
        """The proposal a reviewer decides, when a finished capture's records were proposed
        (a key whose writes need review, or one that corroborated a pending fact); from its
        ``result`` (RFC 5.7)."""
        value = (self.result or {}).get("proposal_id")
        return UUID(str(value)) if value else None


class OperationBatch(Answer):
    """The answer of a capture batch: one operation per capture, in input order."""

    operations: list[Operation]


# -- records and retrieval (RFC 8, 10.4) --------------------------------------------


class Relation(Answer):
    """A typed, directed edge from a record to another."""

    predicate: str
    target_id: UUID
    weight: float | None = None


class Validity(Answer):
    """Valid time of a fact: ``global``, ``conditional`` or ``timeboxed`` in a window."""

    mode: str = "global"
    conditions: dict[str, Any] = Field(default_factory=dict)
    valid_from: datetime | None = None
    valid_to: datetime | None = None


class Record(Answer):
    """A record as the caller may see it; a redacted one carries no payload."""

    id: UUID
    type: str
    scope: str
    sensitivity: str
    confidence: float
    salience: float
    status: str
    payload: dict[str, Any] | None = None
    summary: str | None = None
    tags: list[str] = Field(default_factory=list)
    metadata: dict[str, Any] = Field(default_factory=dict)
    relations: list[Relation] = Field(default_factory=list)
    provenance: list[dict[str, Any]] = Field(default_factory=list)
    validity: Validity | None = None
    occurred_at: datetime | None = None
    created_at: datetime | None = None
    updated_at: datetime | None = None
    recorded_at: datetime | None = None
    retracted_at: datetime | None = None
    redacted: bool = False
    score: float | None = None


class Edge(Answer):
    """A relation traversed by graph expansion."""

    source_id: UUID
    predicate: str
    target_id: UUID


class Selection(Answer):
    """The selector's choice among competence and plan-graph candidates."""

    record_id: UUID
    confidence: float
    needs_more: bool


class RetrieveResult(Answer):
    """Ranked records, their graph neighbours and edges, and diagnostics of one retrieval."""

    records: list[Record] = Field(default_factory=list)
    neighbors: list[Record] = Field(default_factory=list)
    edges: list[Edge] = Field(default_factory=list)
    diagnostics: dict[str, Any] = Field(default_factory=dict)
    selection: Selection | None = None


class AuditEntry(Answer):
    """One entry of a record's append-only, hash-chained history."""

    action: str
    actor: str
    timestamp: datetime
    rationale: str
    details: dict[str, Any] = Field(default_factory=dict)


class AuditHistory(Answer):
    """A record's audit entries, oldest first, and whether their hash chain verifies."""

    record_id: UUID | None = None
    entries: list[AuditEntry] = Field(default_factory=list)
    chain_valid: bool


class BacklogEntry(Answer):
    """Work of one kind waiting for a worker."""

    due: int = 0
    pending: int = 0
    dead: int = 0
    oldest_due_seconds: float | None = None


class Metrics(Answer):
    """``GET /v1/metrics``: memory totals over what the caller may read; for an operator,
    also the operations inbox by kind and status and the work backlog by kind."""

    total_records: int = 0
    records_by_type: dict[str, int] = Field(default_factory=dict)
    records_by_status: dict[str, int] = Field(default_factory=dict)
    avg_salience: float | None = None
    avg_confidence: float | None = None
    active_records: int = 0
    pinned_records: int = 0
    total_audit_entries: int = 0
    revision_rate: float | None = None
    retrieval_usefulness: float | None = None
    competence_success_rate: float | None = None
    plan_reuse_frequency: float | None = None
    memory_growth_rate: float | None = None
    records_created_24h: int = 0
    operations: dict[str, dict[str, int]] | None = None
    work_backlog: dict[str, BacklogEntry] | None = None


# -- lists (RFC 10.7) ------------------------------------------------------------------


class PageDiagnostics(Answer):
    """What bounded a page of records: its rows and projected bytes, and which limit cut it."""

    returned: int = 0
    bytes: int = 0
    row_limit: int = 0
    max_bytes: int = 0
    #: more rows matched than the page holds
    row_limit_applied: bool = False
    #: the page stopped early at ``max_bytes``
    byte_limit_applied: bool = False
    #: RFC 13.2: the server that answered: ``replica`` or ``primary``
    served_by: str = "primary"


class RecordPage(Answer):
    """``GET /v1/records``: one page of records, newest first; ``next_cursor`` is ``None`` on
    the last page."""

    records: list[Record] = Field(default_factory=list)
    next_cursor: str | None = None
    diagnostics: PageDiagnostics = Field(default_factory=PageDiagnostics)


class LineageEvidence(Answer):
    """A provenance reference a correction cited (the server's ``Evidence``)."""

    kind: str
    ref: str


class LineageEdge(Answer):
    """One correction between two records of a lineage: ``supersedes`` (new to replaced),
    ``merged_into`` (source to merged), ``forked_from`` (variant to original) or ``contests``
    (contesting record to its target), with who made it, when and why."""

    kind: str
    source_id: UUID
    target_id: UUID
    actor: str | None = None
    at: datetime | None = None
    rationale: str | None = None
    evidence: list[LineageEvidence] = Field(default_factory=list)
    #: the status the correction left its target in, as of the read
    target_status: str | None = None


class Lineage(Answer):
    """``GET /v1/records/{id}/lineage``: a record's correction chain as nodes and edges.

    Nodes the caller may not see are left out with their edges; ``truncated`` says the walk
    stopped at the server's node bound.
    """

    record_id: UUID
    nodes: list[Record] = Field(default_factory=list)
    edges: list[LineageEdge] = Field(default_factory=list)
    truncated: bool = False


class OperationSummary(Operation):
    """An operation as ``GET /v1/operations`` lists it: who submitted it, its scope, the record
    it revises and how often it was attempted."""

    principal: str | None = None
    scope: str | None = None
    target_id: UUID | None = None
    attempts: int = 0


class OperationPage(Answer):
    """``GET /v1/operations``: one page of operations, newest first."""

    operations: list[OperationSummary] = Field(default_factory=list)
    next_cursor: str | None = None


class JobBacklog(Answer):
    """One job's work items: due, claimed by a worker, retrying after a failure, buried after
    the last attempt, and the oldest due one."""

    kind: str
    due: int = 0
    claimed: int = 0
    retrying: int = 0
    buried: int = 0
    pending: int = 0
    oldest_due_at: datetime | None = None
    oldest_due_seconds: float | None = None


class InboxCount(Answer):
    """Operations of one kind and status in the inbox."""

    kind: str
    status: str
    count: int = 0


class BuriedItem(Answer):
    """A work item buried after its last attempt, with its last error; ``id`` is what
    ``requeue_work`` takes."""

    id: int
    kind: str
    target_id: UUID
    attempts: int = 0
    last_error: str | None = None
    due_at: datetime | None = None
    created_at: datetime | None = None


class WorkOverview(Answer):
    """``GET /v1/work`` (operator): every job's backlog, the inbox, the embedding lag and a page
    of buried items."""

    jobs: list[JobBacklog] = Field(default_factory=list)
    inbox: list[InboxCount] = Field(default_factory=list)
    embedding_lag_seconds: float | None = None
    buried: list[BuriedItem] = Field(default_factory=list)
    next_cursor: str | None = None


class RequeueResult(Answer):
    """``POST /v1/work:requeue``: the items put back, and those left as they were (not
    buried, or gone)."""

    requeued: list[int] = Field(default_factory=list)
    unchanged: list[int] = Field(default_factory=list)


class ScopeCount(Answer):
    """A scope the caller may read, with the records it sees there by status."""

    scope: str
    records: int = 0
    active: int = 0
    contested: int = 0
    retracted: int = 0
    #: RFC 5.7: records awaiting a reviewer's decision
    proposed: int = 0


class ScopeList(Answer):
    """``GET /v1/scopes``."""

    scopes: list[ScopeCount] = Field(default_factory=list)


# -- review (RFC 5.7) -------------------------------------------------------------------------


class ReviewEntry(Answer):
    """A pending proposal as a reviewer sees it (RFC 5.7): who proposed it and how, who
    corroborated it, its records, the proposed fact with its evidence and source episodes,
    and the active facts it conflicts with (same subject and predicate, another object)."""

    proposal_id: UUID
    scope: str
    sensitivity: str
    #: ``capture`` (a key whose writes need review) or ``extraction`` (the LLM pool)
    source: str
    proposed_by: str
    #: the actors of the other writes that corroborated it
    corroborators: list[str] = Field(default_factory=list)
    corroborations: int = 0
    created_at: datetime
    #: when the review job rejects it, undecided
    expires_at: datetime
    #: every record of the proposal: its primary record, fact and entities
    records: list[Record] = Field(default_factory=list)
    #: the proposed fact, when the proposal has one
    fact: Record | None = None
    #: what the fact cites (its provenance)
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    #: the records the fact derives from
    source_episodes: list[Record] = Field(default_factory=list)
    #: active facts with the fact's subject and predicate and another object; approving
    #: beside them takes ``mode``
    conflicts: list[Record] = Field(default_factory=list)


class ReviewPage(Answer):
    """``GET /v1/review``: one page of the review queue; ``next_cursor`` is ``None`` on the
    last page (RFC 5.7)."""

    entries: list[ReviewEntry] = Field(default_factory=list)
    next_cursor: str | None = None


class DecisionResult(Answer):
    """One decision's outcome (``approved``, ``rejected``, ``amended``) and the records it
    touched, or why it was refused (RFC 5.7)."""

    proposal_id: UUID
    outcome: str | None = None
    record_ids: list[UUID] = Field(default_factory=list)
    error: ErrorInfo | None = None

    @property
    def failed(self) -> bool:
        """True when the decision was refused (see :attr:`error`)."""
        return self.error is not None

    def raise_for_error(self) -> DecisionResult:
        """``self``, unless the decision was refused: then its error as the typed exception
        of its code (``RevisionRefused`` for a proposal already decided, ``Forbidden`` for
        one the caller proposed or corroborated, ``NotFound``, ``InvalidInput``)."""
        if self.error is not None:
            raise error_from(None, self.error.model_dump())
        return self


class DecideResult(Answer):
    """``POST /v1/review:decide``: every decision's result, in input order (RFC 5.7)."""

    results: list[DecisionResult] = Field(default_factory=list)


# -- list filters (RFC 10.7) ---------------------------------------------------------------

#: A filter that may be repeated: one value or several.
Many = str | Sequence[str]
When = datetime | str


class RecordFilters(TypedDict, total=False):
    """The filters of ``GET /v1/records``, by their query parameter names.

    ``scope``, ``type``, ``status``, ``sensitivity`` and ``tag`` take one value or several;
    times are aware datetimes or ISO 8601 strings, ranges half-open ``[after, before)``.
    ``status`` defaults to active and contested on the server.
    """

    scope: Many
    type: MemoryTypeName | Sequence[MemoryTypeName]
    status: RecordStatusName | Sequence[RecordStatusName]
    sensitivity: SensitivityLevel | Sequence[SensitivityLevel]
    max_sensitivity: SensitivityLevel
    tag: Many
    #: an entity record's id: the records related to it, either way
    entity: str
    subject: str
    predicate: str
    created_after: When
    created_before: When
    occurred_after: When
    occurred_before: When
    valid_after: When
    valid_before: When
    #: as believed then
    as_of: When
    limit: int
    max_bytes: int
    #: ``next_cursor`` of the previous page
    cursor: str
    #: a write's consistency token: the page sees that write (the client sends the latest
    #: token of its own writes without being asked)
    min_lsn: str


class OperationFilters(TypedDict, total=False):
    """The filters of ``GET /v1/operations``; ``kind`` and ``status`` take one value or several."""

    kind: OperationKindName | Sequence[OperationKindName]
    status: OperationStatusName | Sequence[OperationStatusName]
    scope: str
    created_after: When
    created_before: When
    limit: int
    cursor: str


class WorkFilters(TypedDict, total=False):
    """The query of ``GET /v1/work``: ``kind`` narrows the buried items to those jobs."""

    kind: WorkKindName | Sequence[WorkKindName]
    limit: int
    cursor: str


class ReviewFilters(TypedDict, total=False):
    """The query of ``GET /v1/review`` (RFC 5.7): ``scope`` takes one value or several."""

    scope: Many
    order: ReviewOrder
    limit: int
    #: ``next_cursor`` of the previous page
    cursor: str


# -- request bodies -------------------------------------------------------------------


class CaptureRequest(Body):
    """Something to remember (RFC 3).

    ``observation`` content is ``{"subject", "predicate", "object"}`` and also derives a
    semantic fact; ``working_state`` content is ``{"thread_id", "task_state",
    "context_summary", ...}``; ``event``, ``tool_output`` and ``outcome`` content may hold
    ``text``, ``tool_calls``, ``outcome`` and ``entities``.
    """

    source_kind: SourceKind
    scope: str
    content: dict[str, Any]
    summary: str | None = None
    reason_to_remember: str | None = None
    tags: list[str] | None = None
    sensitivity: SensitivityLevel | None = None
    occurred_at: datetime | None = None
    metadata: dict[str, Any] | None = None
    #: RFC 3.3, 6.3: prune deletes the record once this many seconds have passed (1 to 100 years)
    max_age_seconds: int | None = None


class CaptureBatch(Body):
    """``POST /v1/captures:batch``: at most 1,000 captures, each validated on its own."""

    captures: list[dict[str, Any]]


class ExpandOptions(Body):
    """Graph expansion bounds of a retrieval."""

    hops: int | None = None
    max_nodes: int | None = None
    max_edges: int | None = None


class RetrieveRequest(Body):
    """``POST /v1/retrieve``: a bounded, trust-aware retrieval."""

    query: str | None = None
    scopes: list[str] | None = None
    max_sensitivity: SensitivityLevel | None = None
    memory_types: list[MemoryTypeName] | None = None
    tags: list[str] | None = None
    min_salience: float | None = None
    limit: int | None = None
    max_bytes: int | None = None
    include_contested: bool | None = None
    include_retracted: bool | None = None
    #: RFC 5.7: return proposed records too, marked ``proposed`` and ranked below active ones
    include_proposed: bool | None = None
    as_of: datetime | None = None
    valid_at: datetime | None = None
    expand: ExpandOptions | None = None


class EvidenceRef(Body):
    """A provenance reference cited by a revision: a kind and an opaque ref or record id."""

    kind: ProvenanceKindName
    ref: str


class ProvenanceSource(Body):
    """Where a revised record came from."""

    kind: ProvenanceKindName
    ref: str
    hash: str | None = None
    created_by: str | None = None
    timestamp: datetime | None = None


class RevisedRecord(Body):
    """The new content of a supersede, fork or merge.

    A semantic target takes ``subject``/``predicate``/``object`` (each defaults to the
    old value); any other record type takes its full ``payload``.
    """

    subject: str | None = None
    predicate: str | None = None
    object: str | None = None
    payload: dict[str, Any] | None = None
    evidence: list[EvidenceRef] | None = None
    provenance: list[ProvenanceSource] | None = None
    validity: Validity | None = None
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    sensitivity: SensitivityLevel | None = None
    confidence: float | None = None
    summary: str | None = None
    tags: list[str] | None = None
    metadata: dict[str, Any] | None = None
    #: RFC 5.2, 6.3: the new record's maximum age in seconds (a type prune may delete only)
    max_age_seconds: int | None = None


class SupersedeBody(Body):
    """``POST /v1/records/{id}/supersede``: replace a fact with a new version."""

    record: RevisedRecord
    rationale: str
    evidence: list[EvidenceRef] | None = None
    force: bool | None = None


class ForkBody(Body):
    """``POST /v1/records/{id}/fork``: a conditional variant of a record."""

    record: RevisedRecord | None = None
    rationale: str
    condition: dict[str, Any] | str | None = None
    evidence: list[EvidenceRef] | None = None


class MergeBody(Body):
    """``POST /v1/records:merge``: several records into one."""

    record_ids: list[UUID]
    record: RevisedRecord | None = None
    rationale: str
    evidence: list[EvidenceRef] | None = None
    force: bool | None = None


class RetractBody(Body):
    """``POST /v1/records/{id}/retract``."""

    rationale: str


class ContestBody(Body):
    """``POST /v1/records/{id}/contest``, optionally naming the record that contests it."""

    rationale: str
    contesting_record_id: UUID | None = None


class ReinforceBody(Body):
    """``POST /v1/records/{id}/reinforce``."""

    rationale: str | None = None


class PenalizeBody(Body):
    """``POST /v1/records/{id}/penalize``: remove ``amount`` of salience (server default 0.1)."""

    amount: float | None = None
    rationale: str | None = None


class MaintenanceRun(Body):
    """``POST /v1/maintenance/run``: one batch of each job, now."""

    jobs: list[MaintenanceJob]


class RequeueBody(Body):
    """``POST /v1/work:requeue`` (operator): buried items put back, due now."""

    ids: list[int]
    rationale: str | None = None


class Decision(Body):
    """One decision on a proposal (RFC 5.7): ``approve`` (``mode`` ``replace`` or ``beside``
    when an active fact of the same subject and predicate has another object), ``reject``,
    or ``amend`` with ``record``, the reviewer's version of the fact (as a supersede's)."""

    proposal_id: UUID
    decision: DecisionName
    mode: ApprovalMode | None = None
    rationale: str | None = None
    record: RevisedRecord | None = None
    evidence: list[EvidenceRef] | None = None


class DecideBody(Body):
    """``POST /v1/review:decide`` (reviewer keys): 1 to 1,000 decisions, each applied on its
    own (RFC 5.7)."""

    decisions: list[Decision]


# -- moving and forgetting (RFC 15) ------------------------------------------------------


class ExportFilters(TypedDict, total=False):
    """The filters of ``GET /v1/export``, by their query parameter names (RFC 15.1):
    ``scope`` and ``type`` take one value or several; ``created_after`` and
    ``created_before`` bound ``created_at``, half-open."""

    scope: Many
    type: MemoryTypeName | Sequence[MemoryTypeName]
    created_after: When
    created_before: When
    #: the embeddings too, naming their model
    with_vectors: bool
    #: sealed records as plain ones (the deployment must hold their keys)
    open_sealed: bool


class ImportReport(Answer):
    """``POST /v1/import`` (operator keys): what an import wrote and what it left (RFC 15.2)."""

    records_written: int = 0
    records_overwritten: int = 0
    records_skipped: int = 0
    tags: int = 0
    provenance: int = 0
    relations: int = 0
    relations_dangling: int = 0
    entity_terms: int = 0
    entity_identifiers: int = 0
    entity_identifiers_skipped: int = 0
    vectors: int = 0
    embeddings_queued: int = 0
    proposals: int = 0
    tombstones: int = 0
    erasures: int = 0
    audit_appended: int = 0
    chains: dict[str, int] = Field(default_factory=dict)


ErasureTarget = Literal["scope", "entity", "records"]


class Erasure(Answer):
    """``POST /v1/erase`` (keys with ``erase``): what an erasure removed, or a dry run would,
    by table, and the dry run's confirmation (RFC 15.4)."""

    dry_run: bool
    erasure_id: UUID | None = None
    target: ErasureTarget
    counts: dict[str, int]
    outside_scopes: int = 0
    confirm: str
    erased_at: datetime | None = None
