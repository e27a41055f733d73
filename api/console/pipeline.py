"""The pipeline page: the inbox, failed operations, each job's backlog, the embedding lag and the
buried work items, with requeue for an operator (RFC 9, 10.7, 10.8, 14.2)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Query
from starlette.requests import Request
from starlette.responses import Response

from api.console import render, session
from api.console.forms import Posted, given
from membrane_core import errors
from membrane_core.enums import OperationStatus

router = APIRouter(prefix=render.PREFIX, route_class=render.ConsoleRoute, include_in_schema=False)

Viewer = Annotated[session.Viewer, Depends(session.viewer)]
#: Operations the page lists at once.
OPERATIONS = 50
STATUSES = [s.value for s in OperationStatus]


@router.get("/pipeline")
def pipeline(
    request: Request,
    found: Viewer,
    status: Annotated[str, Query()] = "failed",
    cursor: str | None = None,
    requeued: str | None = None,
) -> Response:
    """RFC 10.8: the caller's operations (every one for an operator) and, for an operator, the
    work queue."""
    svc, policy = found.svc, found.policy
    svc.admit(policy)
    listing = svc.membrane.listing
    operations = listing.operations(
        given(statuses=[status] if status else None, limit=OPERATIONS, cursor=cursor), policy
    )
    # RFC 7.1: the deployment's own figures are an operator's; the page says so to the others
    work = listing.work({"limit": 100}, policy) if policy.operator else None
    root = str(request.scope.get("root_path", "")).rstrip("/")
    context = {
        "status": status,
        "statuses": STATUSES,
        "operations": operations,
        "work": work,
        "requeued": [int(i) for i in (requeued or "").split(",") if i.isdigit()],
        "flower_url": found.config.flower_url,
        "targets": [f"{root}/metrics", *found.config.prometheus_targets],
    }
    return render.page(request, found, "pipeline.html", context)


@router.post("/pipeline/requeue")
def requeue(request: Request, found: Viewer, posted: Posted) -> Response:
    """RFC 10.7: put the chosen buried items back, due now (operator)."""
    session.check_csrf(request, found, posted.get("csrf"))
    svc, policy = found.svc, found.policy
    svc.admit(policy)
    ids = posted.all("id")
    if not ids or not all(i.isdigit() for i in ids):
        raise errors.InvalidInput(
            "choose the buried items to requeue",
            details=[{"field": "id", "message": "at least one item", "type": "missing"}],
        )
    body: dict[str, object] = {"ids": [int(i) for i in ids]}
    if posted.get("rationale"):
        body["rationale"] = posted.get("rationale")
    result = svc.membrane.listing.requeue(body, policy)
    done = ",".join(str(i) for i in result.requeued)
    return render.redirect(f"{render.PREFIX}/pipeline?requeued={done}")
