"""Request body byte budget enforced before anything parses the body (RFC 2.4, 10.2)."""

from __future__ import annotations

import json

from starlette.exceptions import HTTPException

from api.errors import status_of
from api.metrics import ASGIApp, Message, Receive, Scope, Send
from membrane_core import errors

#: Largest request body of any route but the batch endpoint.
MAX_BODY_BYTES = 1024 * 1024
#: Largest body of ``POST /v1/captures:batch`` (1,000 captures).
MAX_BATCH_BODY_BYTES = 32 * 1024 * 1024
#: RFC 15.2: largest body of ``POST /v1/import`` (a bundle's tar).
MAX_IMPORT_BODY_BYTES = 4 * 1024**3


class BodyLimitMiddleware:
    """Answer 413 when the declared or streamed body passes the route's byte budget."""

    def __init__(
        self, app: ASGIApp, *, max_bytes: int = MAX_BODY_BYTES, max_batch_bytes: int = MAX_BATCH_BODY_BYTES
    ) -> None:
        self.app = app
        self.max_bytes = max_bytes
        self.max_batch_bytes = max_batch_bytes

    def limit_for(self, path: str) -> int:
        """The byte budget of ``path``."""
        if path == "/v1/import":
            return MAX_IMPORT_BODY_BYTES
        return self.max_batch_bytes if path.endswith(":batch") else self.max_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        limit = self.limit_for(scope.get("path", ""))
        for name, value in scope.get("headers", []):
            if name == b"content-length":
                try:
                    declared = int(value)
                except ValueError:
                    declared = 0
                if declared > limit:
                    await _reject(send, declared, limit)
                    return
        seen = 0

        async def limited_receive() -> Message:
            # A chunked body without Content-Length: count while the app reads it. The
            # HTTPException passes through FastAPI's body reader to the error handlers.
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > limit:
                    raise HTTPException(413, detail=_too_large(seen, limit).message)
            return message

        await self.app(scope, limited_receive, send)


def _too_large(size: int, limit: int) -> errors.PayloadTooLarge:
    return errors.PayloadTooLarge(
        f"request body of {size} bytes or more is over the budget of {limit} bytes",
        details=[{"field": "body", "message": f"exceeds {limit} bytes", "type": "byte_budget"}],
    )


async def _reject(send: Send, size: int, limit: int) -> None:
    err = _too_large(size, limit)
    body = json.dumps({"error": err.to_dict()}).encode()
    await send(
        {
            "type": "http.response.start",
            "status": status_of(err),
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
