"""Synchronous reads straight from Postgres: operations, records, audit, retrieve (RFC 8, 10.1)."""

from __future__ import annotations

from typing import Annotated
from uuid import UUID

from fastapi import APIRouter, Query
from fastapi.responses import JSONResponse

from api import schemas, writes
from api.deps import Svc, Trust
from api.params import Timestamp
from api.writes import Consistency
from membrane_core.inbox.submit import OperationView
from membrane_core.models import AuditHistory
from membrane_core.requests import RetrieveRequest
from membrane_core.results import RecordView, RetrieveResult

router = APIRouter(prefix="/v1", tags=["reads"])


@router.get("/operations/{operation_id}", response_model=OperationView, responses=schemas.READ_ERRORS)
def get_operation(svc: Svc, policy: Trust, operation_id: UUID) -> JSONResponse:
    """An operation's status and the records it wrote (RFC 9.1)."""
    svc.admit(policy)
    view = svc.membrane.inbox.get(operation_id, policy)
    return JSONResponse(writes.as_json(view), headers=writes.consistency(svc))


@router.get("/records/{record_id}", response_model=RecordView, responses=schemas.READ_ERRORS)
def get_record(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    as_of: Annotated[Timestamp | None, Query(description="as believed then")] = None,
    valid_at: Annotated[Timestamp | None, Query(description="only if valid then")] = None,
) -> RecordView:
    """One record, trust-checked, marked with its status (RFC 5.1); bitemporal (RFC 5.6)."""
    svc.admit(policy)
    return svc.membrane.get(record_id, policy, as_of=as_of, valid_at=valid_at)


@router.get("/records/{record_id}/audit", response_model=AuditHistory, responses=schemas.READ_ERRORS)
def get_audit(svc: Svc, policy: Trust, record_id: UUID) -> AuditHistory:
    """A record's hash-chained audit history, also after deletion (RFC 5.5)."""
    svc.admit(policy)
    return svc.membrane.audit(record_id, policy)


@router.post(
    "/retrieve", response_model=RetrieveResult, responses=schemas.errors(400, 401, 403, 413, 422, 429)
)
def retrieve(
    svc: Svc, policy: Trust, body: RetrieveRequest, consistency: Consistency = None
) -> RetrieveResult:
    """Bounded, trust-aware retrieval (RFC 8); with a consistency token (``min_lsn``, or the
    ``Membrane-Consistency`` header the SDKs send after their writes) it sees those writes
    (RFC 13.2)."""
    svc.admit(policy)
    if consistency and body.min_lsn is None:
        body = body.model_copy(update={"min_lsn": consistency})
    return svc.membrane.retrieve(body, policy)
