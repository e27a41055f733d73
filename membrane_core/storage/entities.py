"""Capture-time entity resolution inside the capture's transaction (RFC 3.5).

Set-based for a whole batch of captures: one lookup statement for every mention key
of the batch; one advisory-lock statement and one more lookup only for the keys that
missed; new entity records ride on the capture's :class:`RowBatch` (one COPY per
table); their terms and identifiers are one COPY each after the records exist; the
entity-to-entity edges are one multi-row insert.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg

from membrane_core.capture import mentions
from membrane_core.capture.plan import CapturePlan, new_id
from membrane_core.enums import RevisionStatus, WorkKind
from membrane_core.models import MemoryRecord
from membrane_core.policy import Policy
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage.queries import q
from membrane_core.storage.rowbatch import RowBatch, copy_cursor, copy_rows

#: A lookup key: (namespace or None for a name term, normalised value).
Key = tuple[str | None, str]


@dataclass
class Resolution:
    """What resolution left to write after the batch's records, and a report per capture."""

    reports: list[dict[str, Any] | None]
    now: datetime
    terms: list[tuple[uuid.UUID, str, str, str]] = field(default_factory=list)
    identifiers: list[tuple[uuid.UUID, str, str, str]] = field(default_factory=list)
    #: ``{(source, predicate, target): sensitivity rank of the observation}``
    edges: dict[tuple[uuid.UUID, str, uuid.UUID], int] = field(default_factory=dict)
    #: RFC 5.7: the entities a proposed capture created, by the capture's index
    proposed: dict[int, list[uuid.UUID]] = field(default_factory=dict)

    def flush(self, conn: psycopg.Connection) -> None:
        """RFC 3.5.2: one COPY for terms, one insert for identifiers (a retracted entity's pass
        to the new one), one insert for entity edges."""
        cur = conn.cursor()
        if self.terms:
            copy_rows(copy_cursor(conn), "copy_entity_terms", self.terms)
        if self.identifiers:
            ids, scopes, namespaces, values = zip(*self.identifiers, strict=True)
            cur.execute(
                q("insert_entity_identifiers"),
                {
                    "ids": list(ids),
                    "scopes": list(scopes),
                    "namespaces": list(namespaces),
                    "values": list(values),
                },
            )
        if self.edges:
            sources, predicates, targets = zip(*self.edges, strict=True)
            cur.execute(
                q("insert_entity_relations"),
                {
                    "sources": list(sources),
                    "predicates": list(predicates),
                    "targets": list(targets),
                    "ranks": list(self.edges.values()),
                    "now": self.now,
                },
            )


@dataclass(frozen=True)
class _Slot:
    plan: int
    mention: int
    order: int  # position of the key within the mention: lower is more specific


def _lookup(
    conn: psycopg.Connection, rows: list[tuple[_Slot, str, Key, int]]
) -> dict[tuple[int, int], tuple[int, int, uuid.UUID]]:
    """Best hit per mention: ``{(plan, mention): (match_kind, key order, entity id)}``."""
    if not rows:
        return {}
    cur = conn.cursor()
    cur.execute(
        q("entity_lookup"),
        {
            "idx": list(range(len(rows))),
            "scopes": [r[1] for r in rows],
            "namespaces": [r[2][0] for r in rows],
            "terms": [r[2][1] for r in rows],
            "ranks": [r[3] for r in rows],
        },
    )
    best: dict[tuple[int, int], tuple[int, int, uuid.UUID]] = {}
    for i, record_id, match_kind in cur.fetchall():
        slot = rows[i][0]
        cand = (match_kind, slot.order, record_id)
        key = (slot.plan, slot.mention)
        if key not in best or cand[:2] < best[key][:2]:
            best[key] = cand
    return best


def _lock(conn: psycopg.Connection, rows: list[tuple[_Slot, str, Key, int]]) -> None:
    # RFC 3.5.5: sorted, in one statement, so two writers never wait on each other in a cycle.
    conn.cursor().execute(
        q("lock_entity_keys"),
        {
            "scopes": [r[1] for r in rows],
            "namespaces": [r[2][0] for r in rows],
            "terms": [r[2][1] for r in rows],
        },
    )


