"""Turning a capture request into records (RFC 3.3, 3.4); pure, no I/O."""

from __future__ import annotations

import os
import threading
import time
import uuid
from datetime import datetime
from typing import Any

from pydantic import Field

from membrane_core.enums import MemoryType, ProvenanceKind, RevisionStatus, SourceKind, ValidityMode
from membrane_core.models import (
    EpisodicPayload,
    Frozen,
    Lifecycle,
    MemoryRecord,
    ProvenanceRef,
    ProvenanceSource,
    SemanticPayload,
    Validity,
    WorkingPayload,
)
from membrane_core.policy import Policy, classify
from membrane_core.requests import CaptureRequest

_PROVENANCE: dict[SourceKind, ProvenanceKind] = {
    SourceKind.EVENT: ProvenanceKind.EVENT,
    SourceKind.TOOL_OUTPUT: ProvenanceKind.TOOL_CALL,
    SourceKind.OBSERVATION: ProvenanceKind.OBSERVATION,
    SourceKind.OUTCOME: ProvenanceKind.OUTCOME,
    SourceKind.WORKING_STATE: ProvenanceKind.EVENT,
}
_EPISODIC_KEYS = ("text", "tool_calls", "outcome", "entities")


class FactCandidate(Frozen):
    """A semantic fact derived from an observation, created unless tombstoned (RFC 3.4)."""

    record: MemoryRecord
    source_id: uuid.UUID


class CapturePlan(Frozen):
    """Everything one capture writes, in one transaction (RFC 3.3)."""

    operation_id: uuid.UUID | None = None
    primary: MemoryRecord
    fact: FactCandidate | None = None
    actor: str = "system"
    extra: dict[str, Any] = Field(default_factory=dict)
    #: RFC 5.7: the capture's records are proposed (its principal's writes need review)
    proposed: bool = False

    def as_proposed(self) -> CapturePlan:
        """RFC 5.7: the same capture with its records proposed."""
        primary = self.primary.model_copy(update={"status": RevisionStatus.PROPOSED})
        fact = self.fact
        if fact is not None:
            fact = fact.model_copy(
                update={"record": fact.record.model_copy(update={"status": RevisionStatus.PROPOSED})}
            )
        return self.model_copy(update={"primary": primary, "fact": fact, "proposed": True})


_ID_LOCK = threading.Lock()
_last_id = (0, 0)  # (unix milliseconds, sequence) of the last id made in this process


def new_id() -> uuid.UUID:
    """A new record id (RFC 2.1): a version-7 UUID, time-ordered and, in this process,
    increasing: ids made in one millisecond count up in the 12 bits after the time, so
    records stamped with one ``occurred_at`` keep the order they were made in (RFC 8.2.1)."""
    global _last_id
    with _ID_LOCK:
        ms, seq = time.time_ns() // 1_000_000, 0
        last_ms, last_seq = _last_id
        if ms <= last_ms:  # the same millisecond, or a clock that stepped back
            ms, seq = (last_ms, last_seq + 1) if last_seq < 0xFFF else (last_ms + 1, 0)
        _last_id = (ms, seq)
    tail = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80 | 0x7 << 76 | seq << 64 | 0b10 << 62 | tail
    return uuid.UUID(int=value)


def _payload(req: CaptureRequest, memory_type: MemoryType) -> EpisodicPayload | WorkingPayload:
    content = req.content
    if memory_type is MemoryType.WORKING:
        return WorkingPayload.model_validate(content)
    known = {k: content[k] for k in _EPISODIC_KEYS if k in content}
    rest = {k: v for k, v in content.items() if k not in _EPISODIC_KEYS}
    return EpisodicPayload.model_validate({**known, "source_kind": req.source_kind.value, "data": rest})


def check_content(req: CaptureRequest) -> None:
    """RFC 2.4, 3.1: validate the payloads a capture would produce, without building records.

    Raises pydantic ``ValidationError`` naming each invalid field, exactly as
    :func:`plan_capture` would for the same request.
    """
    _payload(req, classify(req.source_kind))
    if req.source_kind is SourceKind.OBSERVATION:
        _fact_payload(req, source_id=uuid.UUID(int=0))


