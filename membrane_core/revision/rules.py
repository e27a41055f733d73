"""Revision rules: request bodies, the inferred/asserted test, new-record content (RFC 5.2).

What :mod:`membrane_core.revision.engine` applies in its transactions; kept apart so the
operation code reads as one transaction per operation.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, TypeVar

from pydantic import AwareDatetime, BaseModel, Field, StringConstraints, ValidationError, model_validator

from membrane_core import errors
from membrane_core.enums import (
    DeletionPolicy,
    MemoryType,
    OperationKind,
    RevisionStatus,
    Sensitivity,
    ValidityMode,
)
from membrane_core.models import (
    NOT_BLANK,
    ClientInput,
    Frozen,
    JSONDict,
    MemoryRecord,
    Name,
    ProvenanceRef,
    ProvenanceSource,
    SemanticPayload,
    Tag,
    Validity,
)
from membrane_core.requests import MaxAgeSeconds
from membrane_core.trust import TrustPolicy

#: RFC 5.2: a record below this confidence is inferred, not asserted.
ASSERTED_CONFIDENCE = 0.6
#: RFC 5.2: actors whose writes are inferred (first ``:``-separated segment of the actor name).
INFERRING_ACTORS = frozenset({"consolidation", "consolidator", "extraction", "extractor"})
#: RFC 5.2.7: salience removed by a penalty that names no amount.
DEFAULT_PENALTY = 0.1

Rationale = Annotated[
    str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4096, pattern=NOT_BLANK)
]


# -- request bodies (RFC 5.2, 10.1) ------------------------------------------------


class RevisedRecord(Frozen):
    """The new content of a supersede, fork or merge (RFC 5.2.1-5.2.3)."""

    subject: Name | None = None
    predicate: Name | None = None
    object: Name | None = None
    payload: JSONDict | None = None  #: non-semantic targets: the full payload of the same kind
    evidence: list[ProvenanceRef] = Field(default_factory=list, max_length=256)
    provenance: list[ProvenanceSource] = Field(default_factory=list, max_length=256)
    validity: Validity | None = None
    valid_from: AwareDatetime | None = None
    valid_to: AwareDatetime | None = None
    sensitivity: Sensitivity | None = None
    confidence: float | None = Field(default=None, ge=0, le=1)
    summary: str | None = Field(default=None, max_length=4096)
    tags: list[Tag] | None = Field(default=None, max_length=64)
    metadata: JSONDict | None = None
    #: RFC 5.2, 6.3: the new record's maximum age; only for a type prune may delete
    max_age_seconds: MaxAgeSeconds | None = None

    @model_validator(mode="after")
    def _window(self) -> RevisedRecord:
        if self.valid_from and self.valid_to and self.valid_to <= self.valid_from:
            raise ValueError("valid_to must be after valid_from")
        return self


class SupersedeBody(ClientInput):
    """RFC 5.2.1."""

    record: RevisedRecord
    rationale: Rationale
    evidence: list[ProvenanceRef] = Field(default_factory=list, max_length=256)
    force: bool = False


class ForkBody(ClientInput):
    """RFC 5.2.2."""

    record: RevisedRecord = Field(default_factory=RevisedRecord)
    rationale: Rationale
    condition: JSONDict | str | None = None
    evidence: list[ProvenanceRef] = Field(default_factory=list, max_length=256)


class MergeBody(ClientInput):
    """RFC 5.2.3."""

    record_ids: list[uuid.UUID] = Field(min_length=2, max_length=100)
    record: RevisedRecord = Field(default_factory=RevisedRecord)
    rationale: Rationale
    evidence: list[ProvenanceRef] = Field(default_factory=list, max_length=256)
    force: bool = False


class RetractBody(ClientInput):
    """RFC 5.2.4."""

    rationale: Rationale


class ContestBody(ClientInput):
    """RFC 5.2.5."""

    rationale: Rationale
    contesting_record_id: uuid.UUID | None = None


class ReinforceBody(ClientInput):
    """RFC 5.2.6."""

    rationale: Rationale = "reinforced"


class PenalizeBody(ClientInput):
    """RFC 5.2.7."""

    amount: float = Field(default=DEFAULT_PENALTY, gt=0, le=1)
    rationale: Rationale = "penalized"


BODIES: dict[OperationKind, type[ClientInput]] = {
    OperationKind.SUPERSEDE: SupersedeBody,
    OperationKind.FORK: ForkBody,
    OperationKind.MERGE: MergeBody,
    OperationKind.RETRACT: RetractBody,
    OperationKind.CONTEST: ContestBody,
    OperationKind.REINFORCE: ReinforceBody,
    OperationKind.PENALIZE: PenalizeBody,
}
_KINDS = {model: kind for kind, model in BODIES.items()}

B = TypeVar("B", bound=ClientInput)


def parse(model: type[B], body: Mapping[str, Any] | BaseModel) -> B:
    """Validate a revision body into its exact type before anything is written; ``InvalidInput``
    names each field (RFC 2.4, 5.2)."""
    if isinstance(body, model):
        return body
    try:
        return model.model_validate(body if isinstance(body, Mapping) else body.model_dump())
    except ValidationError as exc:
        raise errors.InvalidInput(f"invalid {_KINDS[model]} body", details=errors.field_errors(exc)) from exc


def parse_body(kind: OperationKind | str, body: Mapping[str, Any] | BaseModel) -> ClientInput:
    """Validate a revision body of operation ``kind`` (RFC 2.4, 5.2); :func:`parse` where the
    operation is known."""
    try:
        model = BODIES[OperationKind(kind)]
    except (KeyError, ValueError) as exc:
        raise errors.InvalidInput(f"{kind!r} is not a revision operation") from exc
    return parse(model, body)


def require_revisable(record_id: uuid.UUID, visibility: str, writable: bool) -> None:
    """RFC 5.2, 7.3: a record the caller cannot see (or that is missing) is 404; one it sees
    redacted, or in a scope it may not write, is 403. The service checks this when a revision
    is submitted and again when it runs, so both answer alike."""
    if visibility == "hidden":
        raise errors.NotFound(f"record {record_id} not found")
    if visibility == "redacted" or not writable:
        raise errors.Forbidden(
            f"the caller may not revise record {record_id}",
            details=[{"field": "scope", "message": "not writable", "type": "forbidden"}],
        )


def require_trusted_writer(trust: TrustPolicy) -> None:
    """RFC 5.7: a key whose writes need review may not revise: a revision is no proposal, so
    its corrections are captures, which a reviewer decides."""
    if trust.review_required:
        raise errors.Forbidden(
            "the caller's writes need review: it may capture (proposed for a reviewer) but not revise",
            details=[{"field": "review", "message": "writes need review", "type": "forbidden"}],
        )


def require_decided(record_id: uuid.UUID, status: RevisionStatus) -> None:
    """RFC 5.7: a proposed record is settled by its review, not by a revision."""
    if status is RevisionStatus.PROPOSED:
        raise errors.RevisionRefused(
            f"record {record_id} is proposed: a reviewer approves, rejects or amends it",
            details=[{"field": "record_id", "message": "proposed", "type": "proposed"}],
        )


def require_level(level: Sensitivity | None, max_rank: int) -> None:
    """RFC 7.2: a revision's new record may not ask for a level above the caller's maximum
    (checked at submission, nothing written, and again when it runs)."""
    if level is not None and level.rank > max_rank:
        raise errors.Forbidden(
            "requested sensitivity is above the caller's maximum",
            details=[{"field": "record.sensitivity", "message": "above policy", "type": "forbidden"}],
        )


def require_prunable(deletion: DeletionPolicy, memory_type: MemoryType) -> None:
    """RFC 6.3: a maximum age is for a record prune may delete (``auto_prune``); prune never
    deletes any other, so a revision does not give one a maximum age it would not honour."""
    if deletion is not DeletionPolicy.AUTO_PRUNE:
        raise errors.InvalidInput(
            f"a maximum age applies only to auto_prune records; {memory_type.value} records are "
            f"{deletion.value}",
            details=[{"field": "record.max_age_seconds", "message": "not auto_prune", "type": "value_error"}],
        )


def is_inferring_actor(actor: str | None) -> bool:
    """RFC 5.2: consolidators and extractors write inferred records."""
    return bool(actor) and str(actor).split(":", 1)[0].strip().casefold() in INFERRING_ACTORS


def is_inferred(confidence: float, creators: Sequence[str | None]) -> bool:
    """RFC 5.2: inferred = confidence below the asserted threshold or written by an inferring actor."""
    return confidence < ASSERTED_CONFIDENCE or any(is_inferring_actor(c) for c in creators)


def revised_validity(base: Validity, rec: RevisedRecord) -> Validity:
    """RFC 5.2: ``record.valid_from``/``valid_to`` override the window; global becomes timeboxed."""
    if not (rec.valid_from or rec.valid_to):
        return base
    mode = ValidityMode.TIMEBOXED if base.mode is ValidityMode.GLOBAL else base.mode
    return base.model_copy(
        update={
            "mode": mode,
            "valid_from": rec.valid_from or base.valid_from,
            "valid_to": rec.valid_to or base.valid_to,
        }
    )


def revised_content(
    op: OperationKind,
    template: MemoryRecord,
    rec: RevisedRecord,
    cited: list[ProvenanceRef],
    sources: Sequence[MemoryRecord],
    validity: Validity,
) -> tuple[Any, str | None]:
    """RFC 5.2: payload and summary of a new record; semantic ones need evidence or provenance."""
    tp = template.payload
    if not isinstance(tp, SemanticPayload):
        if rec.payload is None or rec.subject or rec.predicate or rec.object:
            raise errors.InvalidInput(
                f"a {template.type.value} revision needs record.payload",
                details=[{"field": "record.payload", "message": "required", "type": "missing"}],
            )
        return {**rec.payload, "kind": template.type.value}, rec.summary or template.summary
    if rec.payload is not None:
        raise errors.InvalidInput(
            "semantic revisions take subject, predicate and object",
            details=[{"field": "record.payload", "message": "not allowed", "type": "extra_forbidden"}],
        )
    if op is OperationKind.MERGE:
        inherited = [e for s in sources if isinstance(s.payload, SemanticPayload) for e in s.payload.evidence]
        cited = list(dict.fromkeys([*cited, *inherited]))
    if not cited and not rec.provenance:
        raise errors.RevisionRefused(
            "a semantic revision needs evidence or provenance",
            details=[{"field": "evidence", "message": "empty", "type": "revision_refused"}],
        )
    payload = SemanticPayload(
        subject=rec.subject or tp.subject,
        predicate=rec.predicate or tp.predicate,
        object=rec.object or tp.object,
        evidence=cited,
        validity=validity,
        supersedes=template.id if op is OperationKind.SUPERSEDE else None,
    )
    return payload, rec.summary or f"{payload.subject} {payload.predicate} {payload.object}"
