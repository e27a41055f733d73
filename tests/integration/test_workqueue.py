from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta
from typing import Any

import pytest

from membrane_core import errors
from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import BatchRunner, Outcome
from membrane_core.storage import workqueue
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock


def seed(db: Database, n: int, clock: FakeClock, *, due_in: float = 0) -> list[uuid.UUID]:
    ids = [uuid.uuid4() for _ in range(n)]
    with db.transaction() as conn:
        conn.execute(
            "INSERT INTO work_items (kind, target_id, due_at)"
            " SELECT 'embed', t, %s FROM unnest(%s::uuid[]) t",
            (clock() + timedelta(seconds=due_in), ids),
        )
    return ids


def test_concurrent_claims_do_not_overlap(db: Database, clock: FakeClock) -> None:
    seed(db, 10, clock)
    with db.transaction() as a, db.transaction() as b:
        first = workqueue.claim(a, WorkKind.EMBED, owner="a", limit=6, now=clock())
        second = workqueue.claim(b, WorkKind.EMBED, owner="b", limit=6, now=clock())
    assert len(first) == 6 and len(second) == 4
    assert not {w.id for w in first} & {w.id for w in second}


def test_claim_bounded_and_only_due(db: Database, clock: FakeClock) -> None:
    seed(db, 5, clock)
    later = seed(db, 5, clock, due_in=3600)
    with db.transaction() as conn:
        got = workqueue.claim(conn, WorkKind.EMBED, owner="w", limit=100, now=clock())
    assert len(got) == 5 and not {w.target_id for w in got} & set(later)


def test_expired_lease_is_reclaimed_and_stale_owner_cannot_complete(db: Database, clock: FakeClock) -> None:
    seed(db, 1, clock)
    with db.transaction() as conn:
        [item] = workqueue.claim(conn, WorkKind.EMBED, owner="dead", limit=1, now=clock(), lease_seconds=10)
    with db.transaction() as conn:
        assert workqueue.claim(conn, WorkKind.EMBED, owner="x", limit=1, now=clock()) == []
    clock.advance(seconds=11)
    with db.transaction() as conn:
        [again] = workqueue.claim(conn, WorkKind.EMBED, owner="live", limit=1, now=clock())
        assert again.id == item.id and again.attempts == 2
        assert workqueue.complete(conn, [item.id], owner="dead") == 0
        assert workqueue.complete(conn, [item.id], owner="live") == 1


def test_reschedule_bury_and_backlog(db: Database, clock: FakeClock) -> None:
    seed(db, 3, clock)
    clock.advance(seconds=30)
    with db.transaction() as conn:
        items = workqueue.claim(conn, WorkKind.EMBED, owner="w", limit=3, now=clock())
        workqueue.reschedule(conn, [(items[0].id, clock() + timedelta(hours=1), "boom")], owner="w")
        workqueue.bury(conn, [(items[1].id, "fatal")], owner="w")
    with db.transaction() as conn:
        [row] = workqueue.backlog(conn, now=clock())
    assert row["kind"] == "embed" and row["dead"] == 1 and row["pending"] == 2
    assert row["due"] == 1 and row["oldest_due_seconds"] >= 30


class _OutageInApply:
    """Writes its batch, then loses Postgres before the commit (the seam of an outage)."""

    kind = WorkKind.EMBED

    def prepare(self, items: Sequence[workqueue.WorkItem]) -> None:
        return None

    def apply(self, conn: Any, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        conn.execute("UPDATE work_items SET last_error = 'written' WHERE id = ANY(%s)", (list(held),))
        raise errors.Unavailable("Postgres is unavailable")


def test_a_batch_cut_short_by_an_outage_gives_its_claims_back_at_once(db: Database, clock: FakeClock) -> None:
    """RFC 9.4: the claims go back when the worker knows its batch failed, not a lease later."""
    targets = seed(db, 3, clock)
    run = BatchRunner(workqueue.WorkQueue(db), clock=clock, owner=lambda: "w", lease_seconds=300)
    with pytest.raises(errors.Unavailable):
        run.run(_OutageInApply(), limit=10)
    with db.transaction() as conn:
        again = workqueue.claim(conn, WorkKind.EMBED, owner="next", limit=10, now=clock())
        written = conn.execute("SELECT count(*) FROM work_items WHERE last_error IS NOT NULL").fetchone()
    assert sorted(w.target_id for w in again) == sorted(targets)
    assert [w.attempts for w in again] == [1, 1, 1]  # the outage was not an attempt
    assert written == (0,)  # the batch's transaction wrote nothing
    # control: claims nobody gives back ("next" holds them) wait out their lease
    with db.transaction() as conn:
        assert workqueue.claim(conn, WorkKind.EMBED, owner="other", limit=10, now=clock()) == []
    clock.advance(seconds=301)
    with db.transaction() as conn:
        assert len(workqueue.claim(conn, WorkKind.EMBED, owner="other", limit=10, now=clock())) == 3