def _fact_payload(req: CaptureRequest, *, source_id: uuid.UUID) -> SemanticPayload:
    c = req.content
    valid_from, valid_to = c.get("valid_from"), c.get("valid_to")
    validity = Validity(
        mode=ValidityMode.TIMEBOXED if (valid_from or valid_to) else ValidityMode.GLOBAL,
        valid_from=valid_from,
        valid_to=valid_to,
    )
    return SemanticPayload(
        subject=str(c["subject"]),
        predicate=str(c["predicate"]),
        object=str(c["object"]),
        evidence=[ProvenanceRef(kind=ProvenanceKind.OBSERVATION, ref=str(source_id))],
        validity=validity,
    )


def _search_summary(req: CaptureRequest) -> str | None:
    if req.summary:
        return req.summary
    if req.source_kind is SourceKind.OBSERVATION:
        c = req.content
        return f"{c['subject']} {c['predicate']} {c['object']}"
    return req.reason_to_remember


def plan_capture(
    req: CaptureRequest,
    policy: Policy,
    *,
    now: datetime,
    actor: str,
    record_id: uuid.UUID | None = None,
    operation_id: uuid.UUID | None = None,
) -> CapturePlan:
    """RFC 3.3: classify, stamp policy and build the primary record and any derived fact.

    Raises pydantic ``ValidationError`` naming each invalid field.
    """
    memory_type = classify(req.source_kind)
    sensitivity = policy.sensitivity(req.sensitivity)
    occurred = req.occurred_at or now
    rid = record_id or new_id()
    source = ProvenanceSource(
        kind=_PROVENANCE[req.source_kind],
        ref=f"capture:{operation_id or rid}",
        created_by=actor,
        timestamp=occurred,
    )
    metadata = dict(req.metadata)
    if req.reason_to_remember:
        metadata["reason_to_remember"] = req.reason_to_remember
    decay = policy.decay_profile(memory_type)
    if req.max_age_seconds is not None:  # RFC 3.3, 6.3: the capture's own maximum age
        decay = decay.model_copy(update={"max_age_seconds": req.max_age_seconds})
    primary = MemoryRecord(
        id=rid,
        type=memory_type,
        scope=req.scope,
        sensitivity=sensitivity,
        confidence=policy.confidence(req.source_kind),
        salience=1.0,
        lifecycle=Lifecycle(
            decay=decay,
            base_salience=1.0,
            reinforced_at=now,
            deletion_policy=policy.deletion[memory_type],
        ),
        payload=_payload(req, memory_type),
        summary=_search_summary(req),
        tags=req.tags,
        metadata=metadata,
        provenance=[source],
        occurred_at=occurred,
        created_at=now,
        updated_at=now,
        recorded_at=now,
    )
    fact = None
    if req.source_kind is SourceKind.OBSERVATION:
        fact = FactCandidate(record=_derived_fact(req, primary, policy, now), source_id=rid)
    return CapturePlan(operation_id=operation_id, primary=primary, fact=fact, actor=actor)


def _derived_fact(req: CaptureRequest, source: MemoryRecord, policy: Policy, now: datetime) -> MemoryRecord:
    payload = _fact_payload(req, source_id=source.id)
    validity = payload.validity
    return MemoryRecord(
        id=new_id(),
        type=MemoryType.SEMANTIC,
        scope=source.scope,
        sensitivity=source.sensitivity,
        confidence=policy.confidence(req.source_kind),
        salience=1.0,
        lifecycle=Lifecycle(
            decay=policy.decay_profile(MemoryType.SEMANTIC),
            base_salience=1.0,
            reinforced_at=now,
            deletion_policy=policy.deletion[MemoryType.SEMANTIC],
        ),
        payload=payload,
        summary=f"{payload.subject} {payload.predicate} {payload.object}",
        tags=req.tags,
        provenance=source.provenance,
        validity=validity,
        occurred_at=source.occurred_at,
        created_at=now,
        updated_at=now,
        recorded_at=now,
    )
