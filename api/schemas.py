"""The API's own named answers, and the error answers each route documents (RFC 10.2, 10.4).

Records, retrievals, operations and audit histories are the core's models; what only the
HTTP surface says (the error body, a batch of operations, the metrics document, probes) is
here, so ``/openapi.json`` names every body a client can receive.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from membrane_core.inbox.submit import OperationView


class ErrorDetail(BaseModel):
    """One problem: the field by its path, what is wrong, and its kind (RFC 10.2)."""

    model_config = ConfigDict(extra="allow")  # a refusal may add context (actor, successor_id)

    field: str
    message: str
    type: str


class ErrorInfo(BaseModel):
    """What failed: a stable ``code``, a message for people, and the details (RFC 10.2)."""

    code: str
    message: str
    details: list[ErrorDetail] = Field(default_factory=list)


class ErrorBody(BaseModel):
    """Every failure's answer: ``{"error": {...}}`` (RFC 10.2)."""

    error: ErrorInfo


class OperationBatch(BaseModel):
    """The operations of a batch, in the order of its captures (RFC 3.6, 9.1)."""

    operations: list[OperationView]


class Backlog(BaseModel):
    """Work items of one kind (RFC 14.2)."""

    due: int
    pending: int
    dead: int
    oldest_due_seconds: float | None = None


class Metrics(BaseModel):
    """``GET /v1/metrics``: over what the caller may read; the deployment's figures for an
    operator only, ``null`` for anyone else (RFC 14.2)."""

    total_records: int
    records_by_type: dict[str, int]
    records_by_status: dict[str, int]
    avg_salience: float | None = None
    avg_confidence: float | None = None
    active_records: int
    pinned_records: int
    total_audit_entries: int
    revision_rate: float | None = None
    retrieval_usefulness: float | None = None
    competence_success_rate: float | None = None
    plan_reuse_frequency: float | None = None
    memory_growth_rate: float | None = None
    records_created_24h: int
    operations: dict[str, dict[str, int]] | None = None
    work_backlog: dict[str, Backlog] | None = None


class Health(BaseModel):
    """The process is up (RFC 14.2)."""

    status: str = "ok"


class Readiness(BaseModel):
    """Postgres and the broker answer (RFC 14.2)."""

    status: str = "ready"
    checks: dict[str, str]


class NotReady(ErrorBody):
    """What is unreachable, by probe (RFC 14.2)."""

    checks: dict[str, str]


_DESCRIPTIONS = {
    400: "the body could not be read as JSON",
    401: "no valid API key (WWW-Authenticate: Bearer)",
    403: "beyond the caller's policy",
    404: "no such record or operation visible to the caller",
    409: "conflicts with the current state (idempotency key, revision refused, tombstone)",
    413: "over a byte or nesting budget",
    422: "invalid input, each field named by its path",
    429: "over the API key's rate limit (Retry-After)",
    500: "a bug: the message names no detail, the log has it",
    503: "Postgres or the broker is unavailable (Retry-After)",
}


def errors(*codes: int) -> dict[int | str, dict[str, Any]]:
    """The error answers a route documents, each in the one error shape (RFC 10.2).

    Every route may also answer 500 (a bug) and 503 (an outage, RFC 10.5).
    """
    return {
        code: {"model": ErrorBody, "description": _DESCRIPTIONS[code]} for code in sorted({*codes, 500, 503})
    }


#: What every write route may answer besides its 202: auth, policy, budgets, input, conflicts,
#: rate limits.
WRITE_ERRORS = errors(400, 401, 403, 409, 413, 422, 429)
#: What every read route with input may answer.
READ_ERRORS = errors(401, 403, 404, 422, 429)
