"""Revision writes, each an operation on the revision queue (RFC 5.2, 10.1)."""

from __future__ import annotations

from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Body
from fastapi.responses import JSONResponse
from pydantic import BaseModel

from api import schemas, writes
from api.deps import Services, Svc, Trust
from api.routes.captures import QUEUED, IdemKey, Wait
from membrane_core import logs
from membrane_core.enums import OperationKind
from membrane_core.inbox.submit import OperationView
from membrane_core.revision.rules import (
    ContestBody,
    ForkBody,
    MergeBody,
    PenalizeBody,
    ReinforceBody,
    RetractBody,
    SupersedeBody,
)
from membrane_core.trust import TrustPolicy

router = APIRouter(prefix="/v1", tags=["revisions"])

#: A revision's answers: 202 queued, 200 finished, or an error; a missing target is 404.
ACCEPTED: dict[int | str, dict[str, Any]] = {
    200: {"model": OperationView, "description": "finished within ?wait"},
    **schemas.errors(400, 401, 403, 404, 409, 413, 422, 429),
}
#: Reinforce and penalize may be sent without a body.
Reinforcement = Annotated[ReinforceBody, Body(default_factory=ReinforceBody)]
Penalty = Annotated[PenalizeBody, Body(default_factory=PenalizeBody)]
REVISION: dict[str, Any] = {
    "status_code": 202,
    "response_model": OperationView,
    "response_description": QUEUED,
    "responses": ACCEPTED,
}


def _submit(
    svc: Services,
    kind: OperationKind,
    target: UUID | None,
    body: BaseModel,
    policy: TrustPolicy,
    key: str | None,
    wait: float | None,
) -> JSONResponse:
    # the fields the caller sent, as sent: the idempotency hash binds the request (RFC 9.2)
    svc.admit(policy)
    sent = body.model_dump(mode="json", exclude_unset=True)
    view = svc.membrane.inbox.submit_revision(
        kind, target, sent, policy, idempotency_key=key, request_id=logs.request_id()
    )
    return writes.answer_one(svc, kind, view, wait, policy)


@router.post("/records/{record_id}/supersede", **REVISION)
def supersede(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    body: SupersedeBody,
    wait: Wait = None,
    idempotency_key: IdemKey = None,
) -> JSONResponse:
    """Replace a fact with a new version (RFC 5.2.1)."""
    return _submit(svc, OperationKind.SUPERSEDE, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/fork", **REVISION)
def fork(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    body: ForkBody,
    wait: Wait = None,
    idempotency_key: IdemKey = None,
) -> JSONResponse:
    """Fork a conditional variant (RFC 5.2.2)."""
    return _submit(svc, OperationKind.FORK, record_id, body, policy, idempotency_key, wait)


@router.post("/records:merge", **REVISION)
def merge(
    svc: Svc, policy: Trust, body: MergeBody, wait: Wait = None, idempotency_key: IdemKey = None
) -> JSONResponse:
    """Merge records into one (RFC 5.2.3)."""
    return _submit(svc, OperationKind.MERGE, None, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/retract", **REVISION)
def retract(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    body: RetractBody,
    wait: Wait = None,
    idempotency_key: IdemKey = None,
) -> JSONResponse:
    """Retract a record (RFC 5.2.4)."""
    return _submit(svc, OperationKind.RETRACT, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/contest", **REVISION)
def contest(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    body: ContestBody,
    wait: Wait = None,
    idempotency_key: IdemKey = None,
) -> JSONResponse:
    """Mark a record contested (RFC 5.2.5)."""
    return _submit(svc, OperationKind.CONTEST, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/reinforce", **REVISION)
def reinforce(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    body: Reinforcement,
    wait: Wait = None,
    idempotency_key: IdemKey = None,
) -> JSONResponse:
    """Reinforce a record's salience (RFC 5.2.6)."""
    return _submit(svc, OperationKind.REINFORCE, record_id, body, policy, idempotency_key, wait)


@router.post("/records/{record_id}/penalize", **REVISION)
def penalize(
    svc: Svc,
    policy: Trust,
    record_id: UUID,
    body: Penalty,
    wait: Wait = None,
    idempotency_key: IdemKey = None,
) -> JSONResponse:
    """Penalize a record's salience (RFC 5.2.7)."""
    return _submit(svc, OperationKind.PENALIZE, record_id, body, policy, idempotency_key, wait)
