"""Every failure as ``{"error": {"code", "message", "details"}}`` (RFC 10.2)."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException

from api.metrics import ASGIApp, Message, Receive, Scope, Send
from membrane_core import errors

log = logging.getLogger(__name__)

_HTTP_CODES = {
    400: "bad_request",
    401: "unauthorized",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    409: "conflict",
    413: "payload_too_large",
    415: "unsupported_media_type",
    422: "invalid_input",
    429: "too_many_requests",
    503: "unavailable",
}


def error_response(
    status: int,
    code: str,
    message: str,
    details: list[dict[str, Any]] | None = None,
    headers: Mapping[str, str] | None = None,
) -> JSONResponse:
    """The one error body of the API (RFC 10.2)."""
    body = {"error": {"code": code, "message": message, "details": details or []}}
    return JSONResponse(body, status_code=status, headers=headers)


def field_name(loc: tuple[Any, ...] | list[Any]) -> str:
    """``("body", "content", "subject")`` → ``content.subject``; other origins keep their prefix."""
    parts = [str(p) for p in loc]
    if parts and parts[0] == "body" and len(parts) > 1:  # a whole-body error keeps "body"
        parts = parts[1:]
    return ".".join(parts)


#: The status of each core error class (RFC 10.2). A class not listed answers at the status
#: of its nearest listed ancestor (:func:`status_of`); ``MembraneError`` itself is a 500.
STATUS_BY_ERROR: dict[type[errors.MembraneError], int] = {
    errors.MembraneError: 500,
    errors.InvalidInput: 422,
    errors.PayloadTooLarge: 413,
    errors.NotFound: 404,
    errors.Unauthorized: 401,
    errors.Forbidden: 403,
    errors.Conflict: 409,
    errors.RecordTooLarge: 413,
    errors.RateLimited: 429,
    errors.Unavailable: 503,
    errors.EncryptionKeyUnavailable: 503,
}


def status_of(exc: errors.MembraneError) -> int:
    """The HTTP status of ``exc``: the entry of its class or nearest ancestor in the table."""
    for cls in type(exc).__mro__:
        status = STATUS_BY_ERROR.get(cls)
        if status is not None:
            return status
    return 500


#: ``Retry-After`` of a 429 or 503 that names no window of its own, in whole seconds (RFC 10.5).
RETRY_AFTER_SECONDS = 1


async def on_membrane_error(request: Request, exc: Exception) -> JSONResponse:
    """A core error at its own status (RFC 10.2)."""
    assert isinstance(exc, errors.MembraneError)
    status = status_of(exc)
    if status >= 500 and status != 503:
        log.error("internal error", exc_info=exc)
    elif isinstance(exc, errors.EncryptionKeyUnavailable):  # RFC 7.6: the operator's to fix
        log.error("encryption key unavailable: %s", exc.message)
    headers = {"WWW-Authenticate": "Bearer"} if status == 401 else None
    if status in (429, 503):
        # RFC 10.5, 10.6: when to try again; an outage refusal knows how long its window
        # runs, a rate-limit refusal when its bucket admits the request
        headers = {"Retry-After": str(getattr(exc, "retry_after", RETRY_AFTER_SECONDS))}
    return error_response(status, exc.code, exc.message, exc.details, headers)


async def on_validation_error(request: Request, exc: Exception) -> JSONResponse:
    """Request validation → 422 naming every bad field (RFC 2.4, 10.2)."""
    assert isinstance(exc, RequestValidationError)
    details = [
        {
            "field": field_name(e.get("loc", ())),
            "message": str(e.get("msg", "")),
            "type": str(e.get("type", "")),
        }
        for e in exc.errors()
    ]
    summary = "; ".join(f"{d['field'] or 'body'}: {d['message']}" for d in details[:5])
    return error_response(422, "invalid_input", f"invalid request: {summary}", details)


async def on_http_error(request: Request, exc: Exception) -> JSONResponse:
    """Routing and protocol errors (404, 405, 413 ...) in the same shape."""
    assert isinstance(exc, HTTPException)
    code = _HTTP_CODES.get(exc.status_code, "http_error")
    return error_response(exc.status_code, code, str(exc.detail), headers=exc.headers)


class CatchAll:
    """Pure ASGI middleware: an exception no handler took becomes a 500 in the error shape.

    RFC 10.2: Starlette's own last-resort handler answers and then re-raises, and the server
    closes the connection under the client's feet; here the exception ends with the answer,
    so a keep-alive connection serves the client's next request. An exception after the
    answer has started cannot be answered and is re-raised.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = False

        async def tracking_send(message: Message) -> None:
            nonlocal started
            started = started or message["type"] == "http.response.start"
            await send(message)

        try:
            await self.app(scope, receive, tracking_send)
        except Exception:
            if started:
                raise
            log.exception("unhandled error on %s %s", scope.get("method"), scope.get("path"))
            response = error_response(500, "internal", "internal error (a bug): see the server log")
            await response(scope, receive, send)


def install(app: FastAPI) -> None:
    """Register every handler on ``app`` (the catch-all is a middleware, :class:`CatchAll`)."""
    app.add_exception_handler(errors.MembraneError, on_membrane_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(HTTPException, on_http_error)
