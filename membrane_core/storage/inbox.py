"""The ``operations`` inbox table: insert, claim, finish, reap, re-dispatch (RFC 9.1, 9.5).

Every statement works on many rows at once (``unnest`` arrays); the capture path
claims and finishes its operations in the transaction that writes the records, so
the records and the operation status commit together or not at all (RFC 9.1).
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.types.json import Jsonb

from membrane_core import errors
from membrane_core.capture.plan import CapturePlan
from membrane_core.enums import OperationKind, OperationStatus
from membrane_core.storage import records, workqueue
from membrane_core.storage.queries import q
from membrane_core.storage.rowbatch import copy_cursor, copy_rows
from membrane_core.storage.rows import fetch_all, fetch_one

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class NewOperation:
    """One row to insert into the inbox."""

    id: uuid.UUID
    kind: str
    status: str
    principal: str
    idempotency_key: str | None
    request_hash: str
    request: str  # JSON text
    trust: str  # JSON text
    target_id: uuid.UUID | None
    record_id: uuid.UUID | None
    error: str | None  # JSON text
    created_at: datetime
    finished_at: datetime | None
    #: The request that submitted it (RFC 9.1, 14.3).
    request_id: str | None = None


@dataclass(frozen=True)
class OperationRow:
    """An operation as stored."""

    id: uuid.UUID
    kind: OperationKind
    status: OperationStatus
    principal: str
    record_id: uuid.UUID | None
    record_ids: list[uuid.UUID]
    error: dict[str, Any] | None
    result: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    request_id: str | None = None

    @classmethod
    def from_row(cls, *, kind: str, status: str, **rest: Any) -> OperationRow:
        """The row with its kind and status as enums."""
        return cls(kind=OperationKind(kind), status=OperationStatus(status), **rest)


@dataclass(frozen=True)
class LockedCapture:
    """A capture operation locked by the caller's transaction."""

    id: uuid.UUID
    request: str  # JSON text, validated by the caller
    trust: str
    record_id: uuid.UUID | None


@dataclass(frozen=True)
class ClaimedOperation:
    """A non-capture operation claimed under a lease."""

    id: uuid.UUID
    kind: OperationKind
    request: dict[str, Any]
    trust: str
    target_id: uuid.UUID | None
    attempts: int

    @classmethod
    def from_row(cls, *, kind: str, **rest: Any) -> ClaimedOperation:
        """The row with its kind as an enum."""
        return cls(kind=OperationKind(kind), **rest)


@dataclass(frozen=True)
class ExistingKey:
    """An idempotency key already used by a principal, with what it is bound to (RFC 9.2)."""

    idempotency_key: str
    id: uuid.UUID
    request_hash: str


def insert(conn: psycopg.Connection, rows: Sequence[NewOperation]) -> set[uuid.UUID]:
    """RFC 9.1: insert ``rows`` in one statement; returns the ids actually inserted.

    A row whose (principal, idempotency key) already exists is not inserted (RFC 9.2).
    """
    if not rows:
        return set()
    if all(r.idempotency_key is None for r in rows):
        # Nothing can conflict: COPY is several times faster than a multi-row INSERT.
        copy_rows(
            copy_cursor(conn),
            "op_copy",
            (
                (
                    r.id,
                    r.kind,
                    r.status,
                    r.principal,
                    r.request_hash,
                    r.request,
                    r.trust,
                    r.target_id,
                    r.record_id,
                    r.error,
                    r.created_at,
                    r.finished_at,
                    r.request_id,
                )
                for r in rows
            ),
        )
        return {r.id for r in rows}
    # Binary parameters (the statement's %b placeholders): text-format arrays escape every
    # element with a regex, which was most of a keyed batch's submit time.
    cur = conn.cursor(binary=True)
    cur.execute(
        q("op_insert"),
        {
            "ids": [r.id for r in rows],
            "kinds": [r.kind for r in rows],
            "statuses": [r.status for r in rows],
            "principals": [r.principal for r in rows],
            "keys": [r.idempotency_key for r in rows],
            "hashes": [r.request_hash for r in rows],
            "requests": [r.request for r in rows],
            "trusts": [r.trust for r in rows],
            "targets": [r.target_id for r in rows],
            "record_ids": [r.record_id for r in rows],
            "errors": [r.error for r in rows],
            "created": [r.created_at for r in rows],
            "finished": [r.finished_at for r in rows],
            "request_ids": [r.request_id for r in rows],
        },
    )
    return {row[0] for row in cur.fetchall()}


