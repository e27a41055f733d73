"""Running a background job by its name: one bounded batch, or batches until drained (RFC 6.5).

Each job claims at most ``limit`` due items of its kind (``SKIP LOCKED``), handles
them with a constant number of set-based statements in one transaction and
completes or reschedules them in that same transaction (:mod:`membrane_core.jobs.runner`).
Its cost follows the work that is due, never the size of the store. Beat only
triggers ``run`` and ``drain`` (RFC 6.5).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, Protocol

from membrane_core import errors
from membrane_core.clock import Clock
from membrane_core.enums import Job
from membrane_core.jobs.compress import CompressHandler
from membrane_core.jobs.consolidate import ConsolidateHandler
from membrane_core.jobs.decay import DecayHandler
from membrane_core.jobs.prune import ACTOR, PruneHandler
from membrane_core.jobs.runner import BatchRunner, Handler
from membrane_core.jobs.seal import SealHandler
from membrane_core.policy import Policy
from membrane_core.storage.db import Database
from membrane_core.storage.records import WorkOptions
from membrane_core.storage.workqueue import WorkQueue, worker_name

__all__ = ["BatchService", "Maintenance"]


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
    """A job with its own provider and batches: embedding, extraction (RFC 6.4.4)."""

    def run_batch(self, limit: int | None = None) -> dict[str, Any]: ...


class Maintenance:
    """Runs one bounded batch of a job now, or batches until it is drained (RFC 6.5)."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock,
        policy: Policy,
        work: WorkOptions,
        batch_size: int,
        lease_seconds: int,
        embedding: BatchService | None = None,
        extraction: BatchService | None = None,
        owner: Callable[[], str] | None = None,
    ) -> None:
        self._batch_size = batch_size
        self.owner = owner() if owner else f"{ACTOR}:{worker_name()}"
        self._runner = BatchRunner(
            WorkQueue(db), clock=clock, owner=lambda: self.owner, lease_seconds=lease_seconds
        )
        self._handlers: dict[Job, Handler[Any]] = {
            Job.DECAY: DecayHandler(),
            Job.PRUNE: PruneHandler(),
            Job.COMPRESS: CompressHandler(after=work.compress_after),
            Job.CONSOLIDATE: ConsolidateHandler(
                policy=policy, embed=work.embed, sealer=work.sealer, embed_sealed=work.embed_sealed
            ),
            Job.SEAL: SealHandler(work.sealer),
        }
        self._services = {Job.EMBED: ("embedding", embedding), Job.EXTRACT: ("extraction", extraction)}

    def run(self, job: Job | str, *, limit: int | None = None) -> dict[str, Any]:
        """RFC 6.5: one batch of ``job`` (a :class:`~membrane_core.enums.Job`).

        ``consolidate`` runs episodic compression and then the consolidation stages;
        ``embed`` and ``extract`` delegate to the embedding and extraction services.
        """
        try:
            name = Job(job)
        except ValueError:
            raise errors.InvalidInput(
                f"unknown maintenance job {job!r}",
                details=[{"field": "job", "message": f"one of {', '.join(Job)}", "type": "value_error"}],
            ) from None
        n = limit or self._batch_size
        if n < 1:
            raise errors.InvalidInput(
                "limit must be at least 1",
                details=[{"field": "limit", "message": "must be >= 1", "type": "value_error"}],
            )
        if name is Job.CONSOLIDATE:
            return {
                "compress": self._runner.run(self._handlers[Job.COMPRESS], n),
                "consolidate": self._runner.run(self._handlers[Job.CONSOLIDATE], n),
            }
        if name in self._services:
            label, service = self._services[name]
            if service is None:
                return {"skipped": f"no {label} service configured"}
            return dict(service.run_batch(n))
        return self._runner.run(self._handlers[name], n)

    def drain(
        self, job: Job | str, *, limit: int | None = None, budget_seconds: float = 20.0
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
