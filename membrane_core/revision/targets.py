"""A revision's targets: locked, checked against the caller's trust, hydrated (RFC 5.2).

What every revision does first under its transaction, and the refusal a retracted target
answers with, naming the revision that won.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from membrane_core import errors
from membrane_core.enums import MemoryType, RevisionStatus
from membrane_core.models import MemoryRecord
from membrane_core.revision.rules import require_decided, require_revisable, require_trusted_writer
from membrane_core.sealing import Sealer
from membrane_core.storage import records, revisions
from membrane_core.storage.db import Connection
from membrane_core.trust import TrustPolicy


def lock(
    conn: Connection,
    ids: Sequence[uuid.UUID],
    trust: TrustPolicy,
    *,
    allow_episodic: bool = False,
    allow_retracted: bool = False,
    review: bool = False,
) -> dict[uuid.UUID, revisions.Target]:
    """RFC 5.2: lock the targets, then check existence, trust, type and status. A key whose
    writes need review revises nothing, and a proposed target is settled by its review only
    (RFC 5.7): ``review`` is the amend of a decision."""
    if not review:
        require_trusted_writer(trust)
    locked = revisions.lock_targets(conn, ids)
    for i in ids:
        t = locked.get(i)
        if t is None:
            raise errors.NotFound(f"record {i} not found")
        require_revisable(i, trust.visibility(t.scope, t.sensitivity), trust.can_write_scope(t.scope))
        if not review:
            require_decided(i, t.status)
        if t.type == MemoryType.EPISODIC.value and not allow_episodic:
            raise errors.RevisionRefused(f"record {i} is episodic; episodes are immutable")
        if t.status is RevisionStatus.RETRACTED and not allow_retracted:
            raise already_retracted(conn, i, trust)
    return locked


def already_retracted(conn: Connection, record_id: uuid.UUID, trust: TrustPolicy) -> errors.RevisionRefused:
    """RFC 5.2: the refusal names the revision that won (a supersede or merge names its
    successor when the caller sees that record in full, as an audit read would, 5.5)."""
    won = revisions.retracted_by(conn, record_id)
    if won is None:
        return errors.RevisionRefused(f"record {record_id} is retracted")
    operation, successor, actor, at = won.operation, won.successor, won.actor, won.at
    verb = {"supersede": "superseded", "merge": "merged"}.get(operation, "retracted")
    detail: dict[str, Any] = {
        "field": "record_id",
        "message": f"already {verb}",
        "type": f"already_{verb}",
        "actor": actor,
        "at": at.isoformat(),
    }
    message = f"record {record_id} was already {verb} by {actor} at {at.isoformat()}"
    if successor is not None:
        seen = revisions.access(conn, [successor]).get(successor)
        if seen is not None and trust.visibility(seen.scope, seen.sensitivity) == "full":
            detail["successor_id"] = str(successor)
            message += f"; its successor is record {successor}"
    return errors.RevisionRefused(message, details=[detail])


def hydrate(conn: Connection, ids: Sequence[uuid.UUID], sealer: Sealer) -> list[MemoryRecord]:
    """RFC 5.2: the locked targets as records, in the order of ``ids``."""
    found = records.hydrate(conn, ids, sealer=sealer)
    missing = [i for i in ids if i not in found]
    if missing:
        raise errors.NotFound(f"record {missing[0]} not found")
    return [found[i] for i in ids]
