"""The consolidate job: promotion, competence and plan graphs from episodes (RFC 6.4.2, 6.4.3)."""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Sequence
from datetime import datetime

from membrane_core.enums import WorkKind
from membrane_core.jobs import consolidation
from membrane_core.jobs.runner import Outcome
from membrane_core.policy import Policy
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage.db import Connection
from membrane_core.storage.workqueue import WorkItem


class ConsolidateHandler:
    """RFC 6.4.2, 6.4.3: feed a batch of successful episodes to the consolidation stages."""

    kind = WorkKind.CONSOLIDATE

    def __init__(
        self, *, policy: Policy, embed: bool, sealer: Sealer = NO_KEYS, embed_sealed: bool = False
    ) -> None:
        self._policy = policy
        self._embed = embed
        self._sealer = sealer
        self._embed_sealed = embed_sealed

    def prepare(self, items: Sequence[WorkItem]) -> None:
        """Nothing to do outside the transaction."""

    def apply(self, conn: Connection, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        """Run the stages over the held episodes in the batch's transaction."""
        ctx = consolidation.Context(
            policy=self._policy,
            now=now,
            embed=self._embed,
            sealer=self._sealer,
            embed_sealed=self._embed_sealed,
        )
        stats = consolidation.consolidate(conn, sorted(set(held.values())), ctx)
        return Outcome(done=list(held), stats=Counter(stats))
