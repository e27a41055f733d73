"""Lists: records by filter, a record's lineage, operations, the work queue, scopes (RFC 10.7).

Each route turns its query into one call of ``Membrane.listing``; the core validates the
filters (``invalid_input`` names each one) and applies the caller's policy.
"""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Query, Response

from api import schemas, writes
from api.deps import Svc, Trust
from api.params import CONSISTENCY_PATTERN, PageCursor, PageSize, Scopes, Timestamp
from api.writes import Consistency
from membrane_core.enums import (
    MemoryType,
    OperationKind,
    OperationStatus,
    RevisionStatus,
    Sensitivity,
    WorkKind,
)
from membrane_core.listing.requests import MAX_PAGE_BYTES, RequeueRequest, Term
from membrane_core.listing.results import (
    Lineage,
    OperationPage,
    RecordPage,
    RequeueResult,
    ScopeList,
    WorkOverview,
)
from membrane_core.models import Scope, Tag

router = APIRouter(prefix="/v1", tags=["lists"])

Times = Annotated[Timestamp | None, Query()]
AsOf = Annotated[Timestamp | None, Query(description="as believed then")]


def _given(**params: Any) -> dict[str, Any]:
    """The query parameters a caller gave, for the core's request model."""
    return {k: v for k, v in params.items() if v is not None}


@router.get("/records", response_model=RecordPage, responses=schemas.errors(400, 401, 403, 413, 422, 429))
def list_records(
    svc: Svc,
    policy: Trust,
    scope: Scopes = None,
    type: Annotated[list[MemoryType] | None, Query(max_length=6)] = None,
    status: Annotated[
        list[RevisionStatus] | None, Query(max_length=4, description="default active and contested")
    ] = None,
    sensitivity: Annotated[list[Sensitivity] | None, Query(max_length=5)] = None,
    max_sensitivity: Annotated[Sensitivity | None, Query()] = None,
    tag: Annotated[list[Tag] | None, Query(max_length=64)] = None,
    entity: Annotated[UUID | None, Query(description="an entity record's id")] = None,
    subject: Annotated[Term | None, Query()] = None,
    predicate: Annotated[Term | None, Query()] = None,
    created_after: Times = None,
    created_before: Times = None,
    occurred_after: Times = None,
    occurred_before: Times = None,
    valid_after: Times = None,
    valid_before: Times = None,
    as_of: AsOf = None,
    limit: PageSize = None,
    max_bytes: Annotated[int | None, Query(ge=1024, le=MAX_PAGE_BYTES)] = None,
    cursor: PageCursor = None,
    min_lsn: Annotated[
        str | None,
        Query(
            pattern=CONSISTENCY_PATTERN,
            description="a write's consistency token: the page sees that write (RFC 13.2)",
        ),
    ] = None,
    consistency: Consistency = None,
) -> Response:
    """Records newest first, filtered, trust-checked and redacted as retrieval is; keyset pages
    (RFC 10.7); with a consistency token it sees those writes (RFC 13.2)."""
    svc.admit(policy)
    page = svc.membrane.listing.records_json(
        _given(
            scopes=scope,
            types=type,
            statuses=status,
            sensitivities=sensitivity,
            max_sensitivity=max_sensitivity,
            tags=tag,
            entity=None if entity is None else str(entity),
            subject=subject,
            predicate=predicate,
            created_after=created_after,
            created_before=created_before,
            occurred_after=occurred_after,
            occurred_before=occurred_before,
            valid_after=valid_after,
            valid_before=valid_before,
            as_of=as_of,
            limit=limit,
            max_bytes=max_bytes,
            cursor=cursor,
            min_lsn=min_lsn or consistency,
        ),
        policy,
    )
    # the page's JSON as the core made it from each record's view (RFC 10.7): not validated
    # again against its response model, which still documents it
    return Response(page, media_type="application/json")


@router.get("/records/{record_id}/lineage", response_model=Lineage, responses=schemas.READ_ERRORS)
def get_lineage(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    as_of: AsOf = None,
) -> Lineage:
    """A record's correction chain: supersedes, merged into, forked from, contests (RFC 10.7)."""
    svc.admit(policy)
    return svc.membrane.listing.lineage(record_id, policy, as_of=as_of)


@router.get("/operations", response_model=OperationPage, responses=schemas.errors(400, 401, 403, 422, 429))
def list_operations(
    svc: Svc,
    policy: Trust,
    kind: Annotated[list[OperationKind] | None, Query(max_length=16)] = None,
    status: Annotated[list[OperationStatus] | None, Query(max_length=4)] = None,
    scope: Annotated[Scope | None, Query()] = None,
    created_after: Times = None,
    created_before: Times = None,
    limit: PageSize = None,
    cursor: PageCursor = None,
) -> OperationPage:
    """Operations newest first: the caller's own, every one for an operator (RFC 10.7)."""
    svc.admit(policy)
    return svc.membrane.listing.operations(
        _given(
            kinds=kind,
            statuses=status,
            scope=scope,
            created_after=created_after,
            created_before=created_before,
            limit=limit,
            cursor=cursor,
        ),
        policy,
    )


@router.get("/work", response_model=WorkOverview, responses=schemas.errors(400, 401, 403, 422, 429))
def get_work(
    svc: Svc,
    policy: Trust,
    kind: Annotated[
        list[WorkKind] | None, Query(max_length=16, description="buried items of these jobs")
    ] = None,
    limit: PageSize = None,
    cursor: PageCursor = None,
) -> WorkOverview:
    """Every job's due, claimed, retrying and buried items, the inbox and a page of buried items
    with their last error (operator; RFC 10.7)."""
    svc.admit(policy)
    return svc.membrane.listing.work(_given(kinds=kind, limit=limit, cursor=cursor), policy)


@router.post(
    "/work:requeue", response_model=RequeueResult, responses=schemas.errors(400, 401, 403, 413, 422, 429)
)
def requeue_work(svc: Svc, policy: Trust, body: RequeueRequest, response: Response) -> RequeueResult:
    """Put buried items back, due now; idempotent, each audited on its record (operator; RFC
    10.7); the answer carries a consistency token (RFC 13.2)."""
    svc.admit(policy)
    result = svc.membrane.listing.requeue(body, policy)
    response.headers.update(writes.consistency(svc))
    return result


@router.get("/scopes", response_model=ScopeList, responses=schemas.errors(401, 429))
def list_scopes(svc: Svc, policy: Trust) -> ScopeList:
    """The scopes the caller may read, with the records it sees in each (RFC 10.7)."""
    svc.admit(policy)
    return svc.membrane.listing.scopes(policy)