def by_idempotency_keys(
    conn: psycopg.Connection, principal: str, keys: Sequence[str]
) -> dict[str, ExistingKey]:
    """RFC 9.2: a principal's existing keys among ``keys``, by key."""
    found = fetch_all(
        conn, ExistingKey, q("op_by_idempotency_keys"), {"principal": principal, "keys": list(keys)}
    )
    return {k.idempotency_key: k for k in found}


def views(conn: psycopg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, OperationRow]:
    """Operations by id (RFC 9.1)."""
    return {r.id: r for r in fetch_all(conn, OperationRow, q("op_views"), {"ids": list(ids)})}


def count_unfinished(conn: psycopg.Connection, ids: Sequence[uuid.UUID]) -> int:
    """How many of ``ids`` are still queued or running (RFC 9.1)."""
    row = conn.execute(q("op_count_unfinished"), {"ids": list(ids)}).fetchone()
    return int(row[0]) if row else 0


def lock_captures(
    conn: psycopg.Connection, ids: Sequence[uuid.UUID], *, drain: int, now: datetime
) -> list[LockedCapture]:
    """RFC 9.1: lock ``ids`` (when still to do) plus up to ``drain`` more queued captures.

    Rows another transaction holds are skipped (``SKIP LOCKED``); the locks last until the
    caller's transaction ends, so a worker that dies releases them with its connection.
    """
    out: list[LockedCapture] = []
    if ids:
        out += fetch_all(conn, LockedCapture, q("op_lock_captures_by_id"), {"ids": list(ids), "now": now})
    if drain > 0:
        out += fetch_all(
            conn,
            LockedCapture,
            q("op_lock_captures_due"),
            {
                "exclude": [c.id for c in out],
                "limit": drain,
                "now": now,
            },
        )
    return out


def finish_many(
    conn: psycopg.Connection,
    outcomes: Sequence[tuple[uuid.UUID, str, Sequence[uuid.UUID], dict[str, Any] | None]],
    *,
    now: datetime,
    results: Sequence[dict[str, Any] | None] | None = None,
) -> int:
    """Record ``(id, status, record_ids, error)`` for many operations in one statement, with
    each one's result when ``results`` gives it (in the same order)."""
    if not outcomes:
        return 0
    cur = conn.cursor(binary=True)
    return cur.execute(
        q("op_finish_many"),
        {
            "ids": [o[0] for o in outcomes],
            "statuses": [o[1] for o in outcomes],
            "rids": ["{" + ",".join(str(r) for r in o[2]) + "}" for o in outcomes],
            "errors": [json.dumps(o[3]) if o[3] is not None else None for o in outcomes],
            "results": [
                json.dumps(r) if r is not None else None for r in (results or [None] * len(outcomes))
            ],
            "now": now,
        },
    ).rowcount


def claim_one(
    conn: psycopg.Connection,
    operation_id: uuid.UUID,
    *,
    worker: str,
    now: datetime,
    lease_seconds: int,
) -> ClaimedOperation | None:
    """RFC 9.4: claim one queued (or lease-expired) non-capture operation."""
    return fetch_one(
        conn,
        ClaimedOperation,
        q("op_claim_one"),
        {
            "id": operation_id,
            "worker": worker,
            "now": now,
            "lease_seconds": lease_seconds,
        },
    )


def lock_one(conn: psycopg.Connection, operation_id: uuid.UUID, *, now: datetime) -> ClaimedOperation | None:
    """RFC 9.1: lock one operation that is still to do for the caller's transaction."""
    return fetch_one(conn, ClaimedOperation, q("op_lock_one"), {"id": operation_id, "now": now})


def finish_one(
    conn: psycopg.Connection,
    operation_id: uuid.UUID,
    *,
    worker: str,
    now: datetime,
    status: str,
    record_ids: Sequence[uuid.UUID] = (),
    result: dict[str, Any] | None = None,
    error: dict[str, Any] | None = None,
) -> bool:
    """Record the outcome of an operation the caller still holds; False if it lost the claim."""
    cur = conn.execute(
        q("op_finish_one"),
        {
            "id": operation_id,
            "worker": worker,
            "now": now,
            "status": status,
            "record_ids": list(record_ids),
            "result": Jsonb(result) if result is not None else None,
            "error": Jsonb(error) if error is not None else None,
        },
    )
    return cur.rowcount == 1


