"""Review: the queue of proposed memories and the decisions on them (RFC 5.7).

Each route turns its input into one call of ``Membrane.review``; decisions are applied at
once, each in its own transaction, not through the inbox: a person waits on the answer.
"""

from __future__ import annotations

from typing import Annotated, Literal

from fastapi import APIRouter, Query, Response

from api import schemas, writes
from api.deps import Svc, Trust
from api.params import PageCursor, PageSize, Scopes
from membrane_core.review.requests import DecideRequest
from membrane_core.review.results import DecideResult, ReviewPage

router = APIRouter(prefix="/v1", tags=["review"])


@router.get("/review", response_model=ReviewPage, responses=schemas.errors(400, 401, 403, 422, 429))
def review_queue(
    svc: Svc,
    policy: Trust,
    scope: Scopes = None,
    order: Annotated[
        Literal["age", "corroboration"], Query(description="oldest or most corroborated first")
    ] = "age",
    limit: PageSize = None,
    cursor: PageCursor = None,
) -> ReviewPage:
    """Pending proposals the caller may decide, with their records, evidence, corroboration
    and conflicting facts (reviewer keys; RFC 5.7)."""
    svc.admit(policy)
    given = {"scopes": scope, "order": order, "limit": limit, "cursor": cursor}
    return svc.membrane.review.queue({k: v for k, v in given.items() if v is not None}, policy)


@router.post(
    "/review:decide", response_model=DecideResult, responses=schemas.errors(400, 401, 403, 413, 422, 429)
)
def review_decide(svc: Svc, policy: Trust, body: DecideRequest, response: Response) -> DecideResult:
    """Approve, reject or amend up to 1,000 proposals; each decision succeeds or fails on its
    own, audited with the reviewer's key (RFC 5.7); the answer's consistency token covers them
    (RFC 13.2)."""
    svc.admit(policy)
    result = svc.membrane.review.decide(body, policy)
    response.headers.update(writes.consistency(svc))
    return result
