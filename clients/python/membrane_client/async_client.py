"""The asynchronous client, on ``httpx.AsyncClient``; the same methods as :class:`Client`."""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Mapping, Sequence
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
    achunks,
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

__all__ = ["AsyncClient"]


async def _each(pages: AsyncIterator[P], items: Callable[[P], Iterable[T]]) -> AsyncIterator[T]:
    """The items of every page, in order."""
    async for page in pages:
        for item in items(page):
            yield item


class AsyncClient:
    """The asynchronous twin of :class:`membrane_client.Client`: same methods, awaited.

    Every write carries an ``Idempotency-Key`` (a fresh one unless given); connection
    errors, ``429`` and ``503`` are retried with jittered exponential backoff,
    honouring ``Retry-After``, at most ``max_retries`` times; other ``4xx`` answers, and
    ``EncryptionKeyUnavailable`` (a ``503`` only the operator can fix), are raised at once
    as their typed :mod:`membrane_client.errors`.
    """

    def __init__(
        self,
        base_url: str,
        *,
        api_key: str | None = None,
        timeout: float = 10.0,
        max_retries: int = 5,
        backoff: float = 0.2,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.timeout = timeout
        self.retry = RetryPolicy(max_retries=max_retries, backoff=backoff)
        #: RFC 13.2: the latest consistency token of this client's writes
        self.tokens = _core.Tokens()
        self._http = httpx.AsyncClient(
            base_url=base_url, headers=_core.client_headers(api_key), timeout=timeout, transport=transport
        )

    # -- lifecycle ------------------------------------------------------------------

    async def aclose(self) -> None:
        """Close the connections."""
        await self._http.aclose()

    async def __aenter__(self) -> AsyncClient:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- sending ----------------------------------------------------------------------

    async def _run(self, call: Call[T]) -> T:
        """Send ``call``, retrying what may be retried, and parse its answer."""
        content, headers = call.content(), self.tokens.headers(call)
        # a server-side ?wait holds the answer back: the read timeout has to cover it
        timeout = self.timeout + (call.wait or 0.0)
        attempt = 0
        while True:
            try:
                response = await self._http.request(
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
                await response.aclose()
            attempt += 1
            await asyncio.sleep(delay)

    async def _write(self, call: Call[Operation], wait: Wait) -> Operation:
        deadline = Deadline(_core.wait_seconds(wait))
        op = await self._run(call)
        if not op.finished and deadline.remaining() > 0:
            op = await self._poll(op, deadline, fail=False)
        return op

    async def _poll(self, op: Operation, deadline: Deadline, *, fail: bool) -> Operation:
        attempt = 0
        while not op.finished:
            left = deadline.remaining()
            if left <= 0:
                if fail:
                    raise OperationTimeout(f"operation {op.operation_id} is still {op.status}", operation=op)
                return op
            await asyncio.sleep(min(_core.poll_interval(attempt), left))
            attempt += 1
            op = await self._run(_core.operation(op.operation_id))
        return op

    # -- captures -----------------------------------------------------------------------

    async def capture(
        self, capture: Capture, *, wait: Wait = None, idempotency_key: str | None = None
    ) -> Operation:
        """``POST /v1/captures``: remember one thing; the operation names its record ids."""
        return await self._write(_core.capture(capture, wait, idempotency_key), wait)

    async def capture_many(
        self, captures: Iterable[Capture], *, wait: Wait = None, idempotency_key: str | None = None
    ) -> list[Operation]:
        """``POST /v1/captures:batch`` in chunks of 1,000, as :meth:`Client.capture_many`."""
        key = idempotency_key or _core.new_key()
        deadline = Deadline(_core.wait_seconds(wait))
        ops: list[Operation] = []
        for index, _, items in chunks(captures, _core.MAX_BATCH):
            call = _core.capture_batch(items, deadline.remaining(), _core.chunk_key(key, index))
            chunk: list[Operation] = await self._run(call)
            ops.extend(chunk)
        return [await self._poll(op, deadline, fail=False) for op in ops]

    async def ingest(
        self,
        iterable: Iterable[Capture] | AsyncIterable[Capture],
        *,
        batch: int = 1000,
        concurrency: int = 4,
        on_progress: Callable[[IngestProgress], Any] | None = None,
        idempotency_key: str | None = None,
        wait: bool | float = False,
    ) -> IngestResult:
        """:meth:`Client.ingest` with tasks instead of threads; ``iterable`` may be async."""
        check_arguments(batch, concurrency, _core.MAX_BATCH)
        key = idempotency_key or _core.new_key()
        seconds = DEFAULT_INGEST_WAIT if wait is True else float(wait)
        tally = Tally(on_progress)
        pending: set[asyncio.Task[list[IngestItem]]] = set()
        try:
            async for index, start, items in achunks(iterable, batch):
                # this chunk is read while `concurrency` are in flight; it waits for a free slot
                while len(pending) >= concurrency:
                    done, pending = await asyncio.wait(pending, return_when=asyncio.FIRST_COMPLETED)
                    for task in done:
                        tally.add(task.result())
                pending.add(
                    asyncio.ensure_future(
                        self._ingest_chunk(_core.chunk_key(key, index), start, items, seconds)
                    )
                )
            if pending:
                done, pending = await asyncio.wait(pending)
                for task in done:
                    tally.add(task.result())
        finally:
            # the input failed or the caller was cancelled: stop the chunks still in flight
            for task in pending:
                task.cancel()
            if pending:
                await asyncio.gather(*pending, return_exceptions=True)
        return tally.result()

    async def _ingest_chunk(self, key: str, start: int, items: list[Any], seconds: float) -> list[IngestItem]:
        deadline = Deadline(seconds)
        try:
            ops = await self._run(_core.capture_batch(items, seconds or None, key))
            # resending the chunk under its key returns the same operations (RFC 9.2) and
            # waits for them on the server: one request per 30 s instead of one per capture
            while unfinished(ops) and deadline.remaining() > 0:
                ops = await self._run(_core.capture_batch(items, deadline.remaining(), key))
        except MembraneError as exc:
            return failed_items(start, len(items), exc)
        return from_operations(start, len(items), ops)

    # -- reads --------------------------------------------------------------------------

    async def get(
        self, record_id: Id, *, as_of: datetime | str | None = None, valid_at: datetime | str | None = None
    ) -> Record:
        """``GET /v1/records/{id}``: the record, marked with its status; bitemporal."""
        return await self._run(_core.get(record_id, as_of, valid_at))

    async def audit(self, record_id: Id) -> AuditHistory:
        """``GET /v1/records/{id}/audit``: the hash-chained history, also after deletion."""
        return await self._run(_core.audit(record_id))

    async def retrieve(
        self,
        query: str | None = None,
        *,
        scopes: Iterable[str] | None = None,
        limit: int = 10,
        expand: int | Mapping[str, Any] | ExpandOptions | None = None,
        include_proposed: bool = False,
        **filters: Any,
    ) -> RetrieveResult:
        """``POST /v1/retrieve``; ``filters`` are the other fields of the request;
        ``include_proposed`` as :meth:`Client.retrieve` (RFC 5.7)."""
        return await self._run(_core.retrieve(query, scopes, limit, expand, filters, include_proposed))

    async def metrics(self) -> Metrics:
        """``GET /v1/metrics``."""
        return await self._run(_core.metrics())

    async def operation(self, operation_id: Id) -> Operation:
        """``GET /v1/operations/{id}``."""
        return await self._run(_core.operation(operation_id))

    async def wait(self, operation_or_id: Operation | Id, timeout: float = 30.0) -> Operation:
        """The operation once it has succeeded or failed, as :meth:`Client.wait`."""
        if isinstance(operation_or_id, Operation) and operation_or_id.finished:
            return operation_or_id
        deadline = Deadline(timeout)
        first = _core.operation(_core.operation_id_of(operation_or_id), wait=timeout)
        return await self._poll(await self._run(first), deadline, fail=True)

    # -- lists (RFC 10.7) -------------------------------------------------------------

    async def _pages(self, call: Call[P]) -> AsyncIterator[P]:
        """Every page from ``call``'s on, each fetched as the one before is used up."""
        page_call: Call[P] | None = call
        while page_call is not None:
            page = await self._run(page_call)
            yield page
            page_call = _core.next_page(page_call, page)

    async def list_records(self, **filters: Unpack[RecordFilters]) -> RecordPage:
        """``GET /v1/records``: one page of records, as :meth:`Client.list_records`."""
        return await self._run(_core.list_records(filters))

    def iter_records(self, **filters: Unpack[RecordFilters]) -> AsyncIterator[Record]:
        """Every record :meth:`list_records` matches, page after page: ``async for``."""
        pages = self._pages(_core.list_records(filters))  # built now: a bad filter raises here
        return _each(pages, lambda page: page.records)

    async def lineage(self, record_id: Id, *, as_of: datetime | str | None = None) -> Lineage:
        """``GET /v1/records/{id}/lineage``: the correction chain around a record."""
        return await self._run(_core.lineage(record_id, as_of))

    async def list_operations(self, **filters: Unpack[OperationFilters]) -> OperationPage:
        """``GET /v1/operations``: one page of operations, as :meth:`Client.list_operations`."""
        return await self._run(_core.list_operations(filters))

    def iter_operations(self, **filters: Unpack[OperationFilters]) -> AsyncIterator[OperationSummary]:
        """Every operation :meth:`list_operations` matches, page after page: ``async for``."""
        return _each(self._pages(_core.list_operations(filters)), lambda page: page.operations)

    async def list_scopes(self) -> ScopeList:
        """``GET /v1/scopes``: the scopes the caller may read, with the records it sees in each."""
        return await self._run(_core.list_scopes())

    # -- revisions ----------------------------------------------------------------------

    async def supersede(
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
        return await self._write(
            _core.supersede(record_id, record, rationale, evidence, wait, idempotency_key), wait
        )

    async def fork(
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
        return await self._write(
            _core.fork(record_id, record, rationale, condition, evidence, wait, idempotency_key), wait
        )

    async def merge(
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
        return await self._write(
            _core.merge(record_ids, record, rationale, evidence, wait, idempotency_key), wait
        )

    async def retract(
        self, record_id: Id, rationale: str, *, wait: Wait = None, idempotency_key: str | None = None
    ) -> Operation:
        """Retract a record."""
        return await self._write(_core.retract(record_id, rationale, wait, idempotency_key), wait)

    async def contest(
        self,
        record_id: Id,
        rationale: str,
        *,
        contesting_record_id: Id | None = None,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Mark a record contested, optionally by another record."""
        return await self._write(
            _core.contest(record_id, rationale, contesting_record_id, wait, idempotency_key), wait
        )

    async def reinforce(
        self,
        record_id: Id,
        rationale: str | None = None,
        *,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Reinforce a record's salience."""
        return await self._write(_core.reinforce(record_id, rationale, wait, idempotency_key), wait)

    async def penalize(
        self,
        record_id: Id,
        amount: float | None = None,
        rationale: str | None = None,
        *,
        wait: Wait = None,
        idempotency_key: str | None = None,
    ) -> Operation:
        """Remove ``amount`` of a record's salience (the server's default when ``None``)."""
        return await self._write(_core.penalize(record_id, amount, rationale, wait, idempotency_key), wait)

    # -- operators ------------------------------------------------------------------------

    async def run_maintenance(
        self, jobs: Iterable[str], *, wait: Wait = None, idempotency_key: str | None = None
    ) -> Operation:
        """Run one batch of each maintenance job now."""
        return await self._write(_core.maintenance(jobs, wait, idempotency_key), wait)

    async def work(self, **filters: Unpack[WorkFilters]) -> WorkOverview:
        """``GET /v1/work``: the backlog of each job and a page of buried items."""
        return await self._run(_core.work(filters))

    async def requeue_work(self, ids: Iterable[int], rationale: str | None = None) -> RequeueResult:
        """``POST /v1/work:requeue``: put buried items back, due now."""
        return await self._run(_core.requeue_work(ids, rationale))

    # -- review (RFC 5.7) ---------------------------------------------------------------

    async def review_queue(
        self,
        scopes: Iterable[str] | str | None = None,
        order: ReviewOrder = "age",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> ReviewPage:
        """``GET /v1/review`` (reviewer keys): one page of the queue, as
        :meth:`Client.review_queue` (RFC 5.7)."""
        return await self._run(_core.review_queue(scopes, order, limit, cursor))

    def iter_review(
        self,
        scopes: Iterable[str] | str | None = None,
        order: ReviewOrder = "age",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> AsyncIterator[ReviewEntry]:
        """Every entry of :meth:`review_queue`, page after page: ``async for`` (RFC 5.7)."""
        pages = self._pages(_core.review_queue(scopes, order, limit, cursor))
        return _each(pages, lambda page: page.entries)

    async def decide(self, decisions: Iterable[DecisionInput]) -> DecideResult:
        """``POST /v1/review:decide`` (reviewer keys): as :meth:`Client.decide` (RFC 5.7)."""
        return await self._run(_core.decide(decisions))

    async def approve(
        self, proposal_id: Id, *, mode: ApprovalMode | None = None, rationale: str | None = None
    ) -> DecisionResult:
        """Approve a proposal, as :meth:`Client.approve`; a refusal raises (RFC 5.7)."""
        body = _core.decision(proposal_id, "approve", mode=mode, rationale=rationale)
        return _core.only(await self.decide([body]))

    async def reject(self, proposal_id: Id, *, rationale: str | None = None) -> DecisionResult:
        """Reject a proposal, as :meth:`Client.reject`; a refusal raises (RFC 5.7)."""
        return _core.only(await self.decide([_core.decision(proposal_id, "reject", rationale=rationale)]))

    async def amend(
        self,
        proposal_id: Id,
        record: Revised,
        *,
        rationale: str | None = None,
        evidence: Evidence = None,
    ) -> DecisionResult:
        """Amend a proposal with the reviewer's version of its fact, as :meth:`Client.amend`;
        a refusal raises (RFC 5.7)."""
        body = _core.decision(proposal_id, "amend", record=record, rationale=rationale, evidence=evidence)
        return _core.only(await self.decide([body]))

    # -- moving and forgetting (RFC 15) -------------------------------------------------

    async def export(self, target: str | os.PathLike[str], **filters: Unpack[ExportFilters]) -> Path:
        """``GET /v1/export``: the records the key sees, with their history, corrections and
        audit, streamed into the tar file ``target`` (RFC 15.1); returns its path. A refusal
        raises the exception of its code before anything is written; a download cut short
        leaves no file."""
        path = Path(target)
        params = _core.export_params(filters)
        part = path.with_name(path.name + ".part")
        async with self._http.stream(
            "GET", _core.ENDPOINTS["export"][1], params=params, timeout=None
        ) as response:
            if not response.is_success:
                await response.aread()
                _core.parse(_core.Call("GET", "/v1/export", bytes), response)
            with part.open("wb") as out:
                async for block in response.aiter_bytes():
                    out.write(block)
        part.replace(path)
        return path

    async def import_bundle(
        self, source: str | os.PathLike[str], *, on_conflict: OnConflict = "skip"
    ) -> ImportReport:
        """``POST /v1/import`` (operator keys): the bundle's tar at ``source``, checked whole
        before anything is written; ids the store holds are skipped, overwritten where they
        differ, or refuse the import (``on_conflict``, RFC 15.2)."""
        return await self._run(_core.import_bundle(Path(source).read_bytes(), on_conflict))

    async def erase(
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
        return await self._run(_core.erase(_core.erase_body(reason, scope, entity, records, confirm)))
