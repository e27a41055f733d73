"""The record model: one ``MemoryRecord`` with a discriminated payload (RFC 2).

Models are frozen and carry no I/O. The payload's ``kind`` must equal the record's
``type`` (RFC 2.1); budgets on client JSON are in :mod:`membrane_core.budget`.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, StringConstraints, model_validator

from membrane_core import budget
from membrane_core.enums import (
    DecayCurve,
    DeletionPolicy,
    EdgeKind,
    MemoryType,
    OutcomeStatus,
    ProvenanceKind,
    RevisionStatus,
    Sensitivity,
    TaskState,
    ValidityMode,
)

Text = Annotated[str, StringConstraints(strip_whitespace=True, max_length=4096)]
#: RFC 10.4: a text stripped before its length is checked has a character that is not a space;
#: the pattern says so in the OpenAPI schema, where ``minLength`` alone would allow ``" "``. The
#: separators U+001C-U+001F and NEL are spaces to Python's ``str.strip``, not to JSON Schema's
#: ``\s``, so they are named too.
NOT_BLANK = r"[^\s\x1c-\x1f\x85]"
Name = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512, pattern=NOT_BLANK)
]
Scope = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256, pattern=NOT_BLANK)
]
Tag = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128, pattern=NOT_BLANK)
]
JSONDict = dict[str, Any]


class Frozen(BaseModel):
    """Base of every model: immutable, unknown fields and non-finite floats refused."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)


class ClientInput(Frozen):
    """Base of every model a client sends (RFC 2.4): besides its fields' own rules, no NUL
    character and no non-finite number anywhere in it, keys and free-form JSON included.

    The one place that rule lives: every request the API or the library accepts is one of
    these, so no route checks it on its own.
    """

    @model_validator(mode="before")
    @classmethod
    def _storable(cls, data: Any) -> Any:
        budget.check_storable(data)
        return data


# -- payloads (RFC 2.2) -------------------------------------------------------


class ToolCall(Frozen):
    """One tool invocation inside an episode."""

    tool: Name
    args: JSONDict = Field(default_factory=dict)
    result: Any = None


class EpisodicPayload(Frozen):
    """Raw experience: text, tool calls and outcome of one event (RFC 2.2.1)."""

    kind: Literal["episodic"] = "episodic"
    source_kind: str = "event"
    text: str | None = Field(default=None, max_length=65536)
    tool_calls: list[ToolCall] = Field(default_factory=list, max_length=256)
    outcome: OutcomeStatus | None = None
    entities: list[Name] = Field(default_factory=list, max_length=64)
    data: JSONDict = Field(default_factory=dict)


class WorkingPayload(Frozen):
    """State of an ongoing task, for resumption (RFC 2.2.2)."""

    kind: Literal["working"] = "working"
    thread_id: Name
    task_state: TaskState
    context_summary: Text
    next_actions: list[Text] = Field(default_factory=list, max_length=128)
    open_questions: list[Text] = Field(default_factory=list, max_length=128)


class ProvenanceRef(Frozen):
    """Evidence reference: a provenance kind and an opaque ref or record id (RFC 2.5)."""

    kind: ProvenanceKind
    ref: Name


class Validity(Frozen):
    """Valid time of a fact (RFC 5.6)."""

    mode: ValidityMode = ValidityMode.GLOBAL
    conditions: JSONDict = Field(default_factory=dict)
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None

    @model_validator(mode="after")
    def _window(self) -> Validity:
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError("valid_to must be after valid_from")
        return self


class SemanticPayload(Frozen):
    """A subject/predicate/object fact (RFC 2.2.3)."""

    kind: Literal["semantic"] = "semantic"
    subject: Name
    predicate: Name
    object: Name
    evidence: list[ProvenanceRef] = Field(default_factory=list, max_length=256)
    validity: Validity = Field(default_factory=Validity)
    supersedes: UUID | None = None
    superseded_by: UUID | None = None


class Trigger(Frozen):
    """When a competence applies."""

    signal: Name
    conditions: JSONDict = Field(default_factory=dict)


class RecipeStep(Frozen):
    """One step of a competence recipe."""

    step: Text
    tool: str | None = None
    args_schema: JSONDict = Field(default_factory=dict)
    validation: str | None = None


class PerformanceStats(Frozen):
    """Observed success of a competence (RFC 2.2.4)."""

    success_count: int = Field(default=0, ge=0)
    failure_count: int = Field(default=0, ge=0)
    avg_latency_ms: float | None = Field(default=None, ge=0)
    last_used_at: AwareDatetime | None = None

    @property
    def success_rate(self) -> float:
        """Successes over uses; 0 when unused."""
        total = self.success_count + self.failure_count
        return self.success_count / total if total else 0.0


class CompetencePayload(Frozen):
    """Procedural knowledge: how to achieve a goal (RFC 2.2.4)."""

    kind: Literal["competence"] = "competence"
    skill_name: Name
    triggers: list[Trigger] = Field(default_factory=list, max_length=64)
    recipe: list[RecipeStep] = Field(default_factory=list, max_length=256)
    required_tools: list[Name] = Field(default_factory=list, max_length=64)
    failure_modes: list[Text] = Field(default_factory=list, max_length=64)
    fallbacks: list[Text] = Field(default_factory=list, max_length=64)
    performance: PerformanceStats = Field(default_factory=PerformanceStats)
    signature: list[Name] = Field(default_factory=list, max_length=256)


class PlanNode(Frozen):
    """An action in a plan graph."""

    id: Name
    op: Name
    params: JSONDict = Field(default_factory=dict)
    guards: JSONDict = Field(default_factory=dict)


