"""One error hierarchy for the core (RFC 10.2).

Adapters translate driver errors at the boundary; the API maps each class to a
status code and workers map ``transient`` to a retry.
"""

from __future__ import annotations

import math
from typing import Any


class MembraneError(Exception):
    """Membrane failed to carry out the request."""

    code = "internal"
    transient = False

    def __init__(self, message: str | None = None, *, details: list[dict[str, Any]] | None = None):
        self.message = message or (type(self).__doc__ or "").strip()
        self.details = details or []
        super().__init__(self.message)

    def to_dict(self) -> dict[str, Any]:
        """The API's error body (RFC 10.2)."""
        return {"code": self.code, "message": self.message, "details": self.details}


class InvalidInput(MembraneError):
    """The input is invalid."""

    code = "invalid_input"


class PayloadTooLarge(InvalidInput):
    """The input exceeds the byte or nesting-depth budget."""

    code = "payload_too_large"


class NotFound(MembraneError):
    """No such record or operation is visible to the caller."""

    code = "not_found"


class Unauthorized(MembraneError):
    """A valid API key is required."""

    code = "unauthorized"


class Forbidden(MembraneError):
    """The request asks for more than the caller's trust policy grants."""

    code = "forbidden"


class Conflict(MembraneError):
    """The request conflicts with the current state."""

    code = "conflict"


class IdempotencyConflict(Conflict):
    """The idempotency key was already used with a different request body."""

    code = "idempotency_conflict"


class RevisionRefused(Conflict):
    """The revision is not allowed on this record."""

    code = "revision_refused"


class TombstonedFact(Conflict):
    """The fact was retracted in this scope; only an explicit revision re-asserts it."""

    code = "tombstoned_fact"


class RecordTooLarge(MembraneError):
    """A single record is larger than the retrieval byte budget."""

    code = "record_too_large"


class Unavailable(MembraneError):
    """A backing service (Postgres or the broker) is unavailable."""

    code = "unavailable"
    transient = True


class EncryptionKeyUnavailable(MembraneError):
    """A sealed value names an encryption key the key ring does not hold, or holds wrongly."""

    code = "encryption_key_unavailable"
    #: RFC 7.6: seconds a client waits before asking again (the ring is the operator's to fix)
    retry_after = 60


class RateLimited(MembraneError):
    """The API key is over its rate limit; retry later."""

    code = "rate_limited"
    transient = True

    def __init__(
        self,
        message: str | None = None,
        *,
        retry_after: float = 1.0,
        details: list[dict[str, Any]] | None = None,
    ):
        super().__init__(message, details=details)
        #: Whole seconds until the request would be admitted (the ``Retry-After`` header), at least 1.
        self.retry_after = max(1, math.ceil(retry_after))


def field_errors(exc: Exception) -> list[dict[str, Any]]:
    """Turn a pydantic ``ValidationError`` into ``[{field, message, type}]`` details."""
    errors = getattr(exc, "errors", None)
    if errors is None:
        return [{"field": "", "message": str(exc), "type": "value_error"}]
    out: list[dict[str, Any]] = []
    for err in errors(include_url=False, include_input=False):
        loc = ".".join(str(p) for p in err.get("loc", ()))
        out.append({"field": loc, "message": err.get("msg", ""), "type": err.get("type", "")})
    return out
