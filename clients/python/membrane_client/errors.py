"""One exception per error code of the API (RFC 10.2), chosen by code first, then status.

Every exception the client raises is a :class:`MembraneError`, so one ``except``
clause catches them all; the subclasses let a caller tell a refusal it can fix
(:class:`InvalidInput`) from one it should retry later (:class:`Unavailable`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

__all__ = [
    "BadRequest",
    "Conflict",
    "ConnectionFailed",
    "EncryptionKeyUnavailable",
    "Forbidden",
    "IdempotencyConflict",
    "InvalidInput",
    "MembraneError",
    "NotFound",
    "OperationTimeout",
    "PayloadTooLarge",
    "RateLimited",
    "RecordTooLarge",
    "RevisionRefused",
    "ServerError",
    "TombstonedFact",
    "Unauthorized",
    "Unavailable",
    "error_from",
]


class MembraneError(Exception):
    """The server refused or failed a request, or could not be reached.

    ``status`` is the HTTP status (``None`` when no answer came), ``code`` the error
    code of the answer's body, ``details`` its ``[{"field", "message", "type"}]`` list.
    """

    default_status: int | None = None
    default_code: str = "error"

    def __init__(
        self,
        message: str = "",
        *,
        status: int | None = None,
        code: str | None = None,
        details: list[dict[str, Any]] | None = None,
        retry_after: float | None = None,
    ) -> None:
        self.status = status if status is not None else self.default_status
        self.code = code or self.default_code
        self.message = message or (type(self).__doc__ or "").strip().splitlines()[0]
        self.details = details or []
        #: the server's ``Retry-After`` in seconds, when it sent one
        self.retry_after = retry_after
        super().__init__(self.message)

    def __str__(self) -> str:
        prefix = f"{self.status} {self.code}" if self.status is not None else self.code
        return f"{prefix}: {self.message}"

    def __repr__(self) -> str:
        return (
            f"{type(self).__name__}(status={self.status!r}, code={self.code!r}, "
            f"message={self.message!r}, details={self.details!r})"
        )


class BadRequest(MembraneError):
    """The request is malformed."""

    default_status, default_code = 400, "bad_request"


class InvalidInput(MembraneError):
    """The input is invalid; ``details`` names each bad field."""

    default_status, default_code = 422, "invalid_input"


class PayloadTooLarge(MembraneError):
    """The request body or a capture's JSON exceeds its byte or depth budget."""

    default_status, default_code = 413, "payload_too_large"


class RecordTooLarge(MembraneError):
    """A single record is larger than the retrieval byte budget."""

    default_status, default_code = 413, "record_too_large"


class Unauthorized(MembraneError):
    """A valid API key is required."""

    default_status, default_code = 401, "unauthorized"


class Forbidden(MembraneError):
    """The request asks for more than the key's trust policy grants."""

    default_status, default_code = 403, "forbidden"


class NotFound(MembraneError):
    """No such record or operation is visible to the caller."""

    default_status, default_code = 404, "not_found"


class Conflict(MembraneError):
    """The request conflicts with the current state."""

    default_status, default_code = 409, "conflict"


class IdempotencyConflict(Conflict):
    """The idempotency key was already used with a different request."""

    default_code = "idempotency_conflict"


class RevisionRefused(Conflict):
    """The revision is not allowed on this record."""

    default_code = "revision_refused"


class TombstonedFact(Conflict):
    """The fact was retracted in this scope; only an explicit revision re-asserts it."""

    default_code = "tombstoned_fact"


class RateLimited(MembraneError):
    """Too many requests; try again after ``retry_after`` seconds."""

    default_status, default_code = 429, "rate_limited"


class Unavailable(MembraneError):
    """A backing service (Postgres or the broker) is unavailable; try again later."""

    default_status, default_code = 503, "unavailable"


class EncryptionKeyUnavailable(Unavailable):
    """A sealed record's key is not in the server's key ring (RFC 7.6): the data is intact
    and the request is right, but only the operator can supply the key, so the clients do
    not retry it; ``message`` names the key id."""

    default_code = "encryption_key_unavailable"


class ServerError(MembraneError):
    """The server failed with a 5xx other than 503 (a server bug)."""

    default_status, default_code = 500, "internal"


class ConnectionFailed(MembraneError):
    """The server could not be reached or the connection broke, after every retry."""

    default_code = "connection_failed"


class OperationTimeout(MembraneError, TimeoutError):
    """An operation did not finish in time; ``operation`` is its last known state."""

    default_code = "operation_timeout"

    def __init__(self, message: str = "", *, operation: Any = None) -> None:
        super().__init__(message)
        self.operation = operation


_BY_CODE: dict[str, type[MembraneError]] = {
    "bad_request": BadRequest,
    "invalid_input": InvalidInput,
    "payload_too_large": PayloadTooLarge,
    "record_too_large": RecordTooLarge,
    "unauthorized": Unauthorized,
    "forbidden": Forbidden,
    "not_found": NotFound,
    "conflict": Conflict,
    "idempotency_conflict": IdempotencyConflict,
    "revision_refused": RevisionRefused,
    "tombstoned_fact": TombstonedFact,
    "rate_limited": RateLimited,
    "too_many_requests": RateLimited,
    "unavailable": Unavailable,
    "encryption_key_unavailable": EncryptionKeyUnavailable,
    "internal": ServerError,
}

_BY_STATUS: dict[int, type[MembraneError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    413: PayloadTooLarge,
    422: InvalidInput,
    429: RateLimited,
    503: Unavailable,
}


def error_class(status: int | None, code: str | None) -> type[MembraneError]:
    """The exception class for an answer: by its body's ``code``, else by its ``status``."""
    if code and code in _BY_CODE:
        return _BY_CODE[code]
    if status is not None:
        if status in _BY_STATUS:
            return _BY_STATUS[status]
        if status >= 500:
            return ServerError
    return MembraneError


def error_from(status: int | None, body: Any, *, retry_after: float | None = None) -> MembraneError:
    """The typed exception for an error answer of ``status`` whose JSON body is ``body``.

    ``body`` may be the whole answer (``{"error": {...}}``), the error object itself (a
    failed operation's ``error``), or anything else (a proxy's HTML page), in which case
    only the status decides.
    """
    info: Mapping[str, Any] = {}
    if isinstance(body, Mapping):
        inner = body.get("error", body)
        info = inner if isinstance(inner, Mapping) else {}
    code = info.get("code") if isinstance(info.get("code"), str) else None
    message = info.get("message") if isinstance(info.get("message"), str) else None
    raw_details = info.get("details")
    details = (
        [dict(d) for d in raw_details if isinstance(d, Mapping)] if isinstance(raw_details, list) else []
    )
    cls = error_class(status, code)
    fallback = f"HTTP {status}" if status is not None else ""
    return cls(message or fallback, status=status, code=code, details=details, retry_after=retry_after)
