"""The worker side of the operations inbox: claim, apply, finish, re-dispatch (RFC 9.1, 9.5).

Capture operations are locked, written and marked succeeded in ONE transaction
(exactly once); revisions run in the transaction that locks their operation;
maintenance operations are claimed under a lease because their jobs commit their
own batches. :class:`InboxWorker` is the worker half of the inbox;
:class:`membrane_core.inbox.submit.Inbox` is the half that accepts.
"""

from __future__ import annotations

import json
import logging
import uuid
from collections.abc import Mapping, Sequence
from datetime import timedelta
from typing import Any, Protocol

from pydantic import ValidationError

from membrane_core import errors
from membrane_core.capture.plan import CapturePlan
from membrane_core.clock import Clock
from membrane_core.enums import OperationKind, OperationStatus
from membrane_core.providers.base import TransientProviderError
from membrane_core.requests import CaptureRequest
from membrane_core.sealing import NO_KEYS, SEALED_BODY, Sealer
from membrane_core.storage import inbox
from membrane_core.storage.db import Connection, Database
from membrane_core.storage.records import WorkOptions
from membrane_core.storage.workqueue import worker_name
from membrane_core.trust import TrustPolicy

log = logging.getLogger(__name__)

#: RFC 9.4: attempts after which a transiently failing operation is failed for good.
MAX_ATTEMPTS = 5


class CapturePlanner(Protocol):
    """What the worker asks of the capture service: a stored capture's plan (RFC 3.3)."""

    def plan(
        self,
        request: CaptureRequest | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        record_id: uuid.UUID | None = None,
        operation_id: uuid.UUID | None = None,
    ) -> CapturePlan: ...