def resolve_mentions(
    conn: psycopg.Connection,
    plans: Sequence[CapturePlan],
    batch: RowBatch,
    *,
    now: datetime,
    embed: bool = False,
    policy: Policy | None = None,
    sealer: Sealer = NO_KEYS,
) -> Resolution:
    """RFC 3.5: resolve every capture's mentions to entities, or create them, in ``conn``'s transaction.

    New entity records, their audit entries and work items and the ``mentions``
    relations are queued on ``batch``; call :meth:`Resolution.flush` after
    ``batch.flush`` to write the terms, identifiers and entity edges. A sealed capture
    resolves none (RFC 7.6): its names would be stored as plain terms, and its ``mentions``
    relations would say whom it names.
    """
    policy = policy or Policy()
    sets = [None if sealer.seals(p.primary.sensitivity) else mentions.extract(p.primary) for p in plans]
    rows: list[tuple[_Slot, str, Key, int]] = []
    for pi, (plan, ms) in enumerate(zip(plans, sets, strict=True)):
        if ms is None:
            continue
        rank = plan.primary.sensitivity.rank
        for mi, mention in enumerate(ms.mentions):
            rows.extend(
                (_Slot(pi, mi, k), plan.primary.scope, key, rank) for k, key in enumerate(mention.keys())
            )
    hits = _lookup(conn, rows)
    missed = [r for r in rows if (r[0].plan, r[0].mention) not in hits]
    if missed:
        _lock(conn, missed)
        hits.update(_lookup(conn, missed))
    out = Resolution(reports=[None] * len(plans), now=now)
    created: dict[tuple[str, str | None, str], tuple[uuid.UUID, int]] = {}
    for pi, (plan, ms) in enumerate(zip(plans, sets, strict=True)):
        if ms is not None:
            out.reports[pi] = _resolve_capture(pi, plan, ms, hits, created, batch, out, policy, now, embed)
    return out


def _resolve_capture(
    pi: int,
    plan: CapturePlan,
    ms: mentions.MentionSet,
    hits: dict[tuple[int, int], tuple[int, int, uuid.UUID]],
    created: dict[tuple[str, str | None, str], tuple[uuid.UUID, int]],
    batch: RowBatch,
    out: Resolution,
    policy: Policy,
    now: datetime,
    embed: bool,
) -> dict[str, Any]:
    primary = plan.primary
    scope, rank = primary.scope, primary.sensitivity.rank
    targets: dict[str, uuid.UUID] = {}
    linked = new = 0
    for mi, mention in enumerate(ms.mentions):
        hit = hits.get((pi, mi))
        target = hit[2] if hit else _created_match(created, scope, rank, mention)
        if target is None:
            entity = mentions.new_entity(mention, primary, policy, now, new_id())
            if primary.status is RevisionStatus.PROPOSED:  # RFC 5.7: proposed with its capture
                entity = entity.model_copy(update={"status": RevisionStatus.PROPOSED})
                out.proposed.setdefault(pi, []).append(entity.id)
            _queue_entity(entity, mention, plan.actor, batch, out, created, now, embed)
            target = entity.id
            new += 1
        else:
            linked += 1
        targets[mention.term] = target
        for _, alias in mention.aliases:
            targets.setdefault(alias, target)
    for target in dict.fromkeys(targets.values()):
        batch.relations.append((primary.id, "mentions", target, None, now))
    edges = 0
    # RFC 5.7: a proposed observation adds no edge between entities; the edge would tell
    # every reader of them what the observation says, and outlive its rejection
    stated = ms.relations if primary.status is not RevisionStatus.PROPOSED else []
    for rc in stated:
        s, o = targets.get(rc.subject), targets.get(rc.object)
        if s is not None and o is not None and s != o:
            edge = (s, rc.predicate, o)
            out.edges[edge] = max(out.edges.get(edge, 0), rank)
            edges += 1
    return {**ms.report(), "linked": linked, "created": new, "relations": edges}


def _created_match(
    created: dict[tuple[str, str | None, str], tuple[uuid.UUID, int]],
    scope: str,
    rank: int,
    mention: mentions.Mention,
) -> uuid.UUID | None:
    """An entity created earlier in the same batch, by the same rules as the lookup."""
    for ns, term in mention.keys():
        found = created.get((scope, ns, term))
        if found and (ns is not None or found[1] <= rank):
            return found[0]
    return None


def _queue_entity(
    entity: MemoryRecord,
    mention: mentions.Mention,
    actor: str,
    batch: RowBatch,
    out: Resolution,
    created: dict[tuple[str, str | None, str], tuple[uuid.UUID, int]],
    now: datetime,
    embed: bool,
) -> None:
    batch.add_record(entity, actor=actor, rationale="entity mentioned by a capture")
    if embed:
        batch.work.append((WorkKind.EMBED.value, entity.id, now))
    batch.work.append(
        (WorkKind.DECAY.value, entity.id, now + timedelta(seconds=entity.lifecycle.decay.half_life_seconds))
    )
    scope, rank = entity.scope, entity.sensitivity.rank
    terms = {mention.term: "canonical"}
    for _, alias in mention.aliases:
        terms.setdefault(alias, "alias")
    out.terms.extend((entity.id, scope, term, kind) for term, kind in terms.items())
    out.identifiers.extend((entity.id, scope, ns, value) for ns, value in mention.identifiers)
    for key in mention.keys():
        created.setdefault((scope, *key), (entity.id, rank))
