"""Maintenance batches keyed off the work queue: decay, prune, consolidation (RFC 6).

Each job claims at most ``limit`` due items of its kind (``SKIP LOCKED``), handles
them with a constant number of set-based statements in one transaction and
completes or reschedules them in that same transaction. Its cost follows the work
that is due, never the size of the store. Beat only triggers ``run`` (RFC 6.5).
"""

from __future__ import annotations

import logging
import math
import os
import socket
import time
import uuid
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any, Protocol

from membrane_core import consolidation, errors
from membrane_core.clock import Clock
from membrane_core.enums import WorkKind
from membrane_core.policy import Policy
from membrane_core.storage import maintenance as store
from membrane_core.storage import workqueue
from membrane_core.storage.db import Database
from membrane_core.storage.records import WorkOptions

log = logging.getLogger(__name__)

#: RFC 6.5: the jobs ``run`` accepts.
JOBS = ("decay", "prune", "consolidate", "compress", "embed", "extract")
#: RFC 6.4.1: episodic compression multiplies the base salience by this factor.
COMPRESSION_FACTOR = 0.5
ACTOR = "maintenance"


@dataclass
class Outcome:
    """What a handler decided for the items of one batch."""

    done: list[int] = field(default_factory=list)
    later: list[tuple[int, datetime]] = field(default_factory=list)
    stats: Counter[str] = field(default_factory=Counter)


Handler = Callable[[store.Connection, dict[int, uuid.UUID], datetime], Outcome]


def next_checkpoint(cp: store.Checkpoint, now: datetime) -> tuple[str, datetime | None]:
    """RFC 6.1: what follows a refreshed checkpoint: ``("decay", due)``, ``("prune", now)`` or
    ``("none", None)``.

    The next decay checkpoint is one half-life later, or earlier when the record
    reaches its floor or its maximum age before that; pinned records never decay.
    """
    if cp.pinned:
        return ("none", None)
    threshold = max(cp.min_salience, store.PRUNE_EPSILON)
    expires = (cp.created_at + timedelta(seconds=cp.max_age_seconds)
               if cp.max_age_seconds is not None else None)
    if cp.salience <= threshold or (expires is not None and expires <= now):
        return ("prune", now) if cp.prunable else ("none", None)
    due = [now + timedelta(seconds=cp.half_life_seconds)]
    if cp.base_salience > threshold:
        to_floor = cp.half_life_seconds * math.log2(cp.base_salience / threshold)
        due.append(cp.reinforced_at + timedelta(seconds=to_floor + 1))
    if expires is not None:
        due.append(expires)
    return ("decay", max(min(due), now + timedelta(seconds=1)))


def _claimed(result: dict[str, Any]) -> int:
    """Items a run claimed; for ``consolidate`` the larger of its two stages."""
    if "claimed" in result:
        return int(result["claimed"])
    return max((_claimed(v) for v in result.values() if isinstance(v, dict)), default=0)


def _add(total: dict[str, Any], result: dict[str, Any]) -> None:
    for key, value in result.items():
        if isinstance(value, dict):
            _add(total.setdefault(key, {}), value)
        elif isinstance(value, (int, float)) and not isinstance(value, bool):
            total[key] = total.get(key, 0) + value
        else:
            total[key] = value


class BatchService(Protocol):
    """A service that runs its own bounded batches: embedding, extraction (RFC 6.4.4)."""

    def run_batch(self, limit: int | None = None) -> dict[str, Any]: ...


