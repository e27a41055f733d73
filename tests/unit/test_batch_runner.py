"""The batch runner's claim, retry, bury, fallback and lost-claim paths (RFC 9.4), in memory."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from membrane_core import errors
from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import MAX_ATTEMPTS, BatchRunner, Outcome, retry_at
from membrane_core.providers.base import ProviderError
from membrane_core.storage.workqueue import WorkItem
from membrane_core.testing import FakeClock, MemoryWorkQueue


class Recorder:
    """A handler that completes what it holds, failing on demand."""

    kind = WorkKind.EMBED

    def __init__(self) -> None:
        self.prepare_error: Exception | None = None
        self.poison: set[uuid.UUID] = set()
        self.apply_error: Exception | None = None
        self.seen: list[list[uuid.UUID]] = []

    def prepare(self, items: Sequence[WorkItem]) -> str:
        if self.prepare_error is not None:
            raise self.prepare_error
        return "prepared"

    def apply(self, conn: Any, held: dict[int, uuid.UUID], prepared: str, now: datetime) -> Outcome:
        assert prepared == "prepared"
        self.seen.append(sorted(held.values()))
        if self.apply_error is not None:
            raise self.apply_error
        if self.poison & set(held.values()):
            raise ValueError("poison")
        out = Outcome(done=list(held))
        out.stats.update(done=len(held))
        return out


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def queue(clock: FakeClock) -> MemoryWorkQueue:
    return MemoryWorkQueue(clock)


def runner(queue: MemoryWorkQueue, clock: FakeClock, owner: str = "w") -> BatchRunner:
    return BatchRunner(queue, clock=clock, owner=lambda: owner, lease_seconds=60)


def test_a_batch_completes_what_it_holds(queue: MemoryWorkQueue, clock: FakeClock) -> None:
    ids = [queue.add(WorkKind.EMBED) for _ in range(3)]
    other = queue.add(WorkKind.DECAY)  # another kind is not claimed
    later = queue.add(WorkKind.EMBED, due_at=clock() + timedelta(hours=1))  # nor what is not due
    out = runner(queue, clock).run(Recorder(), limit=10)
    assert out == {"claimed": 3, "held": 3, "done": 3}
    assert sorted(queue.completed) == ids
    assert set(queue.items) == {other, later}


def test_the_limit_bounds_a_batch(queue: MemoryWorkQueue, clock: FakeClock) -> None:
    for _ in range(5):
        queue.add(WorkKind.EMBED)
    assert runner(queue, clock).run(Recorder(), limit=2)["claimed"] == 2
    assert len(queue.items) == 3


def test_a_failed_batch_waits_with_a_doubling_backoff(queue: MemoryWorkQueue, clock: FakeClock) -> None:
    item = queue.add(WorkKind.EMBED)
    handler = Recorder()
    handler.prepare_error = ProviderError("HTTP 503")
    run = runner(queue, clock)
    first = run.run(handler, limit=10)
    assert first["rescheduled"] == 1 and "HTTP 503" in first["error"]
    assert queue.items[item].due_at == clock() + timedelta(seconds=5)
    assert queue.items[item].last_error == "HTTP 503"
    assert run.run(handler, limit=10) == {"claimed": 0}  # backing off
    clock.advance(seconds=5)
    assert run.run(handler, limit=10)["rescheduled"] == 1  # second failure: twice as long
    assert queue.items[item].due_at == clock() + timedelta(seconds=10)
    clock.advance(seconds=10)
    handler.prepare_error = None
    assert run.run(handler, limit=10)["done"] == 1
    assert queue.completed == [item]


def test_backoff_doubles_up_to_an_hour() -> None:
    now = FakeClock()()
    waits = [(retry_at(now, n) - now).total_seconds() for n in (1, 2, 3, 12, 40)]
    assert waits == [5, 10, 20, 3600, 3600]


def test_an_item_is_buried_after_its_last_attempt(queue: MemoryWorkQueue, clock: FakeClock) -> None:
    item = queue.add(WorkKind.EMBED)
    handler = Recorder()
    handler.prepare_error = ProviderError("down")
    run = runner(queue, clock)
    outcomes = []
    for _ in range(MAX_ATTEMPTS):
        outcomes.append(run.run(handler, limit=10))
        clock.advance(hours=2)
    assert [o.get("rescheduled", 0) for o in outcomes] == [1] * (MAX_ATTEMPTS - 1) + [0]
    assert outcomes[-1]["dead"] == 1
    assert queue.items[item].dead
    fresh = queue.add(WorkKind.EMBED)  # positive control: a live item is still claimed
    assert run.run(handler, limit=10)["claimed"] == 1
    assert not queue.items[fresh].dead


def test_one_bad_item_fails_alone(queue: MemoryWorkQueue, clock: FakeClock) -> None:
    ids = [queue.add(WorkKind.EMBED) for _ in range(4)]
    bad = queue.items[ids[1]].target_id
    handler = Recorder()
    handler.poison = {bad}
    out = runner(queue, clock).run(handler, limit=10)
    assert out["batch_retried"] == 1 and out["failed"] == 1 and out["rescheduled"] == 1
    assert out["done"] == 3
    assert sorted(queue.completed) == [ids[0], ids[2], ids[3]]
    assert set(queue.items) == {ids[1]}
    assert "ValueError: poison" in (queue.items[ids[1]].last_error or "")
    # the whole batch first, then each item alone
    assert len(handler.seen) == 5 and len(handler.seen[0]) == 4
    assert all(len(one) == 1 for one in handler.seen[1:])


def test_a_lost_claim_is_neither_written_nor_failed(queue: MemoryWorkQueue, clock: FakeClock) -> None:
    mine, stolen = queue.add(WorkKind.EMBED), queue.add(WorkKind.EMBED)
    kept_target = queue.items[mine].target_id

    class Slow(Recorder):
        def prepare(self, items: Sequence[WorkItem]) -> str:
            # while this worker calls its provider, its lease on one item lapses and
            # another worker claims that item
            queue.items[stolen].claim_expires_at = clock() - timedelta(seconds=1)
            assert (
                queue.claim(WorkKind.EMBED, owner="other", limit=1, now=clock(), lease_seconds=60)[0].id
                == stolen
            )
            return super().prepare(items)

    handler = Slow()
    out = runner(queue, clock).run(handler, limit=10)
    assert out["claimed"] == 2 and out["held"] == 1 and out["lost"] == 1
    assert handler.seen == [[kept_target]]  # only what it still held
    assert queue.completed == [mine]
    assert queue.items[stolen].claimed_by == "other"  # the other worker's claim is untouched
    assert queue.items[stolen].last_error is None and not queue.items[stolen].dead


def test_an_outage_fails_nothing(queue: MemoryWorkQueue, clock: FakeClock) -> None:
    item = queue.add(WorkKind.EMBED)
    handler = Recorder()
    handler.apply_error = errors.Unavailable("postgres is down")
    with pytest.raises(errors.Unavailable):
        runner(queue, clock).run(handler, limit=10)
    kept = queue.items[item]
    assert not kept.dead and kept.last_error is None
    assert kept.claimed_by is None and kept.attempts == 0  # given back, the outage not counted
