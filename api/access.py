"""Request ids and the access log: one line per HTTP request (RFC 14.3).

:class:`RequestContext` is the outermost middleware: it takes the caller's ``X-Request-ID``
when it is a sane token (else makes one), binds it to the log context for everything the
request runs (so every line of the API, and the tasks it publishes, carry it), returns it
in the answer's ``X-Request-ID`` and writes the access line once the answer is sent.
"""

from __future__ import annotations

import contextvars
import logging
import time
from collections.abc import Sequence
from typing import Any
from uuid import UUID

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from membrane_core import logs

log = logging.getLogger(__name__)

#: RFC 14.3: the header a request id travels in, both ways.
HEADER = "X-Request-ID"
_HEADER = HEADER.lower().encode()

#: Probes and scrapes: a successful one is logged at DEBUG, as they come every few seconds.
QUIET_PATHS = frozenset({"/healthz", "/readyz", "/metrics"})

#: Operation ids named on a write's access line; a longer list is cut, ``operations`` counts it.
MAX_LOGGED_IDS = 10

# The fields the request adds to its own access line. The handler's thread runs in a copy
# of the request's context, which holds this same dict, so what it notes reaches the line.
_notes: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar("membrane_access_notes")


def incoming(scope: Scope) -> str | None:
    """The request's own ``X-Request-ID``, when it is a sane token (RFC 14.3)."""
    for name, value in scope.get("headers", ()):
        if name == _HEADER:
            text = value.decode("latin-1")
            return text if logs.is_request_id(text) else None
    return None


def note(**fields: Any) -> None:
    """Add ``fields`` to the access line of the current request (nothing outside one)."""
    notes = _notes.get(None)
    if notes is not None:
        notes.update(fields)


def identify(actor: str) -> None:
    """RFC 14.3: name the authenticated caller (its key's actor, never the key) in the access
    line and in the request's later log lines."""
    note(actor=actor)
    logs.bind(actor=actor)  # the handler runs in this context; the middleware's token resets it


def operations(ids: Sequence[UUID]) -> None:
    """RFC 14.3: name a write's operations on its access line (the first ten, and the count)."""
    note(operation_ids=[str(i) for i in ids[:MAX_LOGGED_IDS]], operations=len(ids))


class RequestContext:
    """Pure ASGI middleware: the request id, its log context and the access line (RFC 14.3)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = incoming(scope) or logs.new_request_id()
        notes: dict[str, Any] = {}
        status = 500  # what the client sees if nothing answers
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers = [(k, v) for k, v in message.get("headers", ()) if k.lower() != _HEADER]
                message = {**message, "headers": [*headers, (_HEADER, rid.encode())]}
            await send(message)

        token, notes_token = logs.bind(request_id=rid), _notes.set(notes)
        try:
            await self.app(scope, receive, send_with_id)
        finally:
            path = str(scope.get("path", ""))
            quiet = path in QUIET_PATHS and status < 400
            log.log(
                logging.DEBUG if quiet else logging.INFO,
                "%s %s %d",
                scope.get("method", ""),
                path,
                status,
                extra={
                    "method": scope.get("method", ""),
                    "path": path,
                    "status": status,
                    "duration_ms": round((time.perf_counter() - start) * 1000, 2),
                    **notes,
                },
            )
            _notes.reset(notes_token)
            logs.unbind(token)
