"""A batch whose write meets a Postgres outage gives its claims back once Postgres is back (RFC 9.4).

Postgres is stopped hard while the batch prepares (its provider call) and started again a
moment later; the batch's write fails, and the runner gives its claims back as soon as
Postgres answers instead of holding them for the whole lease.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

import pytest

from membrane_core import errors
from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import RELEASE_PAUSES, BatchRunner, Outcome
from membrane_core.storage import migrate, workqueue
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from tests.support.services import EMBEDDING_DIM, PrivatePostgres

pytestmark = pytest.mark.slow

LEASE = 300


class Outage:
    """Stops Postgres while it prepares and starts it again ``down_for`` seconds later."""

    kind = WorkKind.EMBED

    def __init__(self, pg: PrivatePostgres, down_for: float) -> None:
        self.pg, self.down_for = pg, down_for
        self.back: threading.Thread | None = None

    def prepare(self, items: Sequence[workqueue.WorkItem]) -> None:
        self.pg.stop_hard()
        self.back = threading.Thread(target=self._start_later)
        self.back.start()

    def _start_later(self) -> None:
        time.sleep(self.down_for)
        self.pg.start()

    def apply(self, conn: Any, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        return Outcome(done=list(held))


def test_claims_come_back_when_postgres_does(private_postgres: PrivatePostgres) -> None:
    migrate.migrate(private_postgres.dsn, EMBEDDING_DIM)
    db = Database(private_postgres.dsn, embedding_dim=EMBEDDING_DIM, timeout=5.0)
    clock = FakeClock(datetime.now().astimezone())
    try:
        with db.transaction() as conn:
            conn.execute(
                "INSERT INTO work_items (kind, target_id, due_at) SELECT 'embed', gen_random_uuid(), %s"
                "  FROM generate_series(1, 1000)",
                (clock(),),
            )
        handler = Outage(private_postgres, down_for=1.0)
        slept: list[float] = []

        def sleep(seconds: float) -> None:
            slept.append(seconds)
            time.sleep(seconds)

        run = BatchRunner(
            workqueue.WorkQueue(db), clock=clock, owner=lambda: "w", lease_seconds=LEASE, sleep=sleep
        )
        started = time.monotonic()
        with pytest.raises(errors.Unavailable):
            run.run(handler, limit=1000)
        took = time.monotonic() - started
        assert handler.back is not None
        handler.back.join()
        # the give-back waited for Postgres, and got through within its pauses
        assert slept and slept == list(RELEASE_PAUSES[: len(slept)]), slept
        assert handler.down_for <= took < sum(RELEASE_PAUSES) + 5.0, took
        with db.transaction() as conn:
            held = conn.execute("SELECT count(*) FROM work_items WHERE claimed_by IS NOT NULL").fetchone()
            again = workqueue.claim(conn, WorkKind.EMBED, owner="next", limit=1000, now=clock())
        assert held == (0,)
        assert len(again) == 1000 and {w.attempts for w in again} == {1}  # the outage not counted
        # control: claims nobody gives back wait out their lease
        with db.transaction() as conn:
            assert workqueue.claim(conn, WorkKind.EMBED, owner="other", limit=1000, now=clock()) == []
    finally:
        db.close()
