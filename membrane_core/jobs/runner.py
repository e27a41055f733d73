"""The one batch runner every background job uses (RFC 9.4).

A run claims at most ``limit`` due items of the handler's kind under a lease, lets the
handler prepare them outside any transaction (a provider call), then applies them in one
transaction that locks only the items the runner still holds: an item whose lease
lapsed is left to the worker that took it over. If the batch fails, each item is
applied alone, so one bad item holds back nobody. A failed item is retried after
``retry_at`` and buried after ``MAX_ATTEMPTS`` attempts. An outage of the database
(``Unavailable``) fails nothing: the runner gives its claims back as soon as Postgres
answers, the attempt not counted, and propagates the outage; any other failure that escapes
a batch counts as a failed attempt of its items before it propagates.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol, TypeVar

from membrane_core import errors
from membrane_core.clock import Clock
from membrane_core.enums import WorkKind
from membrane_core.providers.base import ProviderError
from membrane_core.storage.workqueue import MAX_ATTEMPTS, WorkItem

log = logging.getLogger(__name__)

__all__ = ["MAX_ATTEMPTS", "BatchRunner", "Handler", "Outcome", "WorkStore", "retry_at"]

#: RFC 9.4: the first retry waits this long; each later one twice as long as the last.
FIRST_RETRY_SECONDS = 5
#: RFC 9.4: no retry waits longer than this.
MAX_RETRY_SECONDS = 3600
#: RFC 9.4: after an outage the runner gives its claims back at once, else after each of
#: these pauses (7.5 s in all); what it still holds then, its next batch gives back first.
RELEASE_PAUSES = (0.5, 1.0, 2.0, 4.0)

P = TypeVar("P")


def retry_at(now: datetime, attempts: int) -> datetime:
    """RFC 9.4: when an item that failed its ``attempts``-th attempt is due again."""
    wait = FIRST_RETRY_SECONDS * 2 ** max(0, attempts - 1)
    return now + timedelta(seconds=min(MAX_RETRY_SECONDS, wait))


@dataclass
class Outcome:
    """What a handler decided for the items it was given.

    ``done`` items are completed (deleted), ``later`` ones released with a new due time
    and their attempts reset; items in neither are released as they are.
    """

    done: list[int] = field(default_factory=list)
    later: list[tuple[int, datetime]] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)


class Handler(Protocol[P]):
    """One job's work on a batch of items (RFC 9.4)."""

    kind: WorkKind

    def prepare(self, items: Sequence[WorkItem]) -> P:
        """Work done outside a transaction (a provider call); ``ProviderError`` fails the batch."""
        ...

    def apply(self, conn: Any, held: dict[int, uuid.UUID], prepared: P, now: datetime) -> Outcome:
        """Write the results for the ``held`` items in the caller's transaction."""
        ...


class WorkStore(Protocol):
    """The work-item queue as the runner uses it; ``storage.workqueue.WorkQueue``."""

    def claim(
        self, kind: WorkKind, *, owner: str, limit: int, now: datetime, lease_seconds: int
    ) -> list[WorkItem]: ...

    def apply(
        self, ids: Sequence[int], *, owner: str, work: Callable[[Any, dict[int, uuid.UUID]], Outcome]
    ) -> tuple[Outcome, int]:
        """In one transaction: lock the items ``owner`` holds, run ``work`` on them,
        complete its ``done`` and reschedule its ``later``; returns it and how many were held."""
        ...

    def fail(
        self, again: Sequence[tuple[int, datetime, str]], dead: Sequence[tuple[int, str]], *, owner: str
    ) -> None:
        """Release ``again`` items with a due time and an error; mark ``dead`` items dead."""
        ...

    def release(self, ids: Sequence[int], *, owner: str) -> int:
        """Give back what ``owner`` still holds of ``ids`` as it was, the claim's attempt not counted."""
        ...