class Maintenance:
    """Runs one bounded batch of a maintenance job now (RFC 6.5)."""

    def __init__(self, db: Database, *, clock: Clock, policy: Policy, work: WorkOptions,
                 batch_size: int, lease_seconds: int, embedding: BatchService | None = None,
                 extraction: BatchService | None = None) -> None:
        self._db = db
        self._clock = clock
        self._policy = policy
        self._work = work
        self._batch_size = batch_size
        self._lease = lease_seconds
        self._delegates = {"embed": ("embedding", embedding), "extract": ("extraction", extraction)}
        self.owner = f"{ACTOR}:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def run(self, job: str, *, limit: int | None = None) -> dict[str, Any]:
        """RFC 6.5: one batch of ``job`` (decay, prune, consolidate, embed, extract).

        ``consolidate`` runs episodic compression and then the consolidation stages;
        ``embed`` and ``extract`` delegate to the embedding and extraction services.
        """
        if job not in JOBS:
            raise errors.InvalidInput(
                f"unknown maintenance job {job!r}",
                details=[{"field": "job", "message": f"one of {', '.join(JOBS)}",
                          "type": "value_error"}],
            )
        n = limit or self._batch_size
        if n < 1:
            raise errors.InvalidInput("limit must be at least 1", details=[
                {"field": "limit", "message": "must be >= 1", "type": "value_error"}])
        if job == "decay":
            return self._batch(WorkKind.DECAY, n, self._decay)
        if job == "prune":
            return self._batch(WorkKind.PRUNE, n, self._prune)
        if job == "compress":
            return self._batch(WorkKind.COMPRESS, n, self._compress)
        if job == "consolidate":
            return {"compress": self._batch(WorkKind.COMPRESS, n, self._compress),
                    "consolidate": self._batch(WorkKind.CONSOLIDATE, n, self._consolidate)}
        return self._delegate(job, n)

    def drain(
        self, job: str, *, limit: int | None = None, budget_seconds: float = 20.0
    ) -> dict[str, Any]:
        """RFC 6.5: batches of ``job`` until one claims less than ``limit`` or the budget is spent.

        What a beat tick calls, so that throughput follows the backlog while every
        transaction stays one bounded batch. Returns the summed counters and ``batches``.
        """
        n = limit or self._batch_size
        deadline = time.monotonic() + budget_seconds
        total: dict[str, Any] = {}
        batches = 0
        while True:
            result = self.run(job, limit=n)
            batches += 1
            _add(total, result)
            if _claimed(result) < n or time.monotonic() >= deadline:
                return {**total, "batches": batches}

    # -- the batch runner (RFC 9.4) ---------------------------------------------

    def _batch(self, kind: WorkKind, limit: int, handler: Handler) -> dict[str, Any]:
        now = self._clock()
        with self._db.transaction() as conn:
            items = workqueue.claim(conn, kind, owner=self.owner, limit=limit, now=now,
                                    lease_seconds=self._lease)
        stats: Counter[str] = Counter(claimed=len(items))
        if not items:
            return dict(stats)
        try:
            stats.update(self._apply([i.id for i in items], now, handler))
        except errors.Unavailable:
            raise
        except Exception:  # one bad item must not hold back the rest: retry them one by one
            log.warning("maintenance batch failed; retrying item by item",
                        extra={"kind": kind.value, "items": len(items)}, exc_info=True)
            stats["batch_retried"] += 1
            for item in items:
                stats.update(self._one(item, now, handler))
        return dict(stats)

    def _apply(self, ids: list[int], now: datetime, handler: Handler) -> Counter[str]:
        with self._db.transaction() as conn:
            held = store.hold(conn, ids, owner=self.owner)
            out = handler(conn, held, now)
            workqueue.complete(conn, out.done, owner=self.owner)
            workqueue.reschedule(conn, [(i, due, None) for i, due in out.later], owner=self.owner)
        out.stats["held"] += len(held)
        return out.stats

    def _one(self, item: workqueue.WorkItem, now: datetime, handler: Handler) -> Counter[str]:
        try:
            return self._apply([item.id], now, handler)
        except errors.Unavailable:
            raise
        except Exception as exc:
            log.warning("maintenance item failed", exc_info=True,
                        extra={"kind": item.kind.value, "target_id": str(item.target_id)})
            error = f"{type(exc).__name__}: {exc}"[:2000]
            with self._db.transaction() as conn:
                if item.attempts >= workqueue.MAX_ATTEMPTS:
                    workqueue.bury(conn, [(item.id, error)], owner=self.owner)
                    return Counter(failed=1, dead=1)
                backoff = timedelta(seconds=min(3600, 30 * 2 ** item.attempts))
                workqueue.reschedule(conn, [(item.id, now + backoff, error)], owner=self.owner)
            return Counter(failed=1)

    # -- handlers -----------------------------------------------------------------

    def _decay(self, conn: store.Connection, held: dict[int, uuid.UUID], now: datetime) -> Outcome:
        """RFC 6.1: refresh the checkpoint of due records and schedule what follows."""
        out = Outcome()
        checkpoints = {c.id: c for c in store.refresh_salience(conn, sorted(set(held.values())),
                                                                 now=now)}
        prune: list[tuple[str, uuid.UUID, datetime]] = []
        for item_id, target in held.items():
            cp = checkpoints.get(target)
            action, due = ("none", None) if cp is None else next_checkpoint(cp, now)
            if action == "decay" and due is not None:
                out.later.append((item_id, due))
            else:
                out.done.append(item_id)
                if action == "prune":
                    prune.append((WorkKind.PRUNE.value, target, now))
        store.schedule(conn, prune)
        out.stats.update(refreshed=len(checkpoints), rescheduled=len(out.later),
                         prune_scheduled=len(prune))
        return out

    def _prune(self, conn: store.Connection, held: dict[int, uuid.UUID], now: datetime) -> Outcome:
        """RFC 6.3: delete eligible records; survivors go back to the decay checkpoint."""
        targets = sorted(set(held.values()))
        deleted = store.prune(conn, targets, now=now, actor=ACTOR)
        store.schedule(conn, [(WorkKind.DECAY.value, t, now) for t in targets if t not in deleted])
        out = Outcome(done=list(held))
        out.stats.update(deleted=len(deleted), kept=len(targets) - len(deleted))
        return out

    def _compress(self, conn: store.Connection, held: dict[int, uuid.UUID], now: datetime) -> Outcome:
        """RFC 6.4.1: compress old episodic records; their decay checkpoint is re-evaluated."""
        targets = sorted(set(held.values()))
        age = int(self._work.compress_after.total_seconds())
        done = store.compress(conn, targets, now=now, actor=ACTOR, factor=COMPRESSION_FACTOR,
                              age_seconds=age)
        store.schedule(conn, [(WorkKind.DECAY.value, t, now) for t in sorted(done)])
        out = Outcome(done=list(held))
        out.stats.update(compressed=len(done))
        return out

    def _consolidate(self, conn: store.Connection, held: dict[int, uuid.UUID], now: datetime) -> Outcome:
        """RFC 6.4.2, 6.4.3: promotion, competence and plan graphs for a batch of episodes."""
        ctx = consolidation.Context(policy=self._policy, now=now, embed=self._work.embed)
        stats = consolidation.consolidate(conn, sorted(set(held.values())), ctx)
        return Outcome(done=list(held), stats=Counter(stats))

    def _delegate(self, job: str, limit: int) -> dict[str, Any]:
        """RFC 6.4.4: embedding and LLM extraction batches belong to their own services."""
        name, service = self._delegates[job]
        if service is None:
            return {"skipped": f"no {name} service configured"}
        result: dict[str, Any] = dict(service.run_batch(limit))
        return result
