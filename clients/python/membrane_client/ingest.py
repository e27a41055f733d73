"""Bulk ingest: chunking, per-item results and progress, shared by both clients.

The clients read the caller's iterable one chunk at a time and keep at most
``concurrency`` chunks in flight, so memory stays bounded and a slow server slows
the reader (backpressure). Each chunk goes to ``POST /v1/captures:batch`` under the
key ``f"{key}:{chunk_index}"``; a chunk resent after a failure is therefore the same
request, and the server returns the operations it already made instead of new ones.
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any
from uuid import UUID

from membrane_client.errors import MembraneError
from membrane_client.models import ErrorDetail, ErrorInfo, Operation

__all__ = ["IngestItem", "IngestProgress", "IngestResult"]

#: How long ``ingest(wait=True)`` waits for one chunk's operations, in seconds.
DEFAULT_INGEST_WAIT = 300.0


@dataclass(frozen=True, slots=True)
class IngestItem:
    """What became of one capture of an ingest, by its position in the input.

    ``status`` is the operation's (``queued``, ``running``, ``succeeded``, ``failed``);
    an item whose chunk never reached the server is ``failed`` with no operation id and
    the chunk's error (for instance ``unavailable`` after every retry).
    """

    index: int
    operation_id: UUID | None
    status: str
    error: ErrorInfo | None = None
    record_id: UUID | None = None
    #: RFC 5.7: the proposal a reviewer decides, when the capture's records were proposed
    proposal_id: UUID | None = None

    @property
    def failed(self) -> bool:
        """True when the capture was refused or could not be sent."""
        return self.status == "failed"


@dataclass(frozen=True, slots=True)
class IngestProgress:
    """Running totals, given to ``on_progress`` after each chunk."""

    chunks: int
    items: int
    succeeded: int
    failed: int
    pending: int


@dataclass(frozen=True)
class IngestResult:
    """Every capture's outcome, in input order."""

    items: list[IngestItem] = field(default_factory=list)

    @property
    def total(self) -> int:
        """How many captures were read from the input."""
        return len(self.items)

    @property
    def succeeded(self) -> int:
        """How many captures' operations succeeded."""
        return sum(1 for i in self.items if i.status == "succeeded")

    @property
    def failed(self) -> int:
        """How many captures failed (refused, or their chunk could not be sent)."""
        return sum(1 for i in self.items if i.failed)

    @property
    def pending(self) -> int:
        """How many captures are accepted but not finished (queued or running)."""
        return sum(1 for i in self.items if i.status in ("queued", "running"))

    @property
    def failures(self) -> list[IngestItem]:
        """The failed items, each with its index and reason."""
        return [i for i in self.items if i.failed]

    @property
    def operation_ids(self) -> list[UUID]:
        """The operation ids of the accepted captures, in input order."""
        return [i.operation_id for i in self.items if i.operation_id is not None]


class Tally:
    """Collects chunk results (in any order) and reports progress."""

    def __init__(self, on_progress: Callable[[IngestProgress], Any] | None) -> None:
        self._chunks: list[list[IngestItem]] = []
        self._on_progress = on_progress
        self._items = self._succeeded = self._failed = self._pending = 0

    def add(self, items: list[IngestItem]) -> None:
        """One finished chunk."""
        self._chunks.append(items)
        self._items += len(items)
        for item in items:
            if item.failed:
                self._failed += 1
            elif item.status == "succeeded":
                self._succeeded += 1
            else:
                self._pending += 1
        if self._on_progress is not None:
            self._on_progress(
                IngestProgress(len(self._chunks), self._items, self._succeeded, self._failed, self._pending)
            )

    def result(self) -> IngestResult:
        """All items in input order."""
        items = [i for chunk in self._chunks for i in chunk]
        items.sort(key=lambda i: i.index)
        return IngestResult(items)


def check_arguments(batch: int, concurrency: int, max_batch: int) -> None:
    """Refuse chunk sizes the server would refuse and a pool of no workers."""
    if not 1 <= batch <= max_batch:
        raise ValueError(f"batch must be between 1 and {max_batch}, got {batch}")
    if concurrency < 1:
        raise ValueError(f"concurrency must be at least 1, got {concurrency}")


def chunks(iterable: Iterable[Any], size: int) -> Iterator[tuple[int, int, list[Any]]]:
    """``(chunk_index, first_item_index, items)``, reading ``iterable`` lazily."""
    it = iter(iterable)
    for index in itertools.count():
        items = list(itertools.islice(it, size))
        if not items:
            return
        yield index, index * size, items


async def achunks(
    iterable: Iterable[Any] | AsyncIterable[Any],
    size: int,
) -> AsyncIterator[tuple[int, int, list[Any]]]:
    """:func:`chunks` of a sync or async iterable."""
    if not isinstance(iterable, AsyncIterable):
        for chunk in chunks(iterable, size):
            yield chunk
        return
    index, items = 0, []
    async for item in iterable:
        items.append(item)
        if len(items) == size:
            yield index, index * size, items
            index, items = index + 1, []
    if items:
        yield index, index * size, items


def from_operations(start: int, count: int, operations: Sequence[Operation]) -> list[IngestItem]:
    """Items of a chunk the server answered, one per operation in input order."""
    if len(operations) != count:
        # the answer must list one operation per capture; anything else cannot be matched
        return failed_items(
            start,
            count,
            MembraneError(
                f"the server answered {len(operations)} operations for {count} captures", code="bad_answer"
            ),
        )
    return [
        IngestItem(start + j, op.operation_id, op.status, op.error, op.record_id, op.proposal_id)
        for j, op in enumerate(operations)
    ]


def failed_items(start: int, count: int, exc: MembraneError) -> list[IngestItem]:
    """Items of a chunk that failed as a whole: each carries the chunk's error."""
    error = ErrorInfo(
        code=exc.code, message=exc.message, details=[ErrorDetail.model_validate(d) for d in exc.details]
    )
    return [IngestItem(start + j, None, "failed", error) for j in range(count)]


def unfinished(operations: Sequence[Operation]) -> bool:
    """Whether any operation is still queued or running."""
    return any(not op.finished for op in operations)
