"""Thin, idempotent tasks: each turns ids or a batch size into one core call (RFC 9.5).

Only transient failures (``errors.Unavailable``, ``TransientProviderError``) are
retried, with exponential backoff; everything else is recorded by the core on the
operation or work item it concerns.
"""

from __future__ import annotations

import time
from typing import Any

from celery import Task

from membrane_core import errors
from membrane_core.providers.base import TransientProviderError
from workers.app import app, membrane
from workers.dispatch import CeleryDispatcher

TRANSIENT = (errors.Unavailable, TransientProviderError)
RETRY = {
    "autoretry_for": TRANSIENT,
    "retry_backoff": 2,
    "retry_backoff_max": 120,
    "retry_jitter": True,
    "max_retries": 8,
}

dispatcher = CeleryDispatcher(app)


# Celery ships no type information: each ``@app.task`` below is an untyped decorator to mypy,
# hence its ``type: ignore[untyped-decorator]``.


def _worker(task: Task) -> str:
    return f"{task.request.hostname or 'worker'}:{task.request.id}"


@app.task(name="membrane.ingest", bind=True, **RETRY)  # type: ignore[untyped-decorator]
def ingest(self: Task, operation_ids: list[str] | None = None, drain: int | None = None) -> dict[str, int]:
    """Write capture operations exactly once, plus up to ``drain`` other queued ones."""
    m = membrane()
    more = m.settings.ingest_drain if drain is None else drain
    return m.inbox_worker.process_captures(operation_ids, worker=_worker(self), drain=more)


@app.task(name="membrane.revision", bind=True, **RETRY)  # type: ignore[untyped-decorator]
def revision(self: Task, operation_id: str) -> dict[str, Any]:
    """Apply one revision operation."""
    return membrane().inbox_worker.process_one(operation_id, worker=_worker(self))


@app.task(name="membrane.maintenance_op", bind=True, **RETRY)  # type: ignore[untyped-decorator]
def maintenance_op(self: Task, operation_id: str) -> dict[str, Any]:
    """Run one maintenance operation (``POST /v1/maintenance/run``)."""
    return membrane().inbox_worker.process_one(operation_id, worker=_worker(self))


def _continue(task: Task, summary: dict[str, Any], limit: int | None, batch: int, pause: float = 0.0) -> None:
    # A full batch means a backlog: go on without waiting for the next beat tick.
    if not summary.get("error") and summary.get("claimed", 0) >= (limit or batch):
        task.apply_async(kwargs={"limit": limit}, countdown=pause or None)


@app.task(name="membrane.embed_batch", bind=True, **RETRY)  # type: ignore[untyped-decorator]
def embed_batch(self: Task, limit: int | None = None) -> dict[str, Any]:
    """Embed one batch of records that are due; through a backlog, the next batch follows after
    a pause that keeps the pool to its share of the time (RFC 12.4)."""
    m = membrane()
    started = time.monotonic()
    summary = m.embedding.run_batch(limit)
    share = m.settings.embedding_pool_share
    pause = (time.monotonic() - started) * (1 / share - 1)
    _continue(self, summary, limit, m.settings.batch_size, pause)
    return summary


@app.task(name="membrane.extract_batch", bind=True, **RETRY)  # type: ignore[untyped-decorator]
def extract_batch(self: Task, limit: int | None = None) -> dict[str, Any]:
    """Extract facts from one batch of episodes that are due."""
    m = membrane()
    summary = m.extraction.run_batch(limit)
    _continue(self, summary, limit, min(m.settings.batch_size, 100))
    return summary


@app.task(name="membrane.maintenance_job", **RETRY)  # type: ignore[untyped-decorator]
def maintenance_job(job: str, limit: int | None = None) -> dict[str, Any]:
    """Run batches of a maintenance job until its due work is cleared or the tick's budget is spent."""
    result: dict[str, Any] = membrane().maintenance.drain(job, limit=limit)
    return result


@app.task(name="membrane.redispatch", **RETRY)  # type: ignore[untyped-decorator]
def redispatch() -> dict[str, int]:
    """Publish again the operations whose message was lost or never sent."""
    m = membrane()
    stale = m.inbox_worker.redispatch_stale(m.settings.redispatch_after_seconds)
    for kind, ids in stale.items():
        dispatcher.publish(kind, ids)
    return {kind.value: len(ids) for kind, ids in stale.items()}


@app.task(name="membrane.reap", **RETRY)  # type: ignore[untyped-decorator]
def reap() -> dict[str, int]:
    """Release work items and operations whose worker's lease ran out."""
    return membrane().inbox_worker.reap_expired()


@app.task(name="membrane.review_expiry", **RETRY)  # type: ignore[untyped-decorator]
def review_expiry(limit: int | None = None) -> dict[str, int]:
    """RFC 5.7, 6.5: reject as expired, in batches, the proposals left undecided past their TTL,
    until a batch comes back short or ``limit`` are done."""
    m = membrane()
    batch = m.settings.batch_size
    done = 0
    while limit is None or done < limit:
        n = m.review.expire(batch if limit is None else min(batch, limit - done)).expired
        done += n
        if n < batch:
            break
    return {"expired": done}


@app.task(name="membrane.purge_operations", **RETRY)  # type: ignore[untyped-decorator]
def purge_operations() -> int:
    """Forget operations finished longer ago than the retention."""
    return membrane().inbox_worker.purge_finished()