class RevisionApplier(Protocol):
    """The revision engine, applying one revision in the caller's transaction (RFC 5.2)."""

    def apply(
        self,
        kind: OperationKind,
        target_id: uuid.UUID | None,
        body: Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> list[uuid.UUID]: ...


class MaintenanceRunner(Protocol):
    """Maintenance, running one bounded batch of a named job (RFC 6.5)."""

    def run(self, job: str, *, limit: int | None = None) -> dict[str, Any]: ...


def error_dict(exc: BaseException) -> dict[str, Any]:
    """The error recorded on a failed operation (RFC 10.2 shape)."""
    if isinstance(exc, errors.MembraneError):
        return exc.to_dict()
    return {"code": "internal", "message": f"{type(exc).__name__}: {exc}", "details": []}


def as_uuid(value: uuid.UUID | str, field: str) -> uuid.UUID:
    """``value`` as a UUID, or ``InvalidInput`` naming ``field``."""
    try:
        return value if isinstance(value, uuid.UUID) else uuid.UUID(str(value))
    except ValueError as exc:
        raise errors.InvalidInput(
            f"{field} {value!r} is not a UUID",
            details=[{"field": field, "message": "not a UUID", "type": "uuid_parsing"}],
        ) from exc


def _parse_json_capture(text: str) -> CaptureRequest:
    """A stored capture request, validated again straight from its JSON (RFC 9.1)."""
    try:
        return CaptureRequest.model_validate_json(text)
    except ValidationError as exc:
        raise errors.InvalidInput(
            "the stored capture request is invalid", details=errors.field_errors(exc)
        ) from exc


class InboxWorker:
    """Claim, apply and finish operations (RFC 9.1, 9.5); ``Membrane.inbox_worker``."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock,
        captures: CapturePlanner,
        work: WorkOptions,
        revisions: RevisionApplier,
        maintenance: MaintenanceRunner,
        lease_seconds: int,
        retention_seconds: float,
        sealer: Sealer = NO_KEYS,
    ) -> None:
        self._db = db
        #: RFC 7.6: opens the requests the inbox stored sealed
        self._sealer = sealer
        self._clock = clock
        self._captures = captures
        self._work = work
        self._revisions = revisions
        self._maintenance = maintenance
        self._lease = lease_seconds
        self._retention = retention_seconds

    def process_captures(
        self,
        operation_ids: Sequence[uuid.UUID | str] | None = None,
        *,
        worker: str | None = None,
        drain: int = 0,
    ) -> dict[str, int]:
        """RFC 9.1: write queued capture operations exactly once.

        Locks ``operation_ids`` (those still queued) and up to ``drain`` more queued
        captures with ``SKIP LOCKED``, rebuilds their plans under the trust stored with
        each, writes them with one COPY per table and marks each operation succeeded or
        failed, all in ONE transaction. A capture that no longer validates, or that the
        database refuses, fails its own operation; the rest are written.
        """
        ids = [as_uuid(i, "operation_id") for i in operation_ids or ()]
        now = self._clock()
        summary = {"claimed": 0, "succeeded": 0, "failed": 0}
        with self._db.transaction() as conn:
            locked = inbox.lock_captures(conn, ids, drain=drain, now=now)
            if not locked:
                return summary
            plans, plan_ops, failed = self._rebuild_plans(locked)
            written, refused = inbox.write_isolated(conn, plans, now=now, opts=self._work)
            outcomes: list[tuple[uuid.UUID, str, Sequence[uuid.UUID], dict[str, Any] | None]] = []
            outcomes += [(op_id, OperationStatus.FAILED.value, (), err) for op_id, err in failed]
            results: list[dict[str, Any] | None] = [None] * len(failed)
            for i, op_id in enumerate(plan_ops):
                if i in written:
                    w = written[i]
                    outcomes.append((op_id, OperationStatus.SUCCEEDED.value, w.record_ids, None))
                    # RFC 9.1, 5.7: what became of the fact, and the proposal a reviewer decides
                    results.append(
                        {"fact": w.fact, "proposal_id": str(w.proposal_id) if w.proposal_id else None}
                    )
                else:
                    outcomes.append((op_id, OperationStatus.FAILED.value, (), refused[i]))
                    results.append(None)
            inbox.finish_many(conn, outcomes, now=now, results=results)
        summary.update(claimed=len(locked), succeeded=len(written), failed=len(failed) + len(refused))
        if summary["failed"]:
            log.warning("capture operations failed", extra={"failed": summary["failed"], "worker": worker})
        return summary

    def _rebuild_plans(
        self, locked: Sequence[inbox.LockedCapture]
    ) -> tuple[list[CapturePlan], list[uuid.UUID], list[tuple[uuid.UUID, dict[str, Any]]]]:
        trusts: dict[str, TrustPolicy] = {}
        plans: list[CapturePlan] = []
        plan_ops: list[uuid.UUID] = []
        failed: list[tuple[uuid.UUID, dict[str, Any]]] = []
        for op in locked:
            try:
                trust = trusts.get(op.trust)
                if trust is None:
                    trust = trusts[op.trust] = TrustPolicy.model_validate_json(op.trust)
                request = _parse_json_capture(self._sealer.open_json(op.id, op.request))
                plans.append(self._captures.plan(request, trust, record_id=op.record_id, operation_id=op.id))
                plan_ops.append(op.id)
            except Exception as exc:  # one bad capture fails its own operation (RFC 3.6)
                if not isinstance(exc, errors.MembraneError):
                    log.exception("capture operation %s could not be planned", op.id)
                failed.append((op.id, error_dict(exc)))
        return plans, plan_ops, failed

    def process_one(self, operation_id: uuid.UUID | str, *, worker: str | None = None) -> dict[str, Any]:
        """RFC 9.1: run one revision or maintenance operation.

        A revision runs inside the transaction that locks its operation and records the
        outcome, so it is applied exactly once. Maintenance jobs commit their own batches,
        so a maintenance operation is claimed under a lease first (a dead worker's lease
        is reaped and the jobs run again; each job is idempotent). Transient failures
        (``Unavailable``, ``TransientProviderError``) leave the operation queued and
        re-raise so the task retries with backoff; other errors fail the operation.
        """
        op_id = as_uuid(operation_id, "operation_id")
        who = worker or worker_name()
        with self._db.transaction() as conn:
            op = inbox.lock_one(conn, op_id, now=self._clock())
            if op is None:
                return {"operation_id": str(op_id), "status": "skipped"}
            if op.kind is OperationKind.MAINTENANCE:
                inbox.claim_one(conn, op_id, worker=who, now=self._clock(), lease_seconds=self._lease)
            else:
                return self._revise(conn, op)
        try:
            result = self._run_maintenance(op.request)
        except (errors.Unavailable, TransientProviderError) as exc:
            if op.attempts + 1 < MAX_ATTEMPTS:
                with self._db.transaction() as conn:
                    inbox.release(conn, op.id, worker=who, error=error_dict(exc))
                raise
            return self._finish(op.id, who, OperationStatus.FAILED, error=error_dict(exc))
        except Exception as exc:
            if not isinstance(exc, errors.MembraneError):
                log.exception("operation %s failed", op.id)
            return self._finish(op.id, who, OperationStatus.FAILED, error=error_dict(exc))
        return self._finish(op.id, who, OperationStatus.SUCCEEDED, result=result)

    def _revise(self, conn: Connection, op: inbox.ClaimedOperation) -> dict[str, Any]:
        """Apply a revision in the caller's transaction and record its outcome there."""
        now = self._clock()
        try:
            trust = TrustPolicy.model_validate_json(op.trust)
            body = op.request
            if SEALED_BODY in body:  # RFC 7.6
                body = json.loads(self._sealer.open_json(op.id, json.dumps(body)))
            with conn.transaction():  # a savepoint: a refused revision writes nothing
                ids = self._revisions.apply(op.kind, op.target_id, body, trust, conn=conn)
        except (errors.Unavailable, TransientProviderError):
            raise
        except Exception as exc:
            if not isinstance(exc, errors.MembraneError):
                log.exception("operation %s failed", op.id)
            inbox.finish_many(conn, [(op.id, OperationStatus.FAILED.value, (), error_dict(exc))], now=now)
            return {"operation_id": str(op.id), "status": OperationStatus.FAILED.value}
        inbox.finish_many(conn, [(op.id, OperationStatus.SUCCEEDED.value, ids, None)], now=now)
        return {"operation_id": str(op.id), "status": OperationStatus.SUCCEEDED.value}

    def _finish(
        self,
        op_id: uuid.UUID,
        worker: str,
        status: OperationStatus,
        *,
        record_ids: Sequence[uuid.UUID] = (),
        result: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
    ) -> dict[str, Any]:
        with self._db.transaction() as conn:
            held = inbox.finish_one(
                conn,
                op_id,
                worker=worker,
                now=self._clock(),
                status=status.value,
                record_ids=record_ids,
                result=result,
                error=error,
            )
        if not held:
            log.warning("operation %s: claim lost before finishing", op_id)
        return {"operation_id": str(op_id), "status": status.value if held else "claim_lost"}

    def _run_maintenance(self, request: Mapping[str, Any]) -> dict[str, Any]:
        return {job: self._maintenance.run(job) for job in request.get("jobs", [])}

    def redispatch_stale(
        self, older_than: float | timedelta, *, limit: int = 10_000
    ) -> dict[OperationKind, list[uuid.UUID]]:
        """RFC 9.5: queued operations not dispatched for ``older_than``, stamped re-dispatched.

        Beat publishes what this returns; an operation is offered again at most once per
        ``older_than``, and duplicates are harmless because claims skip finished work.
        """
        age = older_than if isinstance(older_than, timedelta) else timedelta(seconds=older_than)
        now = self._clock()
        with self._db.transaction() as conn:
            rows = inbox.redispatch_stale(conn, cutoff=now - age, now=now, limit=limit)
        out: dict[OperationKind, list[uuid.UUID]] = {}
        for kind, op_id in rows:
            out.setdefault(kind, []).append(op_id)
        return out

    def purge_finished(self, older_than: float | timedelta | None = None, *, limit: int = 10_000) -> int:
        """RFC 9.2: forget up to ``limit`` operations finished longer ago than the retention.

        Their idempotency keys become reusable; queued and running operations are kept.
        """
        age = older_than if older_than is not None else self._retention
        span = age if isinstance(age, timedelta) else timedelta(seconds=age)
        with self._db.transaction() as conn:
            return inbox.purge_finished(conn, cutoff=self._clock() - span, limit=limit)

    def reap_expired(self) -> dict[str, int]:
        """RFC 9.4: re-queue operations and release work items whose lease ran out."""
        with self._db.transaction() as conn:
            return inbox.reap(conn, now=self._clock())
