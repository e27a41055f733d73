"""Capture writes: single and batch (RFC 10.1, 3.3, 3.6)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query
from fastapi.responses import JSONResponse, Response
from pydantic import BaseModel, ConfigDict, Field

from api import schemas, writes
from api.deps import Svc, Trust
from membrane_core import logs
from membrane_core.enums import OperationKind
from membrane_core.inbox.submit import OperationView
from membrane_core.requests import CaptureRequest

router = APIRouter(prefix="/v1", tags=["captures"])

#: Most captures one batch request may carry (RFC 3.6).
MAX_BATCH = 1000

Wait = Annotated[
    float | None, Query(gt=0, le=writes.MAX_WAIT_SECONDS, description="wait up to S seconds for the result")
]
IdemKey = Annotated[str | None, Header(alias="Idempotency-Key", max_length=256)]
#: The 202 of a write (its ``response_description``) and the 200 after ``?wait``.
QUEUED = "accepted; the operation is queued (Location: /v1/operations/{id})"
ACCEPTED: dict[int | str, dict[str, Any]] = {
    200: {"model": OperationView, "description": "finished within ?wait"},
    **schemas.WRITE_ERRORS,
}


class CaptureBatch(BaseModel):
    """``{"captures": [...]}``; each item is validated on its own (RFC 3.6)."""

    model_config = ConfigDict(extra="forbid")
    captures: list[dict[str, Any]] = Field(min_length=1, max_length=MAX_BATCH)


@router.post(
    "/captures",
    status_code=202,
    response_model=OperationView,
    response_description=QUEUED,
    responses=ACCEPTED,
)
def capture(
    svc: Svc, policy: Trust, body: CaptureRequest, wait: Wait = None, idempotency_key: IdemKey = None
) -> JSONResponse:
    """Accept one capture into the inbox (RFC 3.3, 9.1)."""
    svc.admit(policy, captures=1)
    view = svc.membrane.inbox.submit_capture(
        body, policy, idempotency_key=idempotency_key, request_id=logs.request_id()
    )
    return writes.answer_one(svc, OperationKind.CAPTURE, view, wait, policy)


@router.post(
    "/captures:batch",
    status_code=202,
    response_model=schemas.OperationBatch,
    response_description="accepted; the operations in the order of the captures",
    responses={
        200: {"model": schemas.OperationBatch, "description": "all finished within ?wait"},
        **schemas.WRITE_ERRORS,
    },
)
def capture_batch(
    svc: Svc, policy: Trust, body: CaptureBatch, wait: Wait = None, idempotency_key: IdemKey = None
) -> Response:
    """Accept up to 1,000 captures with one multi-row insert; bad items fail alone (RFC 3.6)."""
    svc.admit(policy, captures=len(body.captures))  # RFC 10.6: a batch spends its captures
    views = svc.membrane.inbox.submit_captures(
        body.captures, policy, idempotency_key=idempotency_key, request_id=logs.request_id()
    )
    return writes.answer_many(svc, OperationKind.CAPTURE, views, wait, policy)
