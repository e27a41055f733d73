"""What a list call returns (RFC 10.7)."""

from __future__ import annotations

from datetime import datetime
from typing import Literal
from uuid import UUID

from pydantic import Field

from membrane_core.enums import OperationKind, OperationStatus, RevisionStatus, WorkKind
from membrane_core.inbox.submit import OperationView
from membrane_core.models import Frozen
from membrane_core.results import RecordView


class PageDiagnostics(Frozen):
    """RFC 10.7: what bounded a page."""

    returned: int
    bytes: int
    row_limit: int
    max_bytes: int
    #: more rows matched than the page holds
    row_limit_applied: bool
    #: the page stopped early at ``max_bytes``
    byte_limit_applied: bool
    #: RFC 13.2: the server that answered: the replica, or the primary
    served_by: Literal["primary", "replica"] = "primary"


class RecordPage(Frozen):
    """RFC 10.7: one page of records, newest first; ``next_cursor`` is None on the last page."""

    records: list[RecordView]
    next_cursor: str | None = None
    diagnostics: PageDiagnostics


#: RFC 10.7: the correction edges of a lineage. ``supersedes`` runs from the new record to
#: the one it replaced, ``merged_into`` from a source to the merged record, ``forked_from``
#: from a variant to its original, ``contests`` from the contesting record to its target.
LineageKind = Literal["supersedes", "merged_into", "forked_from", "contests"]


class Evidence(Frozen):
    """A provenance reference cited by a correction (RFC 5.2)."""

    kind: str
    ref: str


class LineageEdge(Frozen):
    """One correction between two records of a lineage, with who made it, when and why (RFC 5.5)."""

    kind: LineageKind
    source_id: UUID
    target_id: UUID
    #: the key id (actor) that made the correction; None when its audit entry is not shown
    actor: str | None = None
    at: datetime | None = None
    rationale: str | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    #: the status the correction left its target in, as of the read
    target_status: RevisionStatus | None = None


class Lineage(Frozen):
    """RFC 10.7: a record's correction chain as nodes (records, trust-checked) and edges.

    Nodes the caller may not see are left out with every edge that touches them; a node one
    level above the caller's maximum is shown redacted and its edges name no rationale.
    """

    record_id: UUID
    nodes: list[RecordView]
    edges: list[LineageEdge]
    #: the walk stopped at its node bound
    truncated: bool = False


class OperationSummary(OperationView):
    """RFC 10.7: an operation as a list shows it: its view, who submitted it and its scope."""

    principal: str
    scope: str | None = None
    target_id: UUID | None = None
    attempts: int = 0


class OperationPage(Frozen):
    """RFC 10.7: one page of operations, newest first."""

    operations: list[OperationSummary]
    next_cursor: str | None = None


class JobBacklog(Frozen):
    """RFC 10.7: one job's items: due now, claimed by a worker, retrying after a failure,
    buried after the last attempt, and the oldest due item."""

    kind: WorkKind
    due: int
    claimed: int
    retrying: int
    buried: int
    pending: int
    oldest_due_at: datetime | None = None
    oldest_due_seconds: float | None = None


class BuriedItem(Frozen):
    """RFC 10.7: a work item buried after its last attempt (RFC 9.4), with its last error."""

    id: int
    kind: WorkKind
    target_id: UUID
    attempts: int
    last_error: str | None = None
    due_at: datetime
    created_at: datetime


class InboxCount(Frozen):
    """RFC 10.7: operations of one kind and status in the inbox."""

    kind: OperationKind
    status: OperationStatus
    count: int


class WorkOverview(Frozen):
    """RFC 10.7: ``GET /v1/work``: every job's backlog, the inbox, the embedding lag and a page
    of buried items."""

    jobs: list[JobBacklog]
    inbox: list[InboxCount]
    embedding_lag_seconds: float | None = None
    buried: list[BuriedItem]
    next_cursor: str | None = None


class RequeueResult(Frozen):
    """RFC 10.7: ``POST /v1/work:requeue``: the items put back, and those left as they were
    (not buried, or gone)."""

    requeued: list[int]
    unchanged: list[int]


class ScopeCount(Frozen):
    """RFC 10.7: a scope the caller may read, with its records by status (those it sees)."""

    scope: str
    records: int
    active: int
    contested: int
    retracted: int
    proposed: int


class ScopeList(Frozen):
    """RFC 10.7: ``GET /v1/scopes``."""

    scopes: list[ScopeCount]


__all__ = [
    "BuriedItem",
    "Evidence",
    "InboxCount",
    "JobBacklog",
    "Lineage",
    "LineageEdge",
    "LineageKind",
    "OperationPage",
    "OperationSummary",
    "PageDiagnostics",
    "RecordPage",
    "RequeueResult",
    "ScopeCount",
    "ScopeList",
    "WorkOverview",
]
