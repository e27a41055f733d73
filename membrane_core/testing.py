"""In-memory fakes of the core's ports, for the api and worker tests and for users'.

Each port is a small Protocol (RFC 9.5 ``Dispatcher``; RFC 9.4 the batch runner's
``WorkStore``; RFC 12 ``EmbeddingProvider`` and ``TripleExtractor``); the fakes here need
no broker, network, database or model, and :class:`FakeClock` moves only when told to.
Fakes are for unit tests only: tests of queue behaviour use a real broker and real
workers.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from membrane_core.enums import OperationKind, WorkKind
from membrane_core.inbox.submit import InlineDispatcher, RecordingDispatcher
from membrane_core.jobs.runner import Outcome
from membrane_core.providers.base import Triple
from membrane_core.providers.deterministic import DeterministicExtractor, HashingEmbeddingProvider
from membrane_core.storage.workqueue import WorkItem


class FakeClock:
    """A settable clock for tests of time-dependent behaviour (a ``Clock``)."""

    def __init__(self, start: datetime | None = None) -> None:
        self.now = start or datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    def __call__(self) -> datetime:
        return self.now

    def advance(self, **kwargs: float) -> datetime:
        """Move the clock forward by ``timedelta(**kwargs)``."""
        self.now += timedelta(**kwargs)
        return self.now


@dataclass
class MemoryItem:
    """One work item of a :class:`MemoryWorkQueue`."""

    id: int
    kind: WorkKind
    target_id: uuid.UUID
    due_at: datetime
    attempts: int = 0
    claimed_by: str | None = None
    claim_expires_at: datetime | None = None
    dead: bool = False
    last_error: str | None = None


class MemoryWorkQueue:
    """The batch runner's ``WorkStore`` in memory, with the claim rules of RFC 9.4.

    ``apply`` runs its work with ``conn=None`` and, like a transaction, keeps nothing of a
    batch whose work raised.
    """

    def __init__(self, clock: Callable[[], datetime]) -> None:
        self._clock = clock
        self.items: dict[int, MemoryItem] = {}
        self.completed: list[int] = []

    def add(self, kind: WorkKind, target: uuid.UUID | None = None, *, due_at: datetime | None = None) -> int:
        """Queue one item; returns its id."""
        item_id = len(self.items) + len(self.completed) + 1
        self.items[item_id] = MemoryItem(item_id, kind, target or uuid.uuid4(), due_at or self._clock())
        return item_id

    def claim(
        self, kind: WorkKind, *, owner: str, limit: int, now: datetime, lease_seconds: int
    ) -> list[WorkItem]:
        """RFC 9.4: up to ``limit`` due, unclaimed (or lease-expired), live items of ``kind``."""
        due = sorted(
            (
                i
                for i in self.items.values()
                if i.kind is kind
                and not i.dead
                and i.due_at <= now
                and (i.claim_expires_at is None or i.claim_expires_at < now)
            ),
            key=lambda i: (i.due_at, i.id),
        )[:limit]
        for i in due:
            i.claimed_by, i.attempts = owner, i.attempts + 1
            i.claim_expires_at = now + timedelta(seconds=lease_seconds)
        return [WorkItem(i.id, i.kind, i.target_id, i.attempts, i.due_at) for i in due]

    def apply(
        self, ids: Sequence[int], *, owner: str, work: Callable[[Any, dict[int, uuid.UUID]], Outcome]
    ) -> tuple[Outcome, int]:
        """Hold ``ids`` still claimed by ``owner``, run ``work``, complete and release."""
        held = {
            i: self.items[i].target_id
            for i in sorted(ids)
            if i in self.items and self.items[i].claimed_by == owner
        }
        out = work(None, held)
        for i in out.done:
            if i in held:
                del self.items[i]
                self.completed.append(i)
        for i, due in out.later:
            if i in held:
                item = self.items[i]
                item.due_at, item.attempts, item.last_error = due, 0, None
                item.claimed_by = item.claim_expires_at = None
        return out, len(held)

    def fail(
        self, again: Sequence[tuple[int, datetime, str]], dead: Sequence[tuple[int, str]], *, owner: str
    ) -> None:
        """Release ``again`` with a due time and error; bury ``dead``."""
        for i, due, error in again:
            item = self.items[i]
            if item.claimed_by == owner:
                item.due_at, item.last_error = due, error
                item.claimed_by = item.claim_expires_at = None
        for i, error in dead:
            item = self.items[i]
            if item.claimed_by == owner:
                item.dead, item.last_error = True, error
                item.claimed_by = item.claim_expires_at = None

    def release(self, ids: Sequence[int], *, owner: str) -> int:
        """Give back what ``owner`` still holds of ``ids``, the claim's attempt not counted."""
        held = [self.items[i] for i in ids if i in self.items and self.items[i].claimed_by == owner]
        for item in held:
            item.attempts = max(0, item.attempts - 1)
            item.claimed_by = item.claim_expires_at = None
        return len(held)


class DownDispatcher:
    """A :class:`~membrane_core.inbox.submit.Dispatcher` whose broker is down (RFC 9.5).

    Every publish answers False; the operations stay queued for beat to re-dispatch.
    """

    def __init__(self) -> None:
        self.attempts: list[tuple[OperationKind, list[uuid.UUID]]] = []

    def publish(self, kind: OperationKind, operation_ids: Sequence[uuid.UUID]) -> bool:
        """Remember the attempt and report the broker unavailable (RFC 9.5)."""
        self.attempts.append((kind, list(operation_ids)))
        return False


class ScriptedExtractor:
    """A :class:`~membrane_core.providers.base.TripleExtractor` answering from a script (RFC 12.2).

    ``script`` maps a text to the triples it "contains"; any other text yields none.
    """

    name = "scripted"

    def __init__(self, script: Mapping[str, Sequence[Triple]]) -> None:
        self.script = {text: list(triples) for text, triples in script.items()}
        self.calls: list[list[str]] = []

    def extract(self, texts: Sequence[str]) -> list[list[Triple]]:
        """The scripted triples of each text (RFC 12.2)."""
        self.calls.append(list(texts))
        return [list(self.script.get(t, [])) for t in texts]


__all__ = [
    "DeterministicExtractor",
    "DownDispatcher",
    "FakeClock",
    "HashingEmbeddingProvider",
    "InlineDispatcher",
    "MemoryItem",
    "MemoryWorkQueue",
    "RecordingDispatcher",
    "ScriptedExtractor",
]
