"""Correcting a record from its page: supersede, retract, contest, reinforce (RFC 5.2, 10.8).

Two steps, both POSTs under the CSRF check: ``review`` validates the form into the operation's
body and asks for confirmation; ``confirm`` submits it exactly as ``POST
/v1/records/{id}/{kind}`` does (the inbox, the dispatcher, a bounded wait) and shows the
operation. The server checks the caller's write scope and level at submission (RFC 5.2); the
page offers the forms only to a key that may write the record's scope.
"""

from __future__ import annotations

import json
import secrets
from typing import Annotated, Any
from uuid import UUID

from fastapi import APIRouter, Depends
from starlette.requests import Request
from starlette.responses import Response

from api import writes
from api.console import charts, render, session
from api.console.forms import Form, Posted
from membrane_core import errors, logs
from membrane_core.enums import MemoryType, OperationKind, ProvenanceKind
from membrane_core.results import RecordView
from membrane_core.revision import rules

router = APIRouter(prefix=render.PREFIX, route_class=render.ConsoleRoute, include_in_schema=False)

Viewer = Annotated[session.Viewer, Depends(session.viewer)]

#: RFC 10.8: the corrections the console offers.
KINDS = {
    "supersede": OperationKind.SUPERSEDE,
    "retract": OperationKind.RETRACT,
    "contest": OperationKind.CONTEST,
    "reinforce": OperationKind.REINFORCE,
}
#: How long the confirmation waits for the revision worker before showing it queued (RFC 10.1).
WAIT_SECONDS = 10.0
EVIDENCE_KINDS = [k.value for k in ProvenanceKind]


def body_of(kind: str, target: RecordView, posted: Form) -> dict[str, Any]:
    """The revision's body from the form; ``invalid_input`` names each missing or bad field."""
    rationale = posted.get("rationale")
    if not rationale:
        # RFC 10.8: the console asks a rationale of every correction, reinforce's included
        raise errors.InvalidInput(
            "a rationale is required",
            details=[{"field": "rationale", "message": "required", "type": "missing"}],
        )
    body: dict[str, Any] = {"rationale": rationale}
    evidence_ref = posted.get("evidence_ref")
    if evidence_ref and kind == "supersede":
        body["evidence"] = [{"kind": posted.get("evidence_kind", "observation"), "ref": evidence_ref}]
    if kind == "supersede":
        body["record"] = _replacement(target, posted)
    if kind == "contest" and posted.get("contesting_record_id"):
        body["contesting_record_id"] = posted.get("contesting_record_id")
    rules.parse_body(KINDS[kind], body)  # the engine's own validation, before confirmation
    return body


def _replacement(target: RecordView, posted: Form) -> dict[str, Any]:
    if target.type is MemoryType.SEMANTIC:
        return {name: posted.get(name) for name in ("subject", "predicate", "object") if posted.get(name)}
    text = posted.get("payload")
    try:
        payload = json.loads(text) if text else None
    except json.JSONDecodeError as exc:
        raise errors.InvalidInput(
            f"payload: not JSON ({exc.msg} at line {exc.lineno})",
            details=[{"field": "payload", "message": "not JSON", "type": "json_invalid"}],
        ) from exc
    if not isinstance(payload, dict):
        raise errors.InvalidInput(
            "payload: the full payload of the record's kind, as a JSON object",
            details=[{"field": "payload", "message": "an object is required", "type": "missing"}],
        )
    return {"payload": payload}


@router.post("/records/{record_id}/{kind}")
def correct(request: Request, found: Viewer, record_id: UUID, kind: str, posted: Posted) -> Response:
    """RFC 10.8: review a correction, or submit the one the caller confirmed."""
    session.check_csrf(request, found, posted.get("csrf"))
    if kind not in KINDS:
        raise errors.NotFound(f"no correction named {kind!r}")
    svc, policy = found.svc, found.policy
    svc.admit(policy)
    target = svc.membrane.get(record_id, policy)
    if posted.get("step") != "confirm":
        body = body_of(kind, target, posted)
        context = {
            "record": target,
            "title": charts.headline(target),
            "kind": kind,
            "body": body,
            "fields": {
                name: posted.get(name)
                for name in (
                    "rationale",
                    "evidence_kind",
                    "evidence_ref",
                    "subject",
                    "predicate",
                    "object",
                    "payload",
                    "contesting_record_id",
                )
                if posted.get(name)
            },
            "token": secrets.token_urlsafe(16),
        }
        return render.page(request, found, "confirm.html", context)
    body = body_of(kind, target, posted)
    token = posted.get("token")
    view = svc.membrane.inbox.submit_revision(
        KINDS[kind],
        record_id,
        body,
        policy,
        # a second click of the same confirmation replays the first operation (RFC 9.2)
        idempotency_key=f"console:{token}" if token else None,
        request_id=logs.request_id(),
    )
    writes.publish(svc, KINDS[kind], [view])
    (final,), _ = writes.settle(svc, [view], WAIT_SECONDS, policy)
    context = {
        "record": target,
        "title": charts.headline(target),
        "kind": kind,
        "body": body,
        "operation": final,
    }
    return render.page(request, found, "operation.html", context)
