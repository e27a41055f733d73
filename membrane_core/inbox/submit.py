"""The durable operations inbox: submit, observe and process asynchronous writes (RFC 9.1, 9.2).

Submitting validates and authorises a request completely, then inserts its operation
row (a batch: one multi-row statement) and commits; the caller publishes the ids to
the broker afterwards (:class:`Dispatcher`, RFC 9.5). Workers claim operations with
``FOR UPDATE SKIP LOCKED`` (:class:`membrane_core.inbox.worker.InboxWorker`).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any, Protocol

from pydantic import Field

from membrane_core import budget, errors, logs
from membrane_core.capture.plan import new_id
from membrane_core.clock import Clock
from membrane_core.enums import Job, OperationKind, OperationStatus, Sensitivity
from membrane_core.inbox.worker import MAX_ATTEMPTS, as_uuid
from membrane_core.models import Frozen
from membrane_core.requests import CaptureRequest
from membrane_core.revision import rules
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage import inbox, retrieval
from membrane_core.storage.db import Database
from membrane_core.storage.workqueue import worker_name
from membrane_core.trust import ALL_SCOPES, TrustPolicy

log = logging.getLogger(__name__)

__all__ = [
    "MAX_ATTEMPTS",
    "MAX_BATCH",
    "REVISION_KINDS",
    "Dispatcher",
    "Inbox",
    "InlineDispatcher",
    "OperationView",
    "RecordingDispatcher",
    "request_hash",
    "worker_name",
]

#: RFC 3.6: most captures in one batch request.
MAX_BATCH = 1000
#: Operation kinds that go to the revision queue (RFC 5.2).
REVISION_KINDS = frozenset(OperationKind) - {OperationKind.CAPTURE, OperationKind.MAINTENANCE}

_FINISHED = (OperationStatus.SUCCEEDED, OperationStatus.FAILED)


class OperationView(Frozen):
    """An operation as its submitter sees it (RFC 9.1)."""

    operation_id: uuid.UUID
    kind: OperationKind
    status: OperationStatus
    record_id: uuid.UUID | None = None
    record_ids: list[uuid.UUID] = Field(default_factory=list)
    error: dict[str, Any] | None = None
    result: dict[str, Any] | None = None
    created_at: datetime
    finished_at: datetime | None = None
    #: RFC 9.1, 14.3: the request id of the request that submitted it, if it had one.
    request_id: str | None = None


class Dispatcher(Protocol):
    """Publishes operation ids to the workers after the submit committed (RFC 9.5)."""

    def publish(self, kind: OperationKind, operation_ids: Sequence[uuid.UUID]) -> bool:
        """Send the ids to the queue of ``kind``; False when the broker is unavailable."""
        ...


class RecordingDispatcher:
    """A :class:`Dispatcher` that only remembers what it was asked to publish (tests)."""

    def __init__(self) -> None:
        self.published: list[tuple[OperationKind, list[uuid.UUID]]] = []

    def publish(self, kind: OperationKind, operation_ids: Sequence[uuid.UUID]) -> bool:
        """Remember the call (RFC 9.5)."""
        self.published.append((kind, list(operation_ids)))
        return True


class OperationRunner(Protocol):
    """The worker half of the inbox, as a dispatcher that runs operations inline needs it."""

    def process_captures(
        self,
        operation_ids: Sequence[uuid.UUID | str] | None = None,
        *,
        worker: str | None = None,
        drain: int = 0,
    ) -> dict[str, int]: ...

    def process_one(self, operation_id: uuid.UUID | str, *, worker: str | None = None) -> dict[str, Any]: ...


class CaptureChecker(Protocol):
    """What the inbox asks of the capture service at accept time (RFC 9.1)."""

    def check(self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy) -> CaptureRequest: ...

    def level(self, request: CaptureRequest) -> Sensitivity:
        """The sensitivity a checked capture is written at (RFC 3.2)."""
        ...


class InlineDispatcher:
    """A :class:`Dispatcher` that processes operations at once in this process (RFC 9.5).

    For the embeddable library and tests without a broker; never for throughput. Takes
    the inbox's worker half, ``Membrane.inbox_worker``.
    """

    def __init__(self, runner: OperationRunner) -> None:
        self._runner = runner

    def publish(self, kind: OperationKind, operation_ids: Sequence[uuid.UUID]) -> bool:
        """Run the operations now (RFC 9.5)."""
        if kind is OperationKind.CAPTURE:
            self._runner.process_captures(operation_ids, worker="inline")
        else:
            for op_id in operation_ids:
                self._runner.process_one(op_id, worker="inline")
        return True


def request_hash(kind: OperationKind, target_id: uuid.UUID | None, body: Any) -> str:
    """RFC 9.2: the hash an idempotency key is bound to (kind, target and canonical body)."""
    canonical = json.dumps(
        {"kind": kind.value, "target": str(target_id) if target_id else None, "body": body},
        sort_keys=True,
        separators=(",", ":"),
        default=str,
    )
    return hashlib.sha256(canonical.encode()).hexdigest()


def _view(row: inbox.OperationRow) -> OperationView:
    return OperationView(
        operation_id=row.id,
        kind=row.kind,
        status=row.status,
        record_id=row.record_id,
        record_ids=list(row.record_ids),
        error=row.error,
        result=row.result,
        created_at=row.created_at,
        finished_at=row.finished_at,
        request_id=row.request_id,
    )


def _new_view(row: inbox.NewOperation) -> OperationView:
    """The view of a row just inserted, without reading it back."""
    return OperationView(
        operation_id=row.id,
        kind=OperationKind(row.kind),
        status=OperationStatus(row.status),
        record_id=row.record_id,
        error=json.loads(row.error) if row.error else None,
        created_at=row.created_at,
        finished_at=row.finished_at,
        request_id=row.request_id,
    )


def _request_id(value: str | None) -> str | None:
    """RFC 14.3: a request id to store with an operation, or ``InvalidInput`` for a bad one."""
    if value is not None and not logs.is_request_id(value):
        raise errors.InvalidInput(
            f"a request id is 1 to {logs.MAX_REQUEST_ID} letters, digits or ._:=+/- characters"
        )
    return value


class _Prepared:
    """A validated capture ready to insert, with its pre-assigned primary record id."""

    __slots__ = ("hash", "record_id", "request")

    def __init__(self, record_id: uuid.UUID, request: str, hash_: str) -> None:
        self.record_id, self.request, self.hash = record_id, request, hash_


class Inbox:
    """Submit and observe operations (RFC 9.1, 9.2); ``Membrane.inbox``.

    The API side of the inbox; :class:`membrane_core.inbox.worker.InboxWorker` is the
    worker side.
    """

    def __init__(
        self, db: Database, *, clock: Clock, captures: CaptureChecker, sealer: Sealer = NO_KEYS
    ) -> None:
        self._db = db
        self._clock = clock
        self._captures = captures
        #: RFC 7.6: a write at a sealed level is stored sealed in the inbox too
        self._sealer = sealer

    # -- submit (API side) ----------------------------------------------------

    def _prepare_capture(
        self,
        body: CaptureRequest | Mapping[str, Any],
        trust: TrustPolicy,
        op_id: uuid.UUID,
        now: datetime,
        *,
        keyed: bool,
    ) -> _Prepared:
        req = self._captures.check(body, trust)
        # RFC 9.2: the hash binds an idempotency key to its body; without a key it is unused.
        hash_ = request_hash(OperationKind.CAPTURE, None, req.model_dump(mode="json")) if keyed else ""
        if req.occurred_at is None:
            # The event happened when it was accepted, not when a worker got to it.
            req = req.model_copy(update={"occurred_at": now})
        text = req.model_dump_json()
        if self._sealer.seals(self._captures.level(req)):  # RFC 7.6: never in plain text
            text = self._sealer.seal_json(op_id, text)
        return _Prepared(new_id(), text, hash_)

    def submit_capture(
        self,
        body: CaptureRequest | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> OperationView:
        """RFC 9.1: validate and authorise one capture, then queue it durably.

        Raises ``InvalidInput``, ``PayloadTooLarge`` or ``Forbidden`` with nothing written,
        ``IdempotencyConflict`` when the key was used with another body (RFC 9.2). The
        returned view carries the pre-assigned primary ``record_id``; ``request_id`` is
        stored with the operation (RFC 14.3).
        """
        rid = _request_id(request_id)
        now = self._clock()
        op_id = new_id()
        prep = self._prepare_capture(body, trust, op_id, now, keyed=idempotency_key is not None)
        row = self._new_row(
            op_id,
            OperationKind.CAPTURE,
            trust,
            prep.hash,
            prep.request,
            now,
            key=idempotency_key,
            record_id=prep.record_id,
            request_id=rid,
        )
        return self._insert([row], trust)[0]

    def submit_captures(
        self,
        bodies: Sequence[CaptureRequest | Mapping[str, Any]],
        trust: TrustPolicy,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> list[OperationView]:
        """RFC 3.6, 9.1: queue a batch in one multi-row insert; views in input order.

        An item that fails validation or authorisation gets its own FAILED operation with
        the reason; the others are queued. With ``idempotency_key``, item ``i`` is bound to
        ``key#i`` (RFC 9.2). Every operation of the batch stores ``request_id`` (RFC 14.3).
        """
        rid = _request_id(request_id)
        if len(bodies) > MAX_BATCH:
            raise errors.InvalidInput(
                f"a batch holds at most {MAX_BATCH} captures, got {len(bodies)}",
                details=[
                    {"field": "captures", "message": f"more than {MAX_BATCH} items", "type": "too_long"}
                ],
            )
        now = self._clock()
        rows: list[inbox.NewOperation] = []
        for i, body in enumerate(bodies):
            op_id = new_id()
            key = f"{idempotency_key}#{i}" if idempotency_key is not None else None
            try:
                prep = self._prepare_capture(body, trust, op_id, now, keyed=idempotency_key is not None)
            except errors.MembraneError as exc:
                rows.append(self._failed_row(op_id, trust, body, exc, now, key, rid))
                continue
            rows.append(
                self._new_row(
                    op_id,
                    OperationKind.CAPTURE,
                    trust,
                    prep.hash,
                    prep.request,
                    now,
                    key=key,
                    record_id=prep.record_id,
                    request_id=rid,
                )
            )
        return self._insert(rows, trust)

    def submit_revision(
        self,
        kind: OperationKind | str,
        target_id: uuid.UUID | str | None,
        body: Mapping[str, Any],
        trust: TrustPolicy,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> OperationView:
        """RFC 5.2, 9.1: check and queue a revision for the revision queue.

        The targets must be visible to the caller and in a writable scope; the body must
        be a JSON object within the payload budget that the revision engine accepts.
        ``request_id`` is stored with the operation (RFC 14.3).
        """
        rid = _request_id(request_id)
        try:
            op_kind = OperationKind(kind)
        except ValueError as exc:
            raise errors.InvalidInput(f"unknown revision kind {kind!r}") from exc
        if op_kind not in REVISION_KINDS:
            raise errors.InvalidInput(f"{op_kind.value!r} is not a revision")
        rules.require_trusted_writer(trust)  # RFC 5.7
        target = as_uuid(target_id, "target_id") if target_id is not None else None
        if not isinstance(body, Mapping):
            raise errors.InvalidInput("the revision body must be a JSON object")
        budget.check_json_budget(
            dict(body), field="body", max_bytes=budget.MAX_PAYLOAD_BYTES, max_depth=budget.MAX_PAYLOAD_DEPTH
        )
        parsed = rules.parse_body(op_kind, body)
        # RFC 7.2, 9.1: refused at submission, with nothing written, as it would be when run
        rules.require_level(
            getattr(getattr(parsed, "record", None), "sensitivity", None), trust.max_sensitivity.rank
        )
        rank = self._authorise_targets(op_kind, target, body, trust)
        text = json.dumps(dict(body), separators=(",", ":"), ensure_ascii=False, default=str)
        now = self._clock()
        hash_ = request_hash(op_kind, target, json.loads(text))
        level = getattr(getattr(parsed, "record", None), "sensitivity", None)
        op_id = new_id()
        if self._sealer.seals(max(rank, level.rank if level else 0)):  # RFC 7.6
            text = self._sealer.seal_json(op_id, text)
        row = self._new_row(
            op_id, op_kind, trust, hash_, text, now, key=idempotency_key, target_id=target, request_id=rid
        )
        return self._insert([row], trust)[0]

    def submit_maintenance(
        self,
        jobs: Sequence[str],
        trust: TrustPolicy,
        *,
        idempotency_key: str | None = None,
        request_id: str | None = None,
    ) -> OperationView:
        """RFC 6.5: queue one batch of each named job; needs write access to every scope."""
        rid = _request_id(request_id)
        if ALL_SCOPES not in trust.write_scopes:
            raise errors.Forbidden("maintenance needs a policy that writes every scope")
        wanted = list(dict.fromkeys(jobs))
        known = set(Job)
        bad = [j for j in wanted if j not in known]
        if not wanted or bad:
            raise errors.InvalidInput(
                f"jobs must be a non-empty list of {', '.join(Job)}",
                details=[{"field": "jobs", "message": f"unknown job {j!r}", "type": "enum"} for j in bad]
                or [{"field": "jobs", "message": "empty", "type": "too_short"}],
            )
        now = self._clock()
        body = {"jobs": wanted}
        row = self._new_row(
            new_id(),
            OperationKind.MAINTENANCE,
            trust,
            request_hash(OperationKind.MAINTENANCE, None, body),
            json.dumps(body),
            now,
            key=idempotency_key,
            request_id=rid,
        )
        return self._insert([row], trust)[0]

    def _authorise_targets(
        self, kind: OperationKind, target: uuid.UUID | None, body: Mapping[str, Any], trust: TrustPolicy
    ) -> int:
        """RFC 5.2: check the caller may revise every target; returns their highest sensitivity rank."""
        ids: list[uuid.UUID] = [target] if target is not None else []
        if kind is OperationKind.MERGE:
            raw = body.get("record_ids")
            if not isinstance(raw, list) or len(raw) < 2:
                raise errors.InvalidInput(
                    "merge needs at least two record_ids",
                    details=[{"field": "record_ids", "message": "at least two ids", "type": "too_short"}],
                )
            ids += [as_uuid(v, "record_ids") for v in raw]
        elif target is None:
            raise errors.InvalidInput(f"{kind.value} needs a target record id")
        with self._db.transaction() as conn:  # RFC 13.2: a just-written target is there
            found = retrieval.access(conn, ids)
        for rid in ids:  # RFC 5.2: as the revision will answer when it runs
            got = found.get(rid)
            if got is None:
                raise errors.NotFound(f"record {rid} not found")
            rules.require_revisable(
                rid, trust.visibility(got.scope, got.sensitivity), trust.can_write_scope(got.scope)
            )
            rules.require_decided(rid, got.status)
        return max(a.sensitivity.rank for a in found.values())

    def _new_row(
        self,
        op_id: uuid.UUID,
        kind: OperationKind,
        trust: TrustPolicy,
        hash_: str,
        request: str,
        now: datetime,
        *,
        key: str | None = None,
        record_id: uuid.UUID | None = None,
        target_id: uuid.UUID | None = None,
        request_id: str | None = None,
    ) -> inbox.NewOperation:
        return inbox.NewOperation(
            id=op_id,
            kind=kind.value,
            status=OperationStatus.QUEUED.value,
            principal=trust.actor,
            idempotency_key=key,
            request_hash=hash_,
            request=request,
            trust=trust.model_dump_json(),
            target_id=target_id,
            record_id=record_id,
            error=None,
            created_at=now,
            finished_at=None,
            request_id=request_id,
        )

    def _failed_row(
        self,
        op_id: uuid.UUID,
        trust: TrustPolicy,
        body: Any,
        exc: errors.MembraneError,
        now: datetime,
        key: str | None,
        request_id: str | None,
    ) -> inbox.NewOperation:
        try:
            hash_ = request_hash(OperationKind.CAPTURE, None, body)
        except (TypeError, ValueError):
            hash_ = "unhashable"
        return inbox.NewOperation(
            id=op_id,
            kind=OperationKind.CAPTURE.value,
            status=OperationStatus.FAILED.value,
            principal=trust.actor,
            idempotency_key=key,
            request_hash=hash_,
            request="{}",
            trust=trust.model_dump_json(),
            target_id=None,
            record_id=None,
            error=json.dumps(exc.to_dict(), default=str),
            created_at=now,
            finished_at=now,
            request_id=request_id,
        )

    def _insert(self, rows: list[inbox.NewOperation], trust: TrustPolicy) -> list[OperationView]:
        with self._db.transaction() as conn:
            inserted = inbox.insert(conn, rows)
            final = [r.id for r in rows]
            missing = [i for i, r in enumerate(rows) if r.id not in inserted]
            if missing:
                keys = [rows[i].idempotency_key or "" for i in missing]
                existing = inbox.by_idempotency_keys(conn, trust.actor, keys)
                for i in missing:
                    known = existing[rows[i].idempotency_key or ""]
                    op_id = known.id
                    if known.request_hash != rows[i].request_hash:
                        raise errors.IdempotencyConflict(
                            f"idempotency key {rows[i].idempotency_key!r} was used with another body"
                        )
                    final[i] = op_id
            found = inbox.views(conn, [final[i] for i in missing]) if missing else {}
        return [
            _view(found[op_id]) if op_id in found else _new_view(rows[i]) for i, op_id in enumerate(final)
        ]

    # -- observe --------------------------------------------------------------

    def get(self, operation_id: uuid.UUID | str, trust: TrustPolicy) -> OperationView:
        """RFC 9.1: one operation; ``NotFound`` unless the caller submitted it (or is an operator)."""
        op_id = as_uuid(operation_id, "operation_id")
        return self._views([op_id], trust)[0]

    def wait(
        self, operation_ids: Sequence[uuid.UUID | str], timeout: float, trust: TrustPolicy | None = None
    ) -> list[OperationView]:
        """RFC 9.1: views once every operation finished or ``timeout`` seconds passed."""
        ids = [as_uuid(i, "operation_id") for i in operation_ids]
        deadline = time.monotonic() + max(0.0, timeout)
        views = self._views(ids, trust)  # NotFound for an unknown or foreign id, at once
        if all(v.status in _FINISHED for v in views):
            return views
        pause = 0.005
        while time.monotonic() < deadline:
            time.sleep(min(pause, max(0.0, deadline - time.monotonic())))
            pause = min(pause * 2, 0.1)
            # Poll a count, not the rows: a wait over a large batch stays cheap.
            with self._db.transaction() as conn:
                if inbox.count_unfinished(conn, ids) == 0:
                    break
        return self._views(ids, trust)

    def _views(self, ids: Sequence[uuid.UUID], trust: TrustPolicy | None) -> list[OperationView]:
        with self._db.transaction() as conn:
            found = inbox.views(conn, ids)
        out = []
        for op_id in ids:
            row = found.get(op_id)
            if row is None or (trust is not None and not _may_see(row.principal, trust)):
                raise errors.NotFound(f"operation {op_id} not found")
            out.append(_view(row))
        return out

    def pending(self) -> list[dict[str, Any]]:
        """Queued and running operations by kind with the oldest's age (RFC 9.1)."""
        with self._db.transaction() as conn:  # RFC 13.2: operation status reads the primary
            return inbox.counts(conn, now=self._clock())


def _may_see(principal: str, trust: TrustPolicy) -> bool:
    """RFC 9.1: the submitter sees its operations; an operator (every scope read and written,
    every level) sees every one, whose record ids may name records at any level."""
    return principal == trust.actor or (
        trust.reads_all and ALL_SCOPES in trust.write_scopes and trust.max_sensitivity is Sensitivity.HYPER
    )
