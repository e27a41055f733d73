"""Set-based statements of the maintenance batches (RFC 6.1, 6.3, 6.4).

Every function takes the ids of one claimed batch and issues a constant number of
statements (``unnest`` arrays, data-modifying CTEs), never a round trip per record.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from membrane_core.storage import records
from membrane_core.storage.queries import q
from membrane_core.storage.rows import fetch_all

#: RFC 6.3: a record whose floor is zero is treated as at its floor below this salience.
PRUNE_EPSILON = 1e-3


@dataclass(frozen=True)
class Checkpoint:
    """A record's decay state after its stored salience was refreshed (RFC 6.1)."""

    id: uuid.UUID
    salience: float
    base_salience: float
    reinforced_at: datetime
    half_life_seconds: int
    min_salience: float
    max_age_seconds: int | None
    created_at: datetime
    pinned: bool
    prunable: bool


def refresh_salience(
    conn: psycopg.Connection, ids: Sequence[uuid.UUID], *, now: datetime
) -> list[Checkpoint]:
    """RFC 6.1: one UPDATE sets the stored salience of ``ids`` from the closed form at ``now``."""
    if not ids:
        return []
    return fetch_all(conn, Checkpoint, q("maint_decay_refresh"), {"ids": list(ids), "now": now})


def prune(conn: psycopg.Connection, ids: Sequence[uuid.UUID], *, now: datetime, actor: str) -> set[uuid.UUID]:
    """RFC 6.3: delete the eligible records among ``ids`` with a ``delete`` audit entry each."""
    if not ids:
        return set()
    cur = conn.execute(
        q("maint_prune"), {"ids": list(ids), "now": now, "actor": actor, "epsilon": PRUNE_EPSILON}
    )
    return {row[0] for row in cur.fetchall()}


def compress(
    conn: psycopg.Connection,
    ids: Sequence[uuid.UUID],
    *,
    now: datetime,
    actor: str,
    factor: float,
    age_seconds: int,
) -> set[uuid.UUID]:
    """RFC 6.4.1: lower the base salience of old episodic records, with a ``decay`` audit entry."""
    if not ids:
        return set()
    cur = conn.execute(
        q("maint_compress"),
        {"ids": list(ids), "now": now, "actor": actor, "factor": factor, "age_seconds": age_seconds},
    )
    return {row[0] for row in cur.fetchall()}


def lock_sources(conn: psycopg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, dict[str, Any]]:
    """RFC 7.4: re-read source records (payload, scope, sensitivity) under a share lock."""
    if not ids:
        return {}
    cur = conn.cursor(row_factory=dict_row)
    cur.execute(q("maint_lock_sources"), {"ids": sorted(set(ids))})
    return {row["id"]: row for row in cur.fetchall()}


FactMatch = records.FactMatch
lock_and_match_facts = records.lock_and_match_facts


def new_sources(
    conn: psycopg.Connection, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]]
) -> set[tuple[uuid.UUID, uuid.UUID]]:
    """The ``(record, source)`` pairs not yet linked by ``derived_from`` (RFC 6.2)."""
    if not pairs:
        return set()
    cur = conn.execute(
        q("maint_new_sources"), {"records": [p[0] for p in pairs], "sources": [p[1] for p in pairs]}
    )
    return {(rid, source) for rid, source in cur.fetchall()}


def reinforce(
    conn: psycopg.Connection, items: dict[uuid.UUID, tuple[int, int]], *, now: datetime
) -> dict[uuid.UUID, tuple[str, str]]:
    """RFC 6.2, 7.4: ``{id: (new sources, source sensitivity rank)}``; active records only.

    Returns ``{id: (scope, sensitivity)}`` of the records actually updated.
    """
    if not items:
        return {}
    ids = sorted(items)
    cur = conn.execute(
        q("maint_reinforce"),
        {
            "ids": ids,
            "counts": [items[i][0] for i in ids],
            "ranks": [items[i][1] for i in ids],
            "now": now,
        },
    )
    return {rid: (scope, sens) for rid, scope, sens in cur.fetchall()}


def add_relations(
    conn: psycopg.Connection, pairs: Sequence[tuple[uuid.UUID, uuid.UUID]], *, now: datetime
) -> None:
    """``derived_from`` edges ``(record, source)``; existing edges and missing sources are skipped."""
    if pairs:
        conn.execute(
            q("maint_add_relations"),
            {"sources": [p[0] for p in pairs], "targets": [p[1] for p in pairs], "now": now},
        )


def upsert_signatures(
    conn: psycopg.Connection, rows: Sequence[dict[str, Any]], *, now: datetime
) -> list[dict[str, Any]]:
    """RFC 6.4.3: add one batch's episode counts to ``tool_signatures``; returns the new totals."""
    if not rows:
        return []
    cur = conn.cursor(row_factory=dict_row)
    cur.execute(q("maint_upsert_signatures"), {"rows": json.dumps(list(rows)), "now": now})
    return list(cur.fetchall())


def link_signatures(
    conn: psycopg.Connection,
    links: Sequence[tuple[str, str, uuid.UUID | None, uuid.UUID | None]],
) -> None:
    """Store ``(scope, key, competence id, plan id)`` of records mined from signatures."""
    if links:
        conn.execute(
            q("maint_link_signatures"),
            {
                "scopes": [x[0] for x in links],
                "keys": [x[1] for x in links],
                "competence_ids": [x[2] for x in links],
                "plan_ids": [x[3] for x in links],
            },
        )


def update_procedural(
    conn: psycopg.Connection, stats: dict[uuid.UUID, tuple[int, int]], *, now: datetime
) -> None:
    """RFC 4.4: write ``{id: (successes, failures)}`` into competence and plan-graph payloads."""
    if stats:
        ids = sorted(stats)
        conn.execute(
            q("maint_update_procedural"),
            {
                "ids": ids,
                "successes": [stats[i][0] for i in ids],
                "failures": [stats[i][1] for i in ids],
                "now": now,
            },
        )


def schedule(conn: psycopg.Connection, items: Sequence[tuple[str, uuid.UUID, datetime]]) -> None:
    """Insert ``(kind, target, due)`` work items; an existing item keeps the earlier due time (RFC 9.3)."""
    earliest: dict[tuple[str, uuid.UUID], datetime] = {}
    for kind, target, at in items:  # one row per (kind, target): ON CONFLICT may touch a row once
        key = (kind, target)
        earliest[key] = min(at, earliest.get(key, at))
    if earliest:
        kinds, targets, due = zip(*((k, t, d) for (k, t), d in earliest.items()), strict=True)
        conn.execute(
            q("insert_work_items"), {"kinds": list(kinds), "targets": list(targets), "due": list(due)}
        )
