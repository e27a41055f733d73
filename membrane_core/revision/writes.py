"""Writes the revision operations share: tombstones, re-assertion, the superseded pointer,
and a new record queued as capture queues one (RFC 5.2, 5.4)."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime
from typing import Any

from membrane_core.enums import WorkKind
from membrane_core.models import MemoryRecord, SemanticPayload
from membrane_core.sealing import Sealer
from membrane_core.storage import records, revisions
from membrane_core.storage.db import Connection

#: RFC 7.6: what a tombstone at a sealed level says of its rationale (sealed in the audit log).
SEALED_TOMBSTONE = "sealed: see the audit log"


def reassert(conn: Connection, new: MemoryRecord, sealer: Sealer) -> bool:
    """RFC 5.4: an explicit revision re-asserting a tombstoned key removes the tombstones
    that bind the new record's level (RFC 3.4). A supersede that keeps its target's key
    re-asserts too: a retracted variant of the same key may have tombstoned it while the
    target stayed active."""
    if not isinstance(new.payload, SemanticPayload):
        return False
    key = records.record_fact_key(new, sealer)
    return bool(revisions.clear_tombstones(conn, [(key, new.sensitivity.rank)]))


def tombstone(
    conn: Connection,
    targets: Sequence[revisions.Target],
    new: MemoryRecord | None,
    actor: str,
    rationale: str,
    now: datetime,
    sealer: Sealer,
) -> None:
    """RFC 5.4: tombstone each retracted fact key the new record does not carry on; at a sealed
    level the rationale stays in the audit log, sealed (RFC 7.6)."""
    keep = None
    if new is not None and isinstance(new.payload, SemanticPayload):
        keep = records.record_fact_key(new, sealer)
    rows = [
        (
            t.key,
            t.id,
            actor,
            SEALED_TOMBSTONE if sealer.seals(t.sensitivity) else rationale,
            t.sensitivity.rank,
        )
        for t in targets
        if t.key and t.key != keep
    ]
    revisions.insert_tombstones(conn, rows, now)


def set_superseded_by(conn: Connection, old: MemoryRecord, new_id: uuid.UUID, sealer: Sealer) -> None:
    """RFC 5.2.1: point a superseded fact's payload at its replacement; a sealed payload is
    sealed again with the pointer (RFC 7.6)."""
    if revisions.set_superseded_by(conn, old.id, new_id):
        return
    payload = old.payload.model_copy(update={"superseded_by": new_id})
    content = records.sealed_content(payload.model_dump_json(), old.summary, old.metadata, old.tags)
    revisions.set_sealed(conn, old.id, *sealer.seal_content(old.id, content))


def queue_new(
    batch: records.RowBatch,
    rec: MemoryRecord,
    actor: str,
    rationale: str,
    details: dict[str, Any],
    work: records.WorkOptions,
) -> None:
    """RFC 5.2: queue a new record through the capture write path, its create entry with
    ``details``, and its work items (``decay`` one half-life later or at its maximum age, ``embed``
    when configured)."""
    batch.add_record(rec, actor=actor, rationale=rationale, details=details)
    batch.work.append((WorkKind.DECAY.value, rec.id, records.first_decay(rec, rec.created_at)))
    if work.embeds(rec):
        batch.work.append((WorkKind.EMBED.value, rec.id, rec.created_at))
