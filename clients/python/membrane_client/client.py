"""The synchronous client, on ``httpx.Client``."""

from __future__ import annotations

import itertools
import os
import time
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ThreadPoolExecutor
from concurrent.futures import wait as wait_futures
from datetime import datetime
from pathlib import Path
from types import TracebackType
from typing import Any, TypeVar, Unpack

import httpx

from membrane_client import _core
from membrane_client._core import (
    Call,
    Capture,
    Deadline,
    DecisionInput,
    Evidence,
    Id,
    OnConflict,
    P,
    RetryPolicy,
    Revised,
    Wait,
)
from membrane_client.errors import MembraneError, OperationTimeout
from membrane_client.ingest import (
    DEFAULT_INGEST_WAIT,
    IngestItem,
    IngestProgress,
    IngestResult,
    Tally,
    check_arguments,
    chunks,
    failed_items,
    from_operations,
    unfinished,
)
from membrane_client.models import (
    ApprovalMode,
    AuditHistory,
    DecideResult,
    DecisionResult,
    Erasure,
    ExpandOptions,
    ExportFilters,
    ImportReport,
    Lineage,
    Metrics,
    Operation,
    OperationFilters,
    OperationPage,
    OperationSummary,
    Record,
    RecordFilters,
    RecordPage,
    RequeueResult,
    RetrieveResult,
    ReviewEntry,
    ReviewOrder,
    ReviewPage,
    ScopeList,
    WorkFilters,
    WorkOverview,
)

T = TypeVar("T")

__all__ = ["Client"]


