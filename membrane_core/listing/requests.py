"""What a list call accepts (RFC 10.7): filters, a page size, a byte budget and a cursor."""

from __future__ import annotations

from typing import Annotated

from pydantic import AwareDatetime, Field, model_validator

from membrane_core.enums import (
    MemoryType,
    OperationKind,
    OperationStatus,
    RevisionStatus,
    Sensitivity,
    WorkKind,
)
from membrane_core.models import ClientInput, Scope, Tag
from membrane_core.requests import ConsistencyToken

#: RFC 10.7: rows a page holds by default and at most.
DEFAULT_PAGE = 50
MAX_PAGE = 200
#: RFC 10.7: the projected bytes a page of records holds by default and at most (as retrieve).
DEFAULT_PAGE_BYTES = 1024 * 1024
MAX_PAGE_BYTES = 16 * 1024 * 1024
#: RFC 10.7: the longest cursor accepted.
MAX_CURSOR = 512

Cursor = Annotated[str, Field(min_length=1, max_length=MAX_CURSOR)]
Term = Annotated[str, Field(min_length=1, max_length=1024)]


class RecordListRequest(ClientInput):
    """RFC 10.7: ``GET /v1/records``, newest first, under the caller's narrowed policy.

    Time ranges are half-open, ``[after, before)``; ``valid_after``/``valid_before`` keep the
    records whose validity overlaps the range. ``statuses`` defaults to active and contested:
    retracted records are listed only when asked for (RFC 5.1).
    """

    scopes: list[Scope] | None = Field(default=None, max_length=256)
    types: list[MemoryType] | None = Field(default=None, max_length=6)
    statuses: list[RevisionStatus] | None = Field(default=None, max_length=4)
    sensitivities: list[Sensitivity] | None = Field(default=None, max_length=5)
    max_sensitivity: Sensitivity | None = None
    tags: list[Tag] | None = Field(default=None, max_length=64)
    #: an entity record's id: the records related to it, either way (RFC 3.5)
    entity: str | None = Field(default=None, max_length=64)
    subject: Term | None = None
    predicate: Term | None = None
    created_after: AwareDatetime | None = None
    created_before: AwareDatetime | None = None
    occurred_after: AwareDatetime | None = None
    occurred_before: AwareDatetime | None = None
    valid_after: AwareDatetime | None = None
    valid_before: AwareDatetime | None = None
    as_of: AwareDatetime | None = None
    #: RFC 13.2: a write's consistency token: the page sees that write
    min_lsn: ConsistencyToken | None = None
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    max_bytes: int = Field(default=DEFAULT_PAGE_BYTES, ge=1024, le=MAX_PAGE_BYTES)
    cursor: Cursor | None = None

    @model_validator(mode="after")
    def _ranges(self) -> RecordListRequest:
        for name in ("created", "occurred", "valid"):
            lo, hi = getattr(self, f"{name}_after"), getattr(self, f"{name}_before")
            if lo is not None and hi is not None and hi <= lo:
                raise ValueError(f"{name}_before must be later than {name}_after")
        return self


class OperationListRequest(ClientInput):
    """RFC 10.7: ``GET /v1/operations``, newest first; a key sees its own unless an operator."""

    kinds: list[OperationKind] | None = Field(default=None, max_length=16)
    statuses: list[OperationStatus] | None = Field(default=None, max_length=4)
    scope: Scope | None = None
    created_after: AwareDatetime | None = None
    created_before: AwareDatetime | None = None
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: Cursor | None = None


class WorkRequest(ClientInput):
    """RFC 10.7: ``GET /v1/work`` (operator): the backlog of each job and a page of buried items."""

    kinds: list[WorkKind] | None = Field(default=None, max_length=16)
    limit: int = Field(default=DEFAULT_PAGE, ge=1, le=MAX_PAGE)
    cursor: Cursor | None = None


class RequeueRequest(ClientInput):
    """RFC 10.7: ``POST /v1/work:requeue`` (operator): buried items put back, due now."""

    #: RFC 10.7: ids are integers every JSON reader holds exactly, at most 2^53 - 1
    ids: list[Annotated[int, Field(ge=1, le=2**53 - 1)]] = Field(min_length=1, max_length=1000)
    rationale: str = Field(default="requeued by an operator", min_length=1, max_length=4096)
