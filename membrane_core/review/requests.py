"""What the review calls accept (RFC 5.7): the queue's filters and a batch of decisions."""

from __future__ import annotations

import uuid
from typing import Literal

from pydantic import Field, model_validator

from membrane_core.listing.requests import DEFAULT_PAGE, MAX_PAGE, Cursor
from membrane_core.models import ClientInput, ProvenanceRef, Scope
from membrane_core.revision.rules import RevisedRecord

#: RFC 5.7: decisions one call takes at most.
MAX_DECISIONS = 1000

Decision = Literal["approve", "reject", "amend"]
#: RFC 5.7: an approval beside an active fact with the subject and predicate: replace it, or keep both
Mode = Literal["replace", "beside"]
Order = Literal["age", "corroboration"]


class QueueRequest(ClientInput):
    """RFC 5.7: ``GET /v1/review``: pending proposals the caller may decide."""

    scopes: list[Scope] | None = Field(default=None, max_length=256)
    order: Order = "age"
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: Cursor | None = None


class DecisionRequest(ClientInput):
    """RFC 5.7: one decision on one proposal."""

    proposal_id: uuid.UUID
    decision: Decision
    mode: Mode | None = None
    rationale: str | None = Field(default=None, max_length=4096)
    #: amend: the reviewer's version of the proposed fact (as a supersede's record, RFC 5.2.1)
    record: RevisedRecord | None = None
    evidence: list[ProvenanceRef] = Field(default_factory=list, max_length=256)

    @model_validator(mode="after")
    def _fits_decision(self) -> DecisionRequest:
        if self.decision == "amend" and self.record is None:
            raise ValueError("amend needs record: the reviewer's version of the fact")
        if self.decision != "amend" and self.record is not None:
            raise ValueError("record is taken by amend only")
        if self.mode is not None and self.decision != "approve":
            raise ValueError("mode is taken by approve only")
        if self.evidence and self.decision != "amend":
            raise ValueError("evidence is taken by amend only")
        return self


class DecideRequest(ClientInput):
    """RFC 5.7: ``POST /v1/review:decide``: 1 to 1,000 decisions, each applied on its own."""

    decisions: list[DecisionRequest] = Field(min_length=1, max_length=MAX_DECISIONS)