class PlanEdge(Frozen):
    """A data or control edge in a plan graph."""

    source: Name
    target: Name
    kind: EdgeKind = EdgeKind.CONTROL


class PlanMetrics(Frozen):
    """Execution statistics of a plan graph."""

    execution_count: int = Field(default=0, ge=0)
    failure_rate: float = Field(default=0.0, ge=0, le=1)
    avg_latency_ms: float | None = Field(default=None, ge=0)
    last_executed_at: AwareDatetime | None = None


class PlanGraphPayload(Frozen):
    """A reusable solution structure (RFC 2.2.5)."""

    kind: Literal["plan_graph"] = "plan_graph"
    intent: Name
    nodes: list[PlanNode] = Field(min_length=1, max_length=256)
    edges: list[PlanEdge] = Field(default_factory=list, max_length=1024)
    constraints: JSONDict = Field(default_factory=dict)
    metrics: PlanMetrics = Field(default_factory=PlanMetrics)

    @model_validator(mode="after")
    def _edges_reference_nodes(self) -> PlanGraphPayload:
        ids = {n.id for n in self.nodes}
        for i, edge in enumerate(self.edges):
            if edge.source not in ids or edge.target not in ids:
                raise ValueError(f"edges[{i}] references a node that is not in nodes")
        return self


class EntityAlias(Frozen):
    """Another name of an entity."""

    value: Name
    kind: str = "alias"


class EntityIdentifier(Frozen):
    """A namespaced identifier of an entity (``github:octocat``)."""

    namespace: Name
    value: Name


class EntityPayload(Frozen):
    """A canonical entity (RFC 2.2.6)."""

    kind: Literal["entity"] = "entity"
    canonical_name: Name
    entity_kind: str = "thing"
    aliases: list[EntityAlias] = Field(default_factory=list, max_length=64)
    identifiers: list[EntityIdentifier] = Field(default_factory=list, max_length=64)
    description: str | None = Field(default=None, max_length=4096)


Payload = Annotated[
    EpisodicPayload | WorkingPayload | SemanticPayload | CompetencePayload | PlanGraphPayload | EntityPayload,
    Field(discriminator="kind"),
]


# -- record parts (RFC 2.5, 6.1) ------------------------------------------------


class DecayProfile(Frozen):
    """Decay parameters of a record (RFC 6.1)."""

    curve: DecayCurve = DecayCurve.EXPONENTIAL
    half_life_seconds: int = Field(ge=1)
    min_salience: float = Field(default=0.0, ge=0, le=1)
    max_age_seconds: int | None = Field(default=None, ge=1)
    reinforcement_gain: float = Field(default=0.1, ge=0, le=1)


class Lifecycle(Frozen):
    """Decay clock and deletion rules (RFC 6.1, 6.3).

    ``base_salience`` is the salience at ``reinforced_at``; the current salience is
    always computed from these two, never from a previously decayed value.
    """

    decay: DecayProfile
    base_salience: float = Field(default=1.0, ge=0)
    reinforced_at: datetime
    pinned: bool = False
    deletion_policy: DeletionPolicy = DeletionPolicy.AUTO_PRUNE


class ProvenanceSource(Frozen):
    """Where a record came from (RFC 2.5)."""

    kind: ProvenanceKind
    ref: Name
    hash: str | None = Field(default=None, max_length=256)
    created_by: str | None = Field(default=None, max_length=256)
    timestamp: datetime | None = None


class Relation(Frozen):
    """A typed directed edge to another record (RFC 2.5)."""

    predicate: Name
    target_id: UUID
    weight: float | None = Field(default=None, ge=0, le=1)


class MemoryRecord(Frozen):
    """The atomic unit of storage (RFC 2.1)."""

    id: UUID
    type: MemoryType
    scope: Scope
    sensitivity: Sensitivity = Sensitivity.LOW
    confidence: float = Field(ge=0, le=1)
    salience: float = Field(ge=0)
    status: RevisionStatus = RevisionStatus.ACTIVE
    lifecycle: Lifecycle
    payload: Payload
    summary: str | None = Field(default=None, max_length=4096)
    tags: list[Tag] = Field(default_factory=list, max_length=64)
    metadata: JSONDict = Field(default_factory=dict)
    provenance: list[ProvenanceSource] = Field(default_factory=list, max_length=256)
    relations: list[Relation] = Field(default_factory=list, max_length=1024)
    validity: Validity | None = None
    occurred_at: datetime | None = None
    created_at: datetime
    updated_at: datetime
    recorded_at: datetime
    retracted_at: datetime | None = None
    redacted: bool = False

    @model_validator(mode="before")
    @classmethod
    def _budget(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for name in ("payload", "metadata"):
                value = data.get(name)
                if isinstance(value, dict):
                    budget.check_json_budget(
                        value,
                        field=name,
                        max_bytes=budget.MAX_PAYLOAD_BYTES,
                        max_depth=budget.MAX_PAYLOAD_DEPTH,
                    )
        return data

    @model_validator(mode="after")
    def _kind_matches_type(self) -> MemoryRecord:
        if self.payload.kind != self.type.value:
            raise ValueError(
                f"payload kind {self.payload.kind!r} does not match record type {self.type.value!r}"
            )
        return self


class AuditEntry(Frozen):
    """One entry of a record's append-only history (RFC 5.5)."""

    action: str
    actor: str
    timestamp: datetime
    rationale: str
    details: JSONDict = Field(default_factory=dict)
    #: RFC 15.4: an erasure blanked the entry's rationale and details; the chain still verifies
    erased: bool = False


class AuditHistory(Frozen):
    """A record's audit entries and whether their hash chain verifies (RFC 5.5)."""

    record_id: UUID
    entries: list[AuditEntry]
    chain_valid: bool
