"""The prune job: delete records at their salience floor that policy lets go (RFC 6.3)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import Outcome
from membrane_core.storage import jobs
from membrane_core.storage.db import Connection
from membrane_core.storage.workqueue import WorkItem

#: The actor named in the audit entries of maintenance (RFC 5.5).
ACTOR = "maintenance"


class PruneHandler:
    """RFC 6.3: delete eligible records; survivors go back to the decay checkpoint."""

    kind = WorkKind.PRUNE

    def prepare(self, items: Sequence[WorkItem]) -> None:
        """Nothing to do outside the transaction."""

    def apply(self, conn: Connection, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        """Delete what may go, with its audit entry; re-check the rest at decay."""
        targets = sorted(set(held.values()))
        deleted = jobs.prune(conn, targets, now=now, actor=ACTOR)
        jobs.schedule(conn, [(WorkKind.DECAY.value, t, now) for t in targets if t not in deleted])
        out = Outcome(done=list(held))
        out.stats.update(deleted=len(deleted), kept=len(targets) - len(deleted))
        return out
