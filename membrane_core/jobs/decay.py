"""The decay job: refresh stored salience at each record's checkpoint (RFC 6.1).

Salience is always computed from the base salience and the time since reinforcement
(closed form, :mod:`membrane_core.decay`), so refreshing it never compounds. After a
refresh the item moves to the record's next checkpoint, or hands the record to pruning.
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from datetime import datetime, timedelta

from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import Outcome
from membrane_core.storage import jobs
from membrane_core.storage.db import Connection
from membrane_core.storage.workqueue import WorkItem


def next_checkpoint(cp: jobs.Checkpoint, now: datetime) -> tuple[str, datetime | None]:
    """RFC 6.1: what follows a refreshed checkpoint: ``("decay", due)``, ``("prune", now)`` or
    ``("none", None)``.

    The next decay checkpoint is one half-life later, or earlier when the record
    reaches its floor or its maximum age before that; pinned records never decay.
    """
    if cp.pinned:
        return ("none", None)
    threshold = max(cp.min_salience, jobs.PRUNE_EPSILON)
    expires = (
        cp.created_at + timedelta(seconds=cp.max_age_seconds) if cp.max_age_seconds is not None else None
    )
    if cp.salience <= threshold or (expires is not None and expires <= now):
        return ("prune", now) if cp.prunable else ("none", None)
    due = [now + timedelta(seconds=cp.half_life_seconds)]
    if cp.base_salience > threshold:
        to_floor = cp.half_life_seconds * math.log2(cp.base_salience / threshold)
        due.append(cp.reinforced_at + timedelta(seconds=to_floor + 1))
    if expires is not None:
        due.append(expires)
    return ("decay", max(min(due), now + timedelta(seconds=1)))


class DecayHandler:
    """RFC 6.1: refresh the checkpoint of due records and schedule what follows."""

    kind = WorkKind.DECAY

    def prepare(self, items: Sequence[WorkItem]) -> None:
        """Nothing to do outside the transaction."""

    def apply(self, conn: Connection, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        """Refresh the held records' salience; reschedule, complete or hand over to prune."""
        out = Outcome()
        checkpoints = {c.id: c for c in jobs.refresh_salience(conn, sorted(set(held.values())), now=now)}
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
        jobs.schedule(conn, prune)
        out.stats.update(refreshed=len(checkpoints), rescheduled=len(out.later), prune_scheduled=len(prune))
        return out
