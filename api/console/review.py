"""The review page: the queue of proposed memories and the decisions on them (RFC 5.7, 10.8).

Only a reviewer key sees the page. Each entry shows the proposal (scope, source, who proposed
and corroborated it, its age and expiry), its records, the fact's evidence, source episodes and
the active facts it conflicts with. A decision is two POSTs under the CSRF check, as a
correction is: ``review`` validates the form into the decision's body and asks for
confirmation; ``confirm`` applies it with ``Membrane.review.decide``, exactly as ``POST
/v1/review:decide`` does, and shows the outcome or the refusal. The server checks again that
the key may decide the proposal (its scopes, its level, never its own proposal).
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query
from starlette.requests import Request
from starlette.responses import Response

from api.console import charts, forms, render, session
from api.console.forms import Form, Posted
from membrane_core import errors
from membrane_core.requests import parse
from membrane_core.results import RecordView
from membrane_core.review.requests import DecideRequest
from membrane_core.trust import TrustPolicy

router = APIRouter(prefix=render.PREFIX, route_class=render.ConsoleRoute, include_in_schema=False)

Viewer = Annotated[session.Viewer, Depends(session.viewer)]
Many = Annotated[list[str] | None, Query()]

#: RFC 5.7: the decisions the page offers.
DECISIONS = ("approve", "reject", "amend")
#: Proposals a page of the queue shows.
PAGE = 25
#: Records of a proposal the confirmation page reads back, at most.
MAX_RECORDS = 50
ORDERS = ("age", "corroboration")


def require_reviewer(policy: TrustPolicy) -> None:
    """RFC 5.7: the queue and its decisions are a reviewer key's; the page says so to others."""
    if not policy.reviewer:
        raise errors.Forbidden(
            f"the review queue is for reviewer keys, and the key of {policy.actor!r} is not one: "
            'a key decides proposals with "reviewer": true in its entry (RFC 5.7)',
            details=[{"field": "reviewer", "message": "not a reviewer", "type": "forbidden"}],
        )


@router.get("/review")
def queue(
    request: Request,
    found: Viewer,
    scope: Many = None,
    order: str = "age",
    cursor: str | None = None,
) -> Response:
    """RFC 5.7, 10.8: the pending proposals the signed-in key may decide."""
    svc, policy = found.svc, found.policy
    svc.admit(policy)
    require_reviewer(policy)
    scopes = forms.listed(scope) or []
    chosen = order if order in ORDERS else "age"
    page = svc.membrane.review.queue(
        forms.given(scopes=scopes, order=chosen, limit=PAGE, cursor=cursor), policy
    )
    context = {
        "entries": [(e, charts.headline(e.fact) if e.fact else _title(e.records)) for e in page.entries],
        "next_cursor": page.next_cursor,
        "params": {"scope": scopes, "order": chosen},
        "orders": ORDERS,
        "scopes": [s.scope for s in svc.membrane.listing.scopes(policy).scopes],
        "headline": charts.headline,
        "now": datetime.now(UTC),
    }
    return render.page(request, found, "review.html", context)


def _title(records: list[RecordView]) -> str:
    return charts.headline(records[0]) if records else "a proposal without visible records"


def decision_of(proposal_id: UUID, decision: str, posted: Form) -> dict[str, Any]:
    """The decision's body from the form, validated as ``POST /v1/review:decide`` validates it;
    ``invalid_input`` names each missing or bad field."""
    body: dict[str, Any] = {"proposal_id": str(proposal_id), "decision": decision}
    if decision == "approve" and posted.get("mode"):
        body["mode"] = posted.get("mode")
    if posted.get("rationale"):
        body["rationale"] = posted.get("rationale")
    if decision == "amend":
        body["record"] = {
            name: posted.get(name) for name in ("subject", "predicate", "object") if posted.get(name)
        }
        if not body["record"]:
            raise errors.InvalidInput(
                "amend: give the fact's subject, predicate or object as it should read",
                details=[{"field": "object", "message": "required", "type": "missing"}],
            )
    parse(DecideRequest, {"decisions": [body]})  # the core's own validation, before confirmation
    return body


@router.post("/review/{proposal_id}/{decision}")
def decide(request: Request, found: Viewer, proposal_id: UUID, decision: str, posted: Posted) -> Response:
    """RFC 5.7, 10.8: review a decision, or apply the one the reviewer confirmed."""
    session.check_csrf(request, found, posted.get("csrf"))
    if decision not in DECISIONS:
        raise errors.NotFound(f"no decision named {decision!r}")
    svc, policy = found.svc, found.policy
    svc.admit(policy)
    require_reviewer(policy)
    body = decision_of(proposal_id, decision, posted)
    shown = _records(found, posted.all("record"))
    fields = {
        name: posted.get(name)
        for name in ("mode", "rationale", "subject", "predicate", "object")
        if posted.get(name)
    }
    context: dict[str, Any] = {
        "proposal_id": proposal_id,
        "decision": decision,
        "body": {"decisions": [body]},
        "records": [(r, charts.headline(r)) for r in shown],
        "record_ids": [str(r.id) for r in shown],
        "fields": fields,
    }
    if posted.get("step") != "confirm":
        return render.page(request, found, "review_confirm.html", context)
    (result,) = svc.membrane.review.decide({"decisions": [body]}, policy).results
    written = _records(found, [str(i) for i in result.record_ids])
    context.update(result=result, written=[(r, charts.headline(r)) for r in written])
    return render.page(request, found, "review_outcome.html", context)


def _records(found: session.Viewer, ids: list[str]) -> list[RecordView]:
    """The records the form names (the proposal's), read back under the caller's policy; one
    it may not see, or that is not a record id, is left out."""
    out: list[RecordView] = []
    for raw in dict.fromkeys(ids[:MAX_RECORDS]):
        try:
            out.append(found.svc.membrane.get(UUID(raw), found.policy))
        except (ValueError, errors.NotFound, errors.Forbidden):
            continue
    return out
