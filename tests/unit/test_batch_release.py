"""A batch cut short gives its claims back at once (RFC 9.4), in memory.

An outage fails nothing and is not counted: the claims go back as soon as Postgres answers
(within ``RELEASE_PAUSES``, else at the runner's next batch) instead of waiting out the
lease. Any other failure that escapes a batch counts as an attempt and backs off. A claim
another worker took over after its lease lapsed stays that worker's.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from membrane_core import errors
from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import FIRST_RETRY_SECONDS, RELEASE_PAUSES, BatchRunner, Outcome
from membrane_core.storage.workqueue import WorkItem
from membrane_core.testing import FakeClock, MemoryWorkQueue

LEASE = 300


class Store(MemoryWorkQueue):
    """The in-memory queue, with Postgres down for the next ``down`` releases."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(clock)
        self.down = 0

    def release(self, ids: Sequence[int], *, owner: str) -> int:
        if self.down:
            self.down -= 1
            raise errors.Unavailable("Postgres is unavailable")
        return super().release(ids, owner=owner)


class Handler:
    """Completes what it holds unless told to fail."""

    kind = WorkKind.EMBED

    def __init__(self) -> None:
        self.prepare_error: BaseException | None = None
        self.apply_error: Exception | None = None

    def prepare(self, items: Sequence[WorkItem]) -> None:
        if self.prepare_error is not None:
            raise self.prepare_error

    def apply(self, conn: Any, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        if self.apply_error is not None:
            raise self.apply_error
        return Outcome(done=list(held))


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def store(clock: FakeClock) -> Store:
    return Store(clock)


def runner(store: Store, clock: FakeClock, slept: list[float], owner: str = "w") -> BatchRunner:
    return BatchRunner(store, clock=clock, owner=lambda: owner, lease_seconds=LEASE, sleep=slept.append)


def claimable(store: Store, clock: FakeClock) -> list[int]:
    """What another worker's claim takes now (and gives straight back)."""
    got = [w.id for w in store.claim(WorkKind.EMBED, owner="probe", limit=100, now=clock(), lease_seconds=1)]
    store.release(got, owner="probe")
    return got


def test_an_outage_gives_the_claims_back_once_postgres_answers(store: Store, clock: FakeClock) -> None:
    ids = [store.add(WorkKind.EMBED) for _ in range(3)]
    handler, slept = Handler(), list[float]()
    handler.apply_error = errors.Unavailable("Postgres is unavailable")
    store.down = 2  # Postgres answers the third try
    with pytest.raises(errors.Unavailable):
        runner(store, clock, slept).run(handler, limit=10)
    assert slept == list(RELEASE_PAUSES[:2])
    # at once, not after the lease; and the outage did not count as an attempt
    assert claimable(store, clock) == ids
    assert all(store.items[i].attempts == 0 and store.items[i].last_error is None for i in ids)
    # control: a claim nobody gives back is out of reach until its lease lapses
    store.claim(WorkKind.EMBED, owner="gone", limit=10, now=clock(), lease_seconds=LEASE)
    assert claimable(store, clock) == []
    clock.advance(seconds=LEASE + 1)
    assert claimable(store, clock) == ids


def test_claims_postgres_kept_are_given_back_by_the_next_batch(store: Store, clock: FakeClock) -> None:
    ids = [store.add(WorkKind.EMBED) for _ in range(2)]
    handler, slept = Handler(), list[float]()
    handler.apply_error = errors.Unavailable("Postgres is unavailable")
    store.down = len(RELEASE_PAUSES) + 1  # down through every pause
    run = runner(store, clock, slept)
    with pytest.raises(errors.Unavailable):
        run.run(handler, limit=10)
    assert slept == list(RELEASE_PAUSES)
    assert claimable(store, clock) == [] and all(store.items[i].claimed_by == "w" for i in ids)
    # Postgres is back: the next batch gives them back first, then claims and completes them
    handler.apply_error = None
    assert run.run(handler, limit=10) == {"claimed": 2, "held": 2}
    assert store.completed == ids
    # while it is still down, the next batch claims nothing and the outage propagates
    other = store.add(WorkKind.EMBED)
    handler.apply_error, store.down = errors.Unavailable("down"), len(RELEASE_PAUSES) + 2
    with pytest.raises(errors.Unavailable):
        run.run(handler, limit=10)
    with pytest.raises(errors.Unavailable):
        run.run(handler, limit=10)
    assert store.items[other].attempts == 1  # claimed once, by the first of the two
    assert run.run(Handler(), limit=10) == {"claimed": 1, "held": 1}


def test_an_unforeseen_failure_counts_as_an_attempt_and_backs_off(store: Store, clock: FakeClock) -> None:
    item = store.add(WorkKind.EMBED)
    handler, slept = Handler(), list[float]()
    handler.prepare_error = TypeError("a bug")
    with pytest.raises(TypeError):
        runner(store, clock, slept).run(handler, limit=10)
    kept = store.items[item]
    assert kept.claimed_by is None and kept.attempts == 1 and kept.last_error == "TypeError: a bug"
    assert kept.due_at == clock() + timedelta(seconds=FIRST_RETRY_SECONDS) and slept == []
    assert claimable(store, clock) == []  # it backs off ...
    clock.advance(seconds=FIRST_RETRY_SECONDS)
    assert claimable(store, clock) == [item]  # ... then is due again


def test_a_stopping_process_gives_its_claims_back_without_waiting(store: Store, clock: FakeClock) -> None:
    item = store.add(WorkKind.EMBED)
    handler, slept = Handler(), list[float]()
    handler.prepare_error = KeyboardInterrupt()
    with pytest.raises(KeyboardInterrupt):
        runner(store, clock, slept).run(handler, limit=10)
    assert claimable(store, clock) == [item] and store.items[item].attempts == 0 and slept == []


def test_a_claim_taken_over_after_its_lease_stays_with_the_new_owner(store: Store, clock: FakeClock) -> None:
    mine, stolen = store.add(WorkKind.EMBED), store.add(WorkKind.EMBED)

    class TakenOver(Handler):
        def prepare(self, items: Sequence[WorkItem]) -> None:
            # the provider call outlasts the lease of one item, which another worker claims
            store.items[stolen].claim_expires_at = clock() - timedelta(seconds=1)
            store.claim(WorkKind.EMBED, owner="other", limit=1, now=clock(), lease_seconds=LEASE)
            raise errors.Unavailable("Postgres is unavailable")

    with pytest.raises(errors.Unavailable):
        runner(store, clock, []).run(TakenOver(), limit=10)
    assert store.items[stolen].claimed_by == "other" and store.items[stolen].attempts == 2
    assert store.items[mine].claimed_by is None and store.items[mine].attempts == 0
