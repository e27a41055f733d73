"""Revision writes, each an operation on the revision queue (RFC 5.2, 10.1)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse

from api import writes
from api.deps import Services, Svc, Trust
from api.routes.captures import ACCEPTED, IdemKey, Wait
from membrane_core.enums import OperationKind
from membrane_core.trust import TrustPolicy

router = APIRouter(prefix="/v1", tags=["revisions"])

RevisionBody = Annotated[dict[str, Any], Body(default_factory=dict,
                                              examples=[{"rationale": "the user corrected it"}])]


def _submit(svc: Services, kind: OperationKind, target: UUID | None, body: dict[str, Any],
            policy: TrustPolicy, key: str | None, wait: float | None) -> JSONResponse:
    view = svc.membrane.operations.submit_revision(kind, target, body, policy, idempotency_key=key)
    return writes.answer_one(svc, kind, view, wait, policy)


@router.post("/records/{record_id}/supersede", status_code=202, responses=ACCEPTED)
def supersede(svc: Svc, policy: Trust, record_id: UUID, body: RevisionBody,
              wait: Wait = None, idempotency_key: IdemKey = None) -> JSONResponse:
    """Replace a fact with a new version (RFC 5.2.1)."""
    return _submit(svc, OperationKind.SUPERSEDE, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/fork", status_code=202, responses=ACCEPTED)
def fork(svc: Svc, policy: Trust, record_id: UUID, body: RevisionBody,
         wait: Wait = None, idempotency_key: IdemKey = None) -> JSONResponse:
    """Fork a conditional variant (RFC 5.2.2)."""
    return _submit(svc, OperationKind.FORK, record_id, body, policy, idempotency_key, wait)


@router.post("/records:merge", status_code=202, responses=ACCEPTED)
def merge(svc: Svc, policy: Trust, body: RevisionBody,
          wait: Wait = None, idempotency_key: IdemKey = None) -> JSONResponse:
    """Merge records into one (RFC 5.2.3)."""
    return _submit(svc, OperationKind.MERGE, None, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/retract", status_code=202, responses=ACCEPTED)
def retract(svc: Svc, policy: Trust, record_id: UUID, body: RevisionBody,
            wait: Wait = None, idempotency_key: IdemKey = None) -> JSONResponse:
    """Retract a record (RFC 5.2.4)."""
    return _submit(svc, OperationKind.RETRACT, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/contest", status_code=202, responses=ACCEPTED)
def contest(svc: Svc, policy: Trust, record_id: UUID, body: RevisionBody,
            wait: Wait = None, idempotency_key: IdemKey = None) -> JSONResponse:
    """Mark a record contested (RFC 5.2.5)."""
    return _submit(svc, OperationKind.CONTEST, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/reinforce", status_code=202, responses=ACCEPTED)
def reinforce(svc: Svc, policy: Trust, record_id: UUID, body: RevisionBody,
              wait: Wait = None, idempotency_key: IdemKey = None) -> JSONResponse:
    """Reinforce a record's salience (RFC 5.2.6)."""
    return _submit(svc, OperationKind.REINFORCE, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/penalize", status_code=202, responses=ACCEPTED)
def penalize(svc: Svc, policy: Trust, record_id: UUID, body: RevisionBody,
             wait: Wait = None, idempotency_key: IdemKey = None) -> JSONResponse:
    """Penalize a record's salience (RFC 5.2.7)."""
    return _submit(svc, OperationKind.PENALIZE, record_id, body, policy, idempotency_key, wait)
