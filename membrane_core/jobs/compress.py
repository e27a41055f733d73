"""The compress job: halve the base salience of old episodes (RFC 6.4.1)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from membrane_core.enums import WorkKind
from membrane_core.jobs.prune import ACTOR
from membrane_core.jobs.runner import Outcome
from membrane_core.storage import jobs
from membrane_core.storage.db import Connection
from membrane_core.storage.workqueue import WorkItem

#: RFC 6.4.1: episodic compression multiplies the base salience by this factor.
COMPRESSION_FACTOR = 0.5


class CompressHandler:
    """RFC 6.4.1: compress old episodic records; their decay checkpoint is re-evaluated."""

    kind = WorkKind.COMPRESS

    def __init__(self, *, after: timedelta) -> None:
        self._age = int(after.total_seconds())

    def prepare(self, items: Sequence[WorkItem]) -> None:
        """Nothing to do outside the transaction."""

    def apply(self, conn: Connection, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        """Compress the held episodes old enough; schedule their decay checkpoint now."""
        targets = sorted(set(held.values()))
        done = jobs.compress(
            conn, targets, now=now, actor=ACTOR, factor=COMPRESSION_FACTOR, age_seconds=self._age
        )
        jobs.schedule(conn, [(WorkKind.DECAY.value, t, now) for t in sorted(done)])
        out = Outcome(done=list(held))
        out.stats.update(compressed=len(done))
        return out
