"""The seal job: records sealed again under the current key, or for the first time (RFC 7.6).

Rotation (``membrane rotate-encryption-key``) writes a ``seal`` work item for every record
still to seal, in chunks of its own transactions (:meth:`Sealing.enqueue`); the maintenance
pool claims them in bounded batches through the batch runner (RFC 9.4) and seals each batch
under row lock in one transaction, while captures and reads go on.
"""

from __future__ import annotations

import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any

from membrane_core.clock import Clock
from membrane_core.enums import WorkKind
from membrane_core.jobs.runner import Outcome
from membrane_core.sealing import Sealer
from membrane_core.storage import sealed
from membrane_core.storage.db import Connection, Database
from membrane_core.storage.workqueue import WorkItem, enqueue_in_chunks

#: Records read per chunk of :meth:`Sealing.enqueue`, each chunk one transaction.
ENQUEUE_CHUNK = 5000


class SealHandler:
    """RFC 7.6: seal a batch's records under the current key, under row lock."""

    kind = WorkKind.SEAL

    def __init__(self, sealer: Sealer) -> None:
        self._sealer = sealer

    def prepare(self, items: Sequence[WorkItem]) -> None:
        """Nothing to do outside the transaction."""

    def apply(self, conn: Connection, held: dict[int, uuid.UUID], prepared: None, now: datetime) -> Outcome:
        """Seal the held records; complete their items. Without keys nothing can be sealed: the
        items complete unchanged (rotation enqueues them again once keys are configured)."""
        done = sealed.seal(conn, sorted(set(held.values())), self._sealer)
        stats = Counter(resealed=done.resealed, sealed=done.first, unchanged=done.unchanged)
        return Outcome(done=list(held), stats=stats)


class Sealing:
    """``Membrane.sealing``: what rotation asks of the store (RFC 7.6)."""

    def __init__(self, db: Database, sealer: Sealer, *, clock: Clock) -> None:
        self._db = db
        self._clock = clock
        self.sealer = sealer

    def enqueue(
        self, *, chunk: int = ENQUEUE_CHUNK, on_chunk: Callable[[int, int], None] | None = None
    ) -> int:
        """RFC 7.6: a ``seal`` item for every record still to seal (sealed under another key, or
        plain at or above the level), reading the store by id in chunks of one transaction
        each; ``on_chunk(records read, items written)`` after each. Returns the items written."""
        if not self.sealer.enabled:
            return 0

        def step(conn: Connection, after: uuid.UUID | None) -> tuple[uuid.UUID | None, int, int]:
            return sealed.enqueue(conn, self.sealer, after=after, limit=chunk, now=self._clock())

        return enqueue_in_chunks(self._db, step, chunk=chunk, on_chunk=on_chunk)

    def progress(self) -> dict[str, Any]:
        """RFC 7.6: sealed records by key, plain ones at or above the level, seal items left."""
        with self._db.transaction() as conn:
            return sealed.progress(conn, self.sealer)

    def done(self, progress: dict[str, Any] | None = None) -> bool:
        """RFC 7.6: whether every record at or above the level is sealed under the current key
        (older keys may then leave the ring)."""
        p = progress or self.progress()
        others = {k: n for k, n in p["by_key"].items() if k != self.sealer.current_key}
        return not others and p["plain"] == 0 and p["pending"] == 0
