"""The review queue's pages (RFC 5.7): which proposals a reviewer may decide, and each
entry with its records, the fact's sources and evidence, and the conflicting facts, read in
a fixed number of statements."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from datetime import datetime

from membrane_core import decay
from membrane_core.enums import MemoryType, Sensitivity
from membrane_core.listing import cursor
from membrane_core.models import MemoryRecord
from membrane_core.results import RecordView, view
from membrane_core.review.results import ReviewEntry
from membrane_core.sealing import Sealer
from membrane_core.storage import proposals, records, revisions
from membrane_core.storage.db import Connection
from membrane_core.trust import ALL_SCOPES, TrustPolicy


def decidable(policy: TrustPolicy) -> list[str] | None:
    """RFC 5.7: the scopes whose proposals the caller may decide (read and written); None for
    every scope."""
    if policy.reads_all and ALL_SCOPES in policy.write_scopes:
        return None
    if policy.reads_all:
        return sorted(s for s in policy.write_scopes if s)
    return sorted(s for s in policy.read_scopes if policy.can_write_scope(s))


def entries(
    conn: Connection,
    page: Sequence[proposals.ProposalRow],
    policy: TrustPolicy,
    *,
    sealer: Sealer,
    now: datetime,
) -> list[ReviewEntry]:
    """The page's proposals with their records, the fact's sources and conflicts, read in a
    fixed number of statements (RFC 5.7)."""
    members = proposals.members(conn, [p.id for p in page])
    recs = records.hydrate(conn, [r for ids in members.values() for r in ids], sealer=sealer)
    facts = {
        pid: next((recs[r] for r in ids if r in recs and recs[r].type is MemoryType.SEMANTIC), None)
        for pid, ids in members.items()
    }
    keys = {f.id: records.record_fact_key(f, sealer) for f in facts.values() if f is not None}
    conflicts = proposals.conflicts(conn, keys, policy.max_sensitivity.rank)
    sources = proposals.sources(conn, list(keys))
    others = records.hydrate(
        conn,
        {r for ids in [*conflicts.values(), *sources.values()] for r in ids} - set(recs),
        sealer=sealer,
    )
    known = {**others, **recs}
    targets = {rel.target_id for r in known.values() for rel in r.relations}
    labels = revisions.access(conn, targets)
    seen = {t for t, lb in labels.items() if policy.visibility(lb.scope, lb.sensitivity) == "full"}

    def shown(ids: Sequence[uuid.UUID]) -> list[RecordView]:
        out = []
        for rid in ids:
            rec = known.get(rid)
            if rec is None:
                continue
            vis = policy.visibility(rec.scope, rec.sensitivity)
            if vis != "hidden":
                out.append(_view(rec, now, redacted=vis == "redacted", seen=seen))
        return out

    entries = []
    for p in page:
        fact = facts[p.id]
        fact_views = shown([fact.id]) if fact is not None else []
        entries.append(
            ReviewEntry(
                proposal_id=p.id,
                scope=p.scope,
                sensitivity=Sensitivity(p.sensitivity),
                source=p.source,
                proposed_by=p.proposed_by,
                corroborators=[a for a in p.actors if a != p.proposed_by],
                corroborations=p.corroborations,
                created_at=p.created_at,
                expires_at=p.expires_at,
                records=shown(members[p.id]),
                fact=fact_views[0] if fact_views else None,
                evidence=fact_views[0].provenance if fact_views else [],
                source_episodes=shown(sources.get(fact.id, [])) if fact is not None else [],
                conflicts=shown(conflicts.get(fact.id, [])) if fact is not None else [],
            )
        )
    return entries


def position(token: str, fp: str) -> proposals.QueuePosition:
    pos = cursor.decode(token, fp)
    try:
        return proposals.QueuePosition(
            datetime.fromisoformat(pos["c"]), uuid.UUID(pos["i"]), int(pos.get("n", 0))
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise cursor.bad("is not a cursor this server made") from exc


def _view(rec: MemoryRecord, now: datetime, *, redacted: bool, seen: set[uuid.UUID]) -> RecordView:
    lc = rec.lifecycle
    salience = decay.salience_at(lc.base_salience, lc.reinforced_at, lc.decay, now, pinned=lc.pinned)
    return view(rec, salience=salience, redacted=redacted, visible_targets=seen)
