"""The console's pages for signing in and reading memories (RFC 10.8).

Each handler is one more client of the core: it calls the same services as the JSON routes
(``retrieve``, ``get``, ``audit``, ``Membrane.listing``) with the policy the key ring gives
the session's key, spends from the same rate limits, and renders the answer.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends, Query
from starlette.requests import Request
from starlette.responses import Response

from api.console import charts, forms, render, session
from api.console.forms import Posted, listed, moment
from membrane_core import errors
from membrane_core.enums import MemoryType, RevisionStatus, Sensitivity
from membrane_core.results import RecordView

router = APIRouter(prefix=render.PREFIX, route_class=render.ConsoleRoute, include_in_schema=False)

Visitor = Annotated[session.Viewer, Depends(session.visitor)]
Viewer = Annotated[session.Viewer, Depends(session.viewer)]
Many = Annotated[list[str] | None, Query()]

#: The filters' choices, in the order the forms list them.
CHOICES = {
    "types": [t.value for t in MemoryType],
    "statuses": [s.value for s in RevisionStatus],
    "sensitivities": [s.value for s in Sensitivity],
}
#: Rows a page of records or search results shows.
PAGE = 50


@router.get("")
def home(found: Visitor) -> Response:
    """The console starts at the memories."""
    found.svc.admit(found.policy)
    return render.redirect(f"{render.PREFIX}/records")


@router.get("/signin")
def signin_page(request: Request, found: Visitor, next: str | None = None) -> Response:
    """RFC 10.8: the sign-in form; the key travels only in the POST body."""
    found.svc.admit(found.policy)
    if found.signed_in:
        return render.redirect(_next(next), found, request)
    return render.page(request, found, "signin.html", {"next": _next(next), "error": None})


@router.post("/signin")
def signin(request: Request, found: Visitor, posted: Posted) -> Response:
    """RFC 10.8: exchange an API key for a session cookie holding its digest."""
    session.check_csrf(request, found, posted.get("csrf"))
    target = _next(posted.get("next"))
    if not found.keys_enabled:
        return render.redirect(target)
    try:
        digest = found.svc.keys.authenticate_key(posted.get("key"))
    except errors.Unauthorized as exc:
        context = {"next": target, "error": exc.message}
        return render.page(request, found, "signin.html", context, status=401)
    now = session.signed_in(found, digest)
    now.svc.admit(now.policy)
    return render.redirect(target, now, request)


@router.post("/signout")
def signout(request: Request, found: Visitor, posted: Posted) -> Response:
    """RFC 10.8: end the session in this browser."""
    session.check_csrf(request, found, posted.get("csrf"))
    found.svc.admit(found.policy)
    response = render.redirect(f"{render.PREFIX}/signin" if found.keys_enabled else render.PREFIX)
    session.clear_cookie(response, request)
    return response


def _next(value: str | None) -> str:
    # only a console path: the sign-in form never sends the browser to another site
    if value and value.startswith(render.PREFIX + "/") and not value.startswith("//") and "\\" not in value:
        return value
    return f"{render.PREFIX}/records"


@router.get("/records")
def records(
    request: Request,
    found: Viewer,
    q: str | None = None,
    scope: Many = None,
    type: Many = None,  # the filter's name, as in GET /v1/records
    status: Many = None,
    sensitivity: Many = None,
    tag: Many = None,
    created_after: str | None = None,
    created_before: str | None = None,
    as_of: str | None = None,
    cursor: str | None = None,
) -> Response:
    """RFC 10.8: search (through retrieve) or browse (through the list) with the filters."""
    svc, policy = found.svc, found.policy
    svc.admit(policy)
    params: dict[str, Any] = {
        "q": (q or "").strip(),
        "scope": listed(scope) or [],
        "type": listed(type) or [],
        "status": listed(status) or [],
        "sensitivity": listed(sensitivity) or [],
        "tag": listed(tag) or [],
        "created_after": created_after or "",
        "created_before": created_before or "",
        "as_of": as_of or "",
    }
    after, before = moment(created_after, "created_after"), moment(created_before, "created_before")
    then = moment(as_of, "as_of")
    next_cursor: str | None = None
    if params["q"]:
        found_records = _search(found, params, after, before, then)
    else:
        page = svc.membrane.listing.records(
            forms.given(
                scopes=params["scope"],
                types=params["type"],
                statuses=params["status"],
                sensitivities=params["sensitivity"],
                tags=params["tag"],
                created_after=after,
                created_before=before,
                as_of=then,
                limit=PAGE,
                cursor=cursor,
            ),
            policy,
        )
        found_records, next_cursor = page.records, page.next_cursor
    scopes = svc.membrane.listing.scopes(policy)
    context = {
        "params": params,
        "records": [(r, charts.headline(r)) for r in found_records],
        "next_cursor": next_cursor,
        "scopes": [s.scope for s in scopes.scopes],
        "choices": CHOICES,
        "mode": "search" if params["q"] else "browse",
    }
    return render.page(request, found, "records.html", context)


def _search(
    found: session.Viewer,
    params: dict[str, Any],
    after: datetime | None,
    before: datetime | None,
    then: datetime | None,
) -> list[RecordView]:
    """RFC 8 through the console: retrieve's own filters, then the list's others on its rows
    (status, sensitivity and creation time, which retrieve does not take)."""
    statuses = set(params["status"]) or {"active", "contested"}
    request: dict[str, Any] = forms.given(
        query=params["q"],
        scopes=params["scope"],
        memory_types=params["type"],
        tags=params["tag"],
        as_of=then,
        limit=PAGE,
    )
    request["include_retracted"] = "retracted" in statuses
    request["include_contested"] = "contested" in statuses
    request["include_proposed"] = "proposed" in statuses  # RFC 5.7: only when asked for
    result = found.svc.membrane.retrieve(request, found.policy)
    levels = set(params["sensitivity"])
    return [
        r
        for r in result.records
        if r.status.value in statuses
        and (not levels or r.sensitivity.value in levels)
        and (after is None or r.created_at >= after)
        and (before is None or r.created_at < before)
    ]


@router.get("/records/{record_id}")
def record(request: Request, found: Viewer, record_id: UUID, as_of: str | None = None) -> Response:
    """RFC 10.8: one record: payload, provenance, relations, correction chain, audit and decay;
    with ``as_of``, what was believed then (RFC 5.6)."""
    svc, policy = found.svc, found.policy
    svc.admit(policy)
    m = svc.membrane
    view = m.get(record_id, policy)
    then = moment(as_of, "as_of")
    then_view: RecordView | None = None
    if then is not None:
        try:
            then_view = m.get(record_id, policy, as_of=then)
        except errors.NotFound:
            then_view = None  # not yet recorded then (RFC 5.6)
    lineage = m.listing.lineage(record_id, policy, as_of=then)
    believed = [n for n in lineage.nodes if n.status is not RevisionStatus.RETRACTED] if then else []
    audit = m.audit(record_id, policy)
    now = datetime.now(UTC)
    writable = policy.can_write_scope(view.scope) and not view.redacted
    proposed = view.status is RevisionStatus.PROPOSED
    context = {
        "record": view,
        "title": charts.headline(view),
        "as_of": then,
        "then": then_view,
        "then_title": charts.headline(then_view) if then_view else None,
        "believed": [(n, charts.headline(n)) for n in believed],
        "steps": charts.timeline(lineage),
        "truncated": lineage.truncated,
        "audit": audit,
        "curve": charts.decay_curve(view, audit, m.policy, now),
        "actions": _actions(view) if writable and not proposed else [],
        "read_only_reason": _why_read_only(found, view) if proposed or not writable else None,
    }
    return render.page(request, found, "record.html", context)


def _actions(view: RecordView) -> list[str]:
    """RFC 5.2: the corrections the record accepts: a retracted record none of these, an
    episode only reinforcement."""
    if view.status is RevisionStatus.RETRACTED:
        return []
    if view.type is MemoryType.EPISODIC:
        return ["reinforce"]
    return ["supersede", "retract", "contest", "reinforce"]


def _why_read_only(found: session.Viewer, view: RecordView) -> str:
    if view.status is RevisionStatus.PROPOSED:
        # RFC 5.7: a proposed record is settled by a reviewer's decision, not by a correction
        return "This record is proposed: a reviewer approves, amends or rejects it on the review page."
    if view.redacted:
        return "This record is shown redacted to your key, so it cannot be corrected from here."
    return f"Your key cannot write scope {view.scope!r}: corrections are not offered."