class BatchRunner:
    """Runs handlers' batches against a :class:`WorkStore` (RFC 9.4)."""

    def __init__(
        self,
        store: WorkStore,
        *,
        clock: Clock,
        owner: Callable[[], str],
        lease_seconds: int,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self._store = store
        self._clock = clock
        self._owner = owner
        self._lease = lease_seconds
        self._sleep = sleep
        #: Claims an outage kept this runner from giving back: ``(owner, item ids)``.
        self._unreleased: list[tuple[str, list[int]]] = []

    def run(self, handler: Handler[Any], limit: int) -> dict[str, Any]:
        """RFC 9.4: one bounded batch of ``handler``'s kind; a summary of counters.

        ``Unavailable`` fails nothing: the claims go back (:meth:`_give_back`) and the outage
        propagates. Any other exception that escapes the batch counts as a failed attempt of
        the items it still holds, then propagates.
        """
        self._release_left()
        owner, now = self._owner(), self._clock()
        items = self._store.claim(handler.kind, owner=owner, limit=limit, now=now, lease_seconds=self._lease)
        if not items:
            return {"claimed": 0}
        try:
            return self._batch(handler, items, owner)
        except errors.Unavailable:
            self._give_back(items, owner, RELEASE_PAUSES)
            raise
        except Exception as exc:  # unforeseen (a handler's bug, a task's time limit): it backs off
            try:
                self._fail(items, f"{type(exc).__name__}: {exc}", owner)
            except errors.Unavailable:
                self._give_back(items, owner, RELEASE_PAUSES)
            raise
        except BaseException:  # the process is stopping: one try, no waiting
            self._give_back(items, owner, ())
            raise

    def _release_left(self) -> None:
        """RFC 9.4: give back what an outage kept earlier batches from giving back, before
        claiming anew; while Postgres is still down the outage propagates from here."""
        while self._unreleased:
            held_by, ids = self._unreleased[0]
            self._store.release(ids, owner=held_by)
            self._unreleased.pop(0)

    def _batch(self, handler: Handler[Any], items: Sequence[WorkItem], owner: str) -> dict[str, Any]:
        stats: Counter[str] = Counter(claimed=len(items))
        try:
            prepared = handler.prepare(items)
        except ProviderError as exc:  # the provider failed the whole batch: it waits
            log.warning("%s batch failed: %s", handler.kind.value, exc)
            stats.update(self._fail(items, str(exc), owner))
            return {**stats, "error": str(exc)}
        try:
            stats.update(self._apply(handler, items, prepared, owner))
        except errors.Unavailable:
            raise
        except Exception:  # one bad item must not hold back the rest: retry them one by one
            log.warning(
                "%s batch failed; retrying item by item",
                handler.kind.value,
                extra={"kind": handler.kind.value, "items": len(items)},
                exc_info=True,
            )
            stats["batch_retried"] += 1
            for item in items:
                stats.update(self._one(handler, item, prepared, owner))
        return dict(stats)

    def _apply(
        self, handler: Handler[Any], items: Sequence[WorkItem], prepared: Any, owner: str
    ) -> Counter[str]:
        now = self._clock()

        def work(conn: Any, held: dict[int, uuid.UUID]) -> Outcome:
            return handler.apply(conn, held, prepared, now)

        out, held = self._store.apply([i.id for i in items], owner=owner, work=work)
        out.stats.update(held=held)
        if held < len(items):  # claims lost to another worker after a lapsed lease
            out.stats.update(lost=len(items) - held)
        return out.stats

    def _one(self, handler: Handler[Any], item: WorkItem, prepared: Any, owner: str) -> Counter[str]:
        try:
            return self._apply(handler, [item], prepared, owner)
        except errors.Unavailable:
            raise
        except Exception as exc:
            log.warning(
                "%s item failed",
                handler.kind.value,
                exc_info=True,
                extra={"kind": handler.kind.value, "target_id": str(item.target_id)},
            )
            return Counter(failed=1) + self._fail([item], f"{type(exc).__name__}: {exc}", owner)

    def _give_back(self, items: Sequence[WorkItem], owner: str, pauses: Sequence[float]) -> None:
        """RFC 9.4: release the claims ``owner`` still holds of ``items``, the attempt not counted,
        once Postgres answers: now, else after each of ``pauses``; else at the next batch."""
        ids = [it.id for it in items]
        for pause in (0.0, *pauses):
            if pause:
                self._sleep(pause)
            try:
                given = self._store.release(ids, owner=owner)
            except errors.Unavailable:
                continue
            except Exception:  # never hide the failure that brought the runner here
                log.warning("claims not given back; they expire", exc_info=True, extra={"items": len(ids)})
                return
            log.info("claims given back", extra={"items": given, "claimed": len(ids)})
            return
        self._unreleased.append((owner, ids))
        log.warning(
            "Postgres did not answer; the claims go back at the next batch or expire",
            extra={"items": len(ids)},
        )

    def _fail(self, items: Sequence[WorkItem], error: str, owner: str) -> Counter[str]:
        now, error = self._clock(), error[:2000]
        dead = [(it.id, error) for it in items if it.attempts >= MAX_ATTEMPTS]
        again = [(it.id, retry_at(now, it.attempts), error) for it in items if it.attempts < MAX_ATTEMPTS]
        self._store.fail(again, dead, owner=owner)
        return Counter(rescheduled=len(again), dead=len(dead))