def release(conn: psycopg.Connection, operation_id: uuid.UUID, *, worker: str, error: dict[str, Any]) -> bool:
    """Give a claimed operation back to the queue after a transient failure (RFC 9.4)."""
    cur = conn.execute(q("op_release"), {"id": operation_id, "worker": worker, "error": Jsonb(error)})
    return cur.rowcount == 1


def reap(conn: psycopg.Connection, *, now: datetime) -> dict[str, int]:
    """RFC 9.4: re-queue operations and release work items whose lease ran out."""
    ops = conn.execute(q("op_reap_expired"), {"now": now}).rowcount
    return {"operations": ops, "work_items": workqueue.reap(conn, now=now)}


def redispatch_stale(
    conn: psycopg.Connection, *, cutoff: datetime, now: datetime, limit: int
) -> list[tuple[OperationKind, uuid.UUID]]:
    """RFC 9.5: ``(kind, id)`` of queued operations last dispatched before ``cutoff``."""
    cur = conn.execute(q("op_redispatch_stale"), {"cutoff": cutoff, "now": now, "limit": limit})
    return [(OperationKind(kind), op_id) for kind, op_id in cur.fetchall()]


def purge_finished(conn: psycopg.Connection, *, cutoff: datetime, limit: int) -> int:
    """RFC 9.2: delete up to ``limit`` operations finished before ``cutoff``."""
    return conn.execute(q("op_purge_finished"), {"cutoff": cutoff, "limit": limit}).rowcount


def counts(conn: psycopg.Connection, *, now: datetime) -> list[dict[str, Any]]:
    """Pending operations by kind and status (RFC 9.1)."""
    cur = conn.execute(q("op_counts"), {"now": now})
    return [
        {"kind": kind, "status": status, "count": n, "oldest_seconds": oldest}
        for kind, status, n, oldest in cur.fetchall()
    ]


def _refusal(exc: Exception) -> dict[str, Any]:
    if isinstance(exc, errors.MembraneError):
        return exc.to_dict()
    if not isinstance(exc, psycopg.Error):
        log.error("capture refused by a bug", exc_info=exc)
        return {"code": "internal", "message": f"{type(exc).__name__}: {exc}", "details": []}
    diag = getattr(exc, "diag", None)
    message = (diag.message_primary if diag is not None else None) or str(exc)
    if isinstance(exc, psycopg.errors.UniqueViolation | psycopg.errors.ForeignKeyViolation):
        code = "conflict"
    elif isinstance(exc, psycopg.IntegrityError | psycopg.DataError):
        code = "invalid_input"
    else:
        code = "internal"
    return {"code": code, "message": f"the database refused the capture: {message}", "details": []}


def write_isolated(
    conn: psycopg.Connection,
    plans: Sequence[CapturePlan],
    *,
    now: datetime,
    opts: records.WorkOptions,
) -> tuple[dict[int, records.CaptureOutcome], dict[int, dict[str, Any]]]:
    """RFC 3.6: write ``plans`` together; a plan that cannot be written fails alone.

    The batch is written in one savepoint; if the database refuses it, the batch is split
    in halves, recursively, until each refused plan is alone, so one bad capture costs
    O(log n) extra writes and never stops the rest. Connection failures propagate.
    """
    written: dict[int, records.CaptureOutcome] = {}
    refused: dict[int, dict[str, Any]] = {}

    def attempt(idx: list[int]) -> None:
        try:
            with conn.transaction():
                outcomes = records.write_captures(conn, [plans[i] for i in idx], now=now, opts=opts)
        except (psycopg.OperationalError, errors.Unavailable):
            raise
        except Exception as exc:  # a poison capture must not block the rest (RFC 3.6)
            if len(idx) == 1:
                refused[idx[0]] = _refusal(exc)
                return
            mid = len(idx) // 2
            attempt(idx[:mid])
            attempt(idx[mid:])
            return
        written.update(zip(idx, outcomes, strict=True))

    if plans:
        attempt(list(range(len(plans))))
    return written, refused
