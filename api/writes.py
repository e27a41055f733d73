"""Publishing and answering accepted writes: 202 + Location, or 200 after ``?wait`` (RFC 9.5)."""

from __future__ import annotations

import collections
import logging
from collections.abc import Sequence
from typing import Annotated, Any

from fastapi import Header
from fastapi.responses import JSONResponse, Response
from pydantic import TypeAdapter, WithJsonSchema

from api import access
from api.deps import Services
from api.params import CONSISTENCY_PATTERN
from membrane_core import errors
from membrane_core.inbox.submit import OperationView
from membrane_core.trust import TrustPolicy

log = logging.getLogger(__name__)

#: Largest ``?wait=S`` a write accepts, in seconds (RFC 10.1).
MAX_WAIT_SECONDS = 30.0
_FINISHED = {"succeeded", "failed"}
_VIEWS = TypeAdapter(list[OperationView])


def as_json(view: Any) -> dict[str, Any]:
    """An operation view as its JSON object."""
    data: dict[str, Any] = view.model_dump(mode="json")
    return data


def _status(view: Any) -> str:
    return str(getattr(view.status, "value", view.status))


def publish(svc: Services, kind: Any, views: Sequence[Any]) -> None:
    """Send the queued operations' ids; a broker failure is logged, not raised (RFC 9.5).

    The rows are already committed: beat re-dispatches whatever stays queued.
    """
    queued = [v.operation_id for v in views if _status(v) == "queued"]
    kind_name = str(getattr(kind, "value", kind))
    access.operations([v.operation_id for v in views])  # RFC 14.3: named on the access line
    for status, n in collections.Counter(_status(v) for v in views).items():
        svc.registry.accepted(kind_name, status, n)  # one count per status, not per capture
    if not queued:
        return
    try:
        sent = svc.dispatcher.publish(kind, queued)
    except Exception:
        log.warning(
            "publish failed; beat will re-dispatch",
            exc_info=True,
            extra={"kind": kind_name, "operations": len(queued)},
        )
        return
    if sent is False:
        # RFC 10.5: while the broker is down every write lands here; the dispatcher logs the
        # failure once per window, a warning per write would flood the log
        log.debug(
            "broker unavailable; beat will re-dispatch", extra={"kind": kind_name, "operations": len(queued)}
        )


def settle(
    svc: Services,
    views: Sequence[Any],
    wait: float | None,
    trust: TrustPolicy,
) -> tuple[list[Any], bool]:
    """The operations (after waiting up to ``wait`` seconds) and whether all have finished.

    Finished operations (an idempotent replay, a batch of only invalid items) answer 200
    even without ``wait``.
    """
    current = list(views)
    pending = [v.operation_id for v in current if _status(v) not in _FINISHED]
    if pending and wait is not None:
        done = {v.operation_id: v for v in svc.membrane.inbox.wait(pending, wait, trust)}
        current = [done.get(v.operation_id, v) for v in current]
    return current, all(_status(v) in _FINISHED for v in current)


#: RFC 13.2: the header of a consistency token, on a write's answer and an operation's status,
#: and on a read that must see the writes before it.
CONSISTENCY_HEADER = "Membrane-Consistency"


#: RFC 13.2: a read's consistency token, as the header the SDKs send after their own writes.
Consistency = Annotated[
    str | None,
    Header(
        alias=CONSISTENCY_HEADER,
        description="a write's consistency token: the read sees that write",
        pattern=CONSISTENCY_PATTERN,
    ),
    # a header is sent or not, never null: the schema says only what may be sent
    WithJsonSchema({"type": "string", "pattern": CONSISTENCY_PATTERN}),
]


def consistency(svc: Services) -> dict[str, str]:
    """RFC 13.2: the consistency token header of an answer, read after what it answers was
    committed (or seen finished); none when the primary does not answer, which never fails
    a write already accepted."""
    try:
        return {CONSISTENCY_HEADER: svc.membrane.consistency()}
    except errors.Unavailable:
        return {}


def answer_one(
    svc: Services,
    kind: Any,
    view: Any,
    wait: float | None,
    trust: TrustPolicy,
) -> JSONResponse:
    """One write: 202 + Location, or 200 with the finished operation."""
    publish(svc, kind, [view])
    (final,), finished = settle(svc, [view], wait, trust)
    return JSONResponse(
        as_json(final),
        status_code=200 if finished else 202,
        headers={"Location": f"/v1/operations/{final.operation_id}", **consistency(svc)},
    )


def answer_many(
    svc: Services, kind: Any, views: Sequence[Any], wait: float | None, trust: TrustPolicy
) -> Response:
    """A batch: ``{"operations": [...]}`` in input order, 202 or 200 once all finished."""
    publish(svc, kind, views)
    final, finished = settle(svc, views, wait, trust)
    # Serialised by pydantic-core in one pass: a 1,000-item answer is on the hot path.
    body = b'{"operations":' + _VIEWS.dump_json(final) + b"}"
    return Response(
        body, status_code=200 if finished else 202, media_type="application/json", headers=consistency(svc)
    )
