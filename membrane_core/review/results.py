"""What the review calls answer (RFC 5.7): queue pages and decision outcomes."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from membrane_core.enums import Sensitivity
from membrane_core.models import Frozen
from membrane_core.results import RecordView

Outcome = Literal["approved", "rejected", "amended", "expired"]


class ReviewEntry(Frozen):
    """RFC 5.7: a pending proposal as its reviewer sees it."""

    proposal_id: uuid.UUID
    scope: str
    sensitivity: Sensitivity
    source: Literal["capture", "extraction"]
    proposed_by: str
    #: the actors of the other writes that corroborated it
    corroborators: list[str] = Field(default_factory=list)
    corroborations: int = 0
    created_at: datetime
    expires_at: datetime
    #: the proposal's records: its primary record, fact and entities
    records: list[RecordView] = Field(default_factory=list)
    #: the proposed fact, when the proposal has one
    fact: RecordView | None = None
    #: what the fact cites (its provenance)
    evidence: list[dict[str, Any]] = Field(default_factory=list)
    #: the records the fact derives from, as the caller sees them
    source_episodes: list[RecordView] = Field(default_factory=list)
    #: active facts with the fact's subject and predicate and another object
    conflicts: list[RecordView] = Field(default_factory=list)


class ReviewPage(Frozen):
    """RFC 5.7: one page of the queue; ``next_cursor`` is null on the last."""

    entries: list[ReviewEntry]
    next_cursor: str | None = None


class DecisionError(Frozen):
    """Why one decision was refused (RFC 10.2's error body)."""

    code: str
    message: str
    details: list[dict[str, Any]] = Field(default_factory=list)


class DecisionResult(Frozen):
    """RFC 5.7: one decision's outcome, or its error."""

    proposal_id: uuid.UUID
    outcome: Outcome | None = None
    record_ids: list[uuid.UUID] = Field(default_factory=list)
    error: DecisionError | None = None


class DecideResult(Frozen):
    """RFC 5.7: every decision's result, in input order."""

    results: list[DecisionResult]


class ExpireResult(Frozen):
    """RFC 5.7: a batch of expiry."""

    expired: int