class Client:
    """A client of the Membrane HTTP API.

    Every write carries an ``Idempotency-Key`` (a fresh one unless given), so the
    retries on connection errors, ``429`` and ``503`` (honouring ``Retry-After``, with
    jittered exponential backoff, at most ``max_retries``) never write twice. Other
    ``4xx`` answers are raised at once as their typed :mod:`membrane_client.errors`, as is
    ``EncryptionKeyUnavailable``, a ``503`` that only the operator can fix.

    ``wait`` on a write: ``None`` returns the queued operation at once; seconds (or
    ``True``, 30 s) wait for it to finish, first on the server, then by polling, and
    return it finished or, after that long, as it stands.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 5,
        backoff: float = 0.2,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff)
        #: RFC 13.2: the latest consistency token of this client's writes
        self.tokens = _core.Tokens()
        self._http = httpx.Client(
            base_url=base_url, headers=_core.client_headers(api_key), timeout=timeout, transport=transport
        )

    # -- lifecycle ------------------------------------------------------------------

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- sending ----------------------------------------------------------------------

    def _run(self, call: Call[T]) -> T:
        """Send ``call``, retrying what may be retried, and parse its answer."""
        content, headers = call.content(), self.tokens.headers(call)
        # a server-side ?wait holds the answer back: the read timeout has to cover it
        timeout = self.timeout + (call.wait or 0.0)
        attempt = 0
        while True:
            try:
                response = self._http.request(
                    call.method,
                    call.path,
                    params=call.params,
                    content=content,
                    headers=headers,
                    timeout=timeout,
                )
            except _core.RETRY_EXCEPTIONS as exc:
                if attempt >= self.retry.max_retries:
                    raise _core.connection_error(exc, call) from exc
                delay = self.retry.delay(attempt, None)
            else:
                self.tokens.seen(response)
                if not _core.retryable(response) or attempt >= self.retry.max_retries:
                    return _core.parse(call, response)
                delay = self.retry.delay(attempt, _core.retry_after(response))
                response.close()
            attempt += 1
            time.sleep(delay)

    def _write(self, call: Call[Operation], wait: Wait) -> Operation:
        deadline = Deadline(_core.wait_seconds(wait))
        op = self._run(call)
        if not op.finished and deadline.remaining() > 0:
            op = self._poll(op, deadline, fail=False)
        return op

    def _poll(self, op: Operation, deadline: Deadline, *, fail: bool) -> Operation:
        attempt = 0
        while not op.finished:
            left = deadline.remaining()
            if left <= 0:
                if fail:
                    raise OperationTimeout(f"operation {op.operation_id} is still {op.status}", operation=op)
                return op
            time.sleep(min(_core.poll_interval(attempt), left))
            attempt += 1
            op = self._run(_core.operation(op.operation_id))
        return op

    # -- captures -----------------------------------------------------------------------

    def capture(
        self, capture: Capture, *, wait: Wait = None, idempotency_key: str | None = None
    ) -> Operation:
        """``POST /v1/captures``: remember one thing; the operation names its record ids."""
        return self._write(_core.capture(capture, wait, idempotency_key), wait)

    def capture_many(
        self, captures: Iterable[Capture], *, wait: Wait = None, idempotency_key: str | None = None
    ) -> list[Operation]:
        """``POST /v1/captures:batch`` in chunks of 1,000; one operation per capture, in order.

        An invalid capture gets its own failed operation and the others proceed. Chunk
        ``i`` is sent under the key ``f"{idempotency_key}:{i}"``. A chunk that the server
        refuses as a whole raises (see :meth:`ingest` for per-item failures instead).
        """
        key = idempotency_key or _core.new_key()
        deadline = Deadline(_core.wait_seconds(wait))
        ops: list[Operation] = []
        for index, _, items in chunks(captures, _core.MAX_BATCH):
            call = _core.capture_batch(items, deadline.remaining(), _core.chunk_key(key, index))
            chunk: list[Operation] = self._run(call)
            ops.extend(chunk)
        return [self._poll(op, deadline, fail=False) for op in ops]

    def ingest(
        self,
        iterable: Iterable[Capture],
        *,
        batch: int = 1000,
        concurrency: int = 4,
        on_progress: Callable[[IngestProgress], Any] | None = None,
        idempotency_key: str | None = None,
        wait: bool | float = False,
    ) -> IngestResult:
        """Capture everything ``iterable`` yields, ``batch`` at a time, ``concurrency`` chunks
        in flight (threads). The iterable is read lazily: at most one chunk beyond those in
        flight is held, and the next is read only as one completes.

        Each item's outcome is in the result: its operation and status, or the reason it
        failed, including the error of a chunk that failed after every retry. With
        ``wait`` (``True``: up to 300 s a chunk, or seconds), each chunk's operations are
        waited for before its slot is freed, so slow workers slow the reader too.
        ``on_progress`` is called in the calling thread after each chunk.
        """
        check_arguments(batch, concurrency, _core.MAX_BATCH)
        key = idempotency_key or _core.new_key()
        seconds = DEFAULT_INGEST_WAIT if wait is True else float(wait)
        tally = Tally(on_progress)
        with ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="membrane-ingest") as pool:
            pending: set[Future[list[IngestItem]]] = set()
            for index, start, items in chunks(iterable, batch):
                # this chunk is read while `concurrency` are in flight; it waits for a free slot
                while len(pending) >= concurrency:
                    done, pending = wait_futures(pending, return_when=FIRST_COMPLETED)
                    for future in done:
                        tally.add(future.result())
                pending.add(
                    pool.submit(self._ingest_chunk, _core.chunk_key(key, index), start, items, seconds)
                )
            for future in wait_futures(pending).done:
                tally.add(future.result())
        return tally.result()

    def _ingest_chunk(self, key: str, start: int, items: list[Any], seconds: float) -> list[IngestItem]:
        deadline = Deadline(seconds)
        try:
            ops = self._run(_core.capture_batch(items, seconds or None, key))
            # resending the chunk under its key returns the same operations (RFC 9.2) and
            # waits for them on the server: one request per 30 s instead of one per capture
            while unfinished(ops) and deadline.remaining() > 0:
                ops = self._run(_core.capture_batch(items, deadline.remaining(), key))
        except MembraneError as exc:
            return failed_items(start, len(items), exc)
        return from_operations(start, len(items), ops)

    # -- reads --------------------------------------------------------------------------

    def get(
        self, record_id: Id, *, as_of: datetime | str | None = None, valid_at: datetime | str | None = None
    ) -> Record:
        """``GET /v1/records/{id}``: the record, marked with its status; bitemporal."""
        return self._run(_core.get(record_id, as_of, valid_at))

    def audit(self, record_id: Id) -> AuditHistory:
        """``GET /v1/records/{id}/audit``: the hash-chained history, also after deletion."""
        return self._run(_core.audit(record_id))

    def retrieve(
        self,
        query: str | None = None,
        *,
        scopes: Iterable[str] | None = None,
        limit: int = 10,
        expand: int | Mapping[str, Any] | ExpandOptions | None = None,
        include_proposed: bool = False,
        **filters: Any,
    ) -> RetrieveResult:
        """``POST /v1/retrieve``; ``filters`` are the other fields of the request
        (``memory_types``, ``max_sensitivity``, ``include_retracted``, ``as_of`` ...).
        ``include_proposed`` returns proposed records too, marked ``proposed`` and ranked below
        the active ones (RFC 5.7)."""
        return self._run(_core.retrieve(query, scopes, limit, expand, filters, include_proposed))

    def metrics(self) -> Metrics:
        """``GET /v1/metrics``."""
        return self._run(_core.metrics())

    def operation(self, operation_id: Id) -> Operation:
        """``GET /v1/operations/{id}``."""
        return self._run(_core.operation(operation_id))

    def wait(self, operation_or_id: Operation | Id, timeout: float = 30.0) -> Operation:
        """The operation once it has succeeded or failed; :class:`OperationTimeout` after
        ``timeout`` seconds.

        The first read asks the server to hold its answer until the operation finishes
        (``?wait``, as writes take; a server that does not support it answers at once);
        then the operation is polled, quickly at first, then every half second.
        """
        if isinstance(operation_or_id, Operation) and operation_or_id.finished:
            return operation_or_id
        deadline = Deadline(timeout)
        first = _core.operation(_core.operation_id_of(operation_or_id), wait=timeout)
        return self._poll(self._run(first), deadline, fail=True)

    # -- lists (RFC 10.7) -------------------------------------------------------------

    def _pages(self, call: Call[P]) -> Iterator[P]:
        """Every page from ``call``'s on, each fetched as the one before is used up."""
        page_call: Call[P] | None = call
        while page_call is not None:
            page = self._run(page_call)
            yield page
            page_call = _core.next_page(page_call, page)

    def list_records(self, **filters: Unpack[RecordFilters]) -> RecordPage:
        """``GET /v1/records``: one page of records newest first, trust-checked and redacted as
        retrieval is; pass its ``next_cursor`` as ``cursor`` for the next. ``filters`` are the
        query parameters (:class:`~membrane_client.models.RecordFilters`)."""
        return self._run(_core.list_records(filters))

    def iter_records(self, **filters: Unpack[RecordFilters]) -> Iterator[Record]:
        """Every record :meth:`list_records` matches, page after page (``limit`` and
        ``max_bytes`` size the pages; ``cursor`` starts later)."""
        pages = self._pages(_core.list_records(filters))  # built now: a bad filter raises here
        return itertools.chain.from_iterable(page.records for page in pages)

    def lineage(self, record_id: Id, *, as_of: datetime | str | None = None) -> Lineage:
        """``GET /v1/records/{id}/lineage``: the correction chain around a record (supersedes,
        merged into, forked from, contests), as believed at ``as_of``."""
        return self._run(_core.lineage(record_id, as_of))

    def list_operations(self, **filters: Unpack[OperationFilters]) -> OperationPage:
        """``GET /v1/operations``: one page of operations newest first, the caller's own (an
        operator's: everyone's)."""
        return self._run(_core.list_operations(filters))

    def iter_operations(self, **filters: Unpack[OperationFilters]) -> Iterator[OperationSummary]:
        """Every operation :meth:`list_operations` matches, page after page."""
        pages = self._pages(_core.list_operations(filters))
        return itertools.chain.from_iterable(page.operations for page in pages)

    def list_scopes(self) -> ScopeList:
        """``GET /v1/scopes``: the scopes the caller may read, with the records it sees in each."""
        return self._run(_core.list_scopes())

    # -- revisions ----------------------------------------------------------------------

    def supersede(
        self,
        record_id: Id,
        record: Revised,
        rationale: str,
        *,
        evidence: Evidence = None,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Replace a fact with a new version; the new record id is in ``record_ids``."""
        return self._write(
            _core.supersede(record_id, record, rationale, evidence, wait, idempotency_key), wait
        )

    def fork(
        self,
        record_id: Id,
        record: Revised,
        rationale: str,
        *,
        condition: Mapping[str, Any] | str | None = None,
        evidence: Evidence = None,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Fork a conditional variant of a record."""
        return self._write(
            _core.fork(record_id, record, rationale, condition, evidence, wait, idempotency_key), wait
        )

    def merge(
        self,
        record_ids: Sequence[Id],
        record: Revised,
        rationale: str,
        *,
        evidence: Evidence = None,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Merge records into one."""
        return self._write(_core.merge(record_ids, record, rationale, evidence, wait, idempotency_key), wait)

    def retract(
        self, record_id: Id, rationale: str, *, wait: Wait = None, idempotency_key: str | None = None
    ) -> Operation:
        """Retract a record; reads no longer return it unless asked for retracted ones."""
        return self._write(_core.retract(record_id, rationale, wait, idempotency_key), wait)

    def contest(
        self,
        record_id: Id,
        rationale: str,
        *,
        contesting_record_id: Id | None = None,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Mark a record contested, optionally by another record."""
        return self._write(
            _core.contest(record_id, rationale, contesting_record_id, wait, idempotency_key), wait
        )

    def reinforce(
        self,
        record_id: Id,
        rationale: str | None = None,
        *,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Reinforce a record's salience."""
        return self._write(_core.reinforce(record_id, rationale, wait, idempotency_key), wait)

    def penalize(
        self,
        record_id: Id,
        amount: float | None = None,
        rationale: str | None = None,
        *,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Remove ``amount`` of a record's salience (the server's default when ``None``)."""
        return self._write(_core.penalize(record_id, amount, rationale, wait, idempotency_key), wait)

    # -- operators ------------------------------------------------------------------------

    def run_maintenance(
        self, jobs: Iterable[str], *, wait: Wait = None, idempotency_key: str | None = None
    ) -> Operation:
        """Run one batch of each job now (``decay``, ``prune``, ``consolidate``, ``embed``,
        ``extract``)."""
        return self._write(_core.maintenance(jobs, wait, idempotency_key), wait)

    def work(self, **filters: Unpack[WorkFilters]) -> WorkOverview:
        """``GET /v1/work``: every job's backlog, the inbox, the embedding lag and a page of
        buried items with their last error (``kind`` narrows those; ``next_cursor`` pages)."""
        return self._run(_core.work(filters))

    def requeue_work(self, ids: Iterable[int], rationale: str | None = None) -> RequeueResult:
        """``POST /v1/work:requeue``: put buried items back, due now; each is audited on its
        record with ``rationale`` (the server's default when ``None``)."""
        return self._run(_core.requeue_work(ids, rationale))

    # -- review (RFC 5.7) ---------------------------------------------------------------

    def review_queue(
        self,
        scopes: Iterable[str] | str | None = None,
        order: ReviewOrder = "age",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ReviewPage:
        """``GET /v1/review`` (reviewer keys): one page of the pending proposals the caller may
        decide, oldest first (``order="corroboration"``: most corroborated first), each with its
        records, evidence, corroborators and conflicting facts; pass ``next_cursor`` as
        ``cursor`` for the next page (RFC 5.7)."""
        return self._run(_core.review_queue(scopes, order, limit, cursor))

    def iter_review(
        self,
        scopes: Iterable[str] | str | None = None,
        order: ReviewOrder = "age",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Iterator[ReviewEntry]:
        """Every entry of :meth:`review_queue`, page after page (``limit`` sizes the pages;
        ``cursor`` starts later) (RFC 5.7)."""
        pages = self._pages(_core.review_queue(scopes, order, limit, cursor))
        return itertools.chain.from_iterable(page.entries for page in pages)

    def decide(self, decisions: Iterable[DecisionInput]) -> DecideResult:
        """``POST /v1/review:decide`` (reviewer keys): 1 to 1,000 decisions
        (:class:`~membrane_client.models.Decision` or mappings), each applied or refused on its
        own; the results come in input order, a refused one with its ``error`` (RFC 5.7)."""
        return self._run(_core.decide(decisions))

    def approve(
        self, proposal_id: Id, *, mode: ApprovalMode | None = None, rationale: str | None = None
    ) -> DecisionResult:
        """Approve a proposal: its records become active. ``mode`` (``replace`` or ``beside``)
        is needed when an active fact has the proposed fact's subject and predicate with another
        object. A refusal raises the exception of its code (RFC 5.7)."""
        return _core.only(
            self.decide([_core.decision(proposal_id, "approve", mode=mode, rationale=rationale)])
        )

    def reject(self, proposal_id: Id, *, rationale: str | None = None) -> DecisionResult:
        """Reject a proposal: its records are retracted and its fact key tombstoned, so the
        triple is not proposed again. A refusal raises the exception of its code (RFC 5.7)."""
        return _core.only(self.decide([_core.decision(proposal_id, "reject", rationale=rationale)]))

    def amend(
        self,
        proposal_id: Id,
        record: Revised,
        *,
        rationale: str | None = None,
        evidence: Evidence = None,
    ) -> DecisionResult:
        """Amend a proposal with a fact: ``record`` (as a supersede's) becomes an active fact
        superseding the proposed one, and the proposal's other records are approved; the new
        fact's id is the last of ``record_ids``. A refusal raises the exception of its code
        (RFC 5.7)."""
        body = _core.decision(proposal_id, "amend", record=record, rationale=rationale, evidence=evidence)
        return _core.only(self.decide([body]))

    # -- moving and forgetting (RFC 15) -------------------------------------------------

    def export(self, target: str | os.PathLike[str], **filters: Unpack[ExportFilters]) -> Path:
        """``GET /v1/export``: the records the key sees, with their history, corrections and
        audit, streamed into the tar file ``target`` (RFC 15.1); returns its path. A refusal
        raises the exception of its code before anything is written; a download cut short
        leaves no file."""
        path = Path(target)
        params = _core.export_params(filters)
        part = path.with_name(path.name + ".part")
        with self._http.stream("GET", _core.ENDPOINTS["export"][1], params=params, timeout=None) as response:
            if not response.is_success:
                response.read()
                _core.parse(_core.Call("GET", "/v1/export", bytes), response)
            with part.open("wb") as out:
                for block in response.iter_bytes():
                    out.write(block)
        part.replace(path)
        return path

    def import_bundle(
        self, source: str | os.PathLike[str], *, on_conflict: OnConflict = "skip"
    ) -> ImportReport:
        """``POST /v1/import`` (operator keys): the bundle's tar at ``source``, checked whole
        before anything is written; ids the store holds are skipped, overwritten where they
        differ, or refuse the import (``on_conflict``, RFC 15.2)."""
        call = _core.import_bundle(Path(source).read_bytes(), on_conflict)
        return self._run(call)

    def erase(
        self,
        *,
        reason: str,
        scope: str | None = None,
        entity: Id | None = None,
        records: Iterable[Id] | None = None,
        confirm: str | None = None,
    ) -> Erasure:
        """``POST /v1/erase`` (keys with ``erase``): without ``confirm`` a dry run, counting what
        would go by table; with the dry run's ``confirm``, the erasure itself, refused when the
        store changed since (RFC 15.4). Name one of ``scope``, ``entity`` or ``records``."""
        return self._run(_core.erase(_core.erase_body(reason, scope, entity, records, confirm)))
