"""Row-level writes of the revision operations (RFC 5.2, 5.4).

Every function runs in the caller's transaction. Lock order, the same for every
writer of a fact: advisory fact-key locks first (``lock_fact_keys``, shared with the
capture path), then the record rows in id order.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from membrane_core.enums import MemoryType, RevisionStatus, Sensitivity
from membrane_core.storage.queries import q
from membrane_core.storage.rows import fetch_all, fetch_one

#: A normalised fact key: (scope, subject, predicate, object) (RFC 3.4).
FactKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class Target:
    """A locked revision target: what the checks and the salience arithmetic need."""

    id: uuid.UUID
    type: MemoryType
    scope: str
    sensitivity: Sensitivity
    status: RevisionStatus
    confidence: float
    base_salience: float
    reinforced_at: datetime
    half_life_seconds: int
    min_salience: float
    pinned: bool
    key: FactKey | None

    @classmethod
    def from_row(
        cls,
        *,
        type: str,
        scope: str,
        sensitivity: str,
        status: str,
        fact_subject: str | None,
        fact_predicate: str | None,
        fact_object: str | None,
        **rest: Any,
    ) -> Target:
        """The row with its enums, and the fact key when the record is a fact."""
        key = (
            (scope, fact_subject, fact_predicate or "", fact_object or "")
            if fact_subject is not None
            else None
        )
        return cls(
            type=MemoryType(type),
            scope=scope,
            sensitivity=Sensitivity(sensitivity),
            status=RevisionStatus(status),
            key=key,
            **rest,
        )


@dataclass(frozen=True)
class Tombstone:
    """A ``fact_tombstones`` row (RFC 5.4)."""

    key: FactKey
    record_id: uuid.UUID | None
    actor: str
    rationale: str
    created_at: datetime

    @classmethod
    def from_row(cls, *, scope: str, subject: str, predicate: str, object: str, **rest: Any) -> Tombstone:
        """The row with its key as one tuple."""
        return cls(key=(scope, subject, predicate, object), **rest)


@dataclass(frozen=True)
class Label:
    """A record's scope and sensitivity, for a visibility check (RFC 7.3)."""

    scope: str
    sensitivity: Sensitivity


@dataclass(frozen=True)
class Retraction:
    """The revision that retracted a record: operation, successor, actor, time (RFC 5.2)."""

    operation: str
    successor: uuid.UUID | None
    actor: str
    at: datetime

    @classmethod
    def from_row(cls, *, operation: str, successor: str | None, actor: str, at: datetime) -> Retraction:
        """The row with the successor's id parsed."""
        return cls(operation, uuid.UUID(successor) if successor else None, actor, at)


def fact_key_levels(
    conn: psycopg.Connection, ids: Iterable[uuid.UUID]
) -> dict[uuid.UUID, tuple[FactKey, int]]:
    """Fact keys of the semantic records among ``ids`` as stored, with their sensitivity ranks,
    read without locks (a key changes only once, when a record written before encryption was
    enabled is sealed, RFC 7.6)."""
    cur = conn.execute(q("revision_fact_keys"), {"ids": list(ids)})
    return {rid: ((scope, s, p, o), rank) for rid, scope, s, p, o, rank in cur.fetchall()}


def fact_keys(conn: psycopg.Connection, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, FactKey]:
    """Fact keys of the semantic records among ``ids``, read without locks."""
    return {rid: key for rid, (key, _) in fact_key_levels(conn, ids).items()}


def lock_keys(conn: psycopg.Connection, keys: Iterable[FactKey]) -> None:
    """RFC 5.4: take the transaction advisory lock of every key, in a global order."""
    uniq = sorted(set(keys))
    if not uniq:
        return
    conn.execute(
        q("lock_fact_keys"),
        {
            "scopes": [k[0] for k in uniq],
            "subjects": [k[1] for k in uniq],
            "predicates": [k[2] for k in uniq],
            "objects": [k[3] for k in uniq],
        },
    )


def lock_targets(conn: psycopg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, Target]:
    """RFC 5.2: re-read and lock the targets (id order, so concurrent revisions cannot deadlock)."""
    return {t.id: t for t in fetch_all(conn, Target, q("revision_lock_targets"), {"ids": list(ids)})}


def access(conn: psycopg.Connection, ids: Iterable[uuid.UUID]) -> dict[uuid.UUID, Label]:
    """The :class:`Label` of existing records among ``ids``, for visibility checks."""
    cur = conn.execute(q("revision_visible_access"), {"ids": list(ids)})
    return {rid: Label(scope, Sensitivity(sens)) for rid, scope, sens in cur.fetchall()}


def retracted_by(conn: psycopg.Connection, record_id: uuid.UUID) -> Retraction | None:
    """RFC 5.2: the :class:`Retraction` of a retracted record, from its audit log."""
    return fetch_one(conn, Retraction, q("revision_retracted_by"), {"id": record_id})


def mark_retracted(conn: psycopg.Connection, ids: Sequence[uuid.UUID], now: datetime) -> None:
    """RFC 5.2.4: status retracted, ``retracted_at = now``; salience untouched (RFC 5.3)."""
    conn.execute(q("revision_mark_retracted"), {"ids": list(ids), "now": now})


def has_relation(conn: psycopg.Connection, source: uuid.UUID, predicate: str, target: uuid.UUID) -> bool:
    """RFC 5.2.5: whether ``source --predicate--> target`` exists already."""
    row = conn.execute(
        q("revision_has_relation"), {"source": source, "predicate": predicate, "target": target}
    ).fetchone()
    return bool(row and row[0])


def mark_contested(conn: psycopg.Connection, record_id: uuid.UUID, now: datetime) -> None:
    """RFC 5.2.5: status contested, ``contested_at`` set once."""
    conn.execute(q("revision_mark_contested"), {"id": record_id, "now": now})


def set_superseded_by(conn: psycopg.Connection, record_id: uuid.UUID, new_id: uuid.UUID) -> bool:
    """RFC 5.2.1: the payload pointer of a superseded semantic record; False when its payload
    is sealed (RFC 7.6), and so not written."""
    return (
        conn.execute(q("revision_set_superseded_by"), {"id": record_id, "new_id": str(new_id)}).rowcount > 0
    )


def set_sealed(conn: psycopg.Connection, record_id: uuid.UUID, key_id: str, sealed: bytes) -> None:
    """RFC 7.6: a sealed record's new ciphertext."""
    conn.execute(q("revision_set_sealed"), {"id": record_id, "key_id": key_id, "sealed": sealed})


def set_salience(
    conn: psycopg.Connection, record_id: uuid.UUID, base: float, now: datetime, due: datetime
) -> None:
    """RFC 5.2.6, 5.2.7: new base salience, clock restarted, decay checkpoint moved."""
    conn.execute(q("revision_set_salience"), {"id": record_id, "base": base, "now": now})
    conn.execute(q("revision_reschedule_decay"), {"id": record_id, "due": due, "now": now})


def insert_tombstones(
    conn: psycopg.Connection,
    rows: Sequence[tuple[FactKey, uuid.UUID, str, str, int]],
    now: datetime,
) -> None:
    """RFC 5.4: tombstone ``(key, record_id, actor, rationale, level)`` rows, each binding the
    retracted record's level (RFC 3.4); existing ones are kept."""
    if not rows:
        return
    conn.execute(
        q("revision_insert_tombstones"),
        {
            "scopes": [r[0][0] for r in rows],
            "subjects": [r[0][1] for r in rows],
            "predicates": [r[0][2] for r in rows],
            "objects": [r[0][3] for r in rows],
            "record_ids": [r[1] for r in rows],
            "actors": [r[2] for r in rows],
            "rationales": [r[3] for r in rows],
            "created": [now] * len(rows),
            "ranks": [r[4] for r in rows],
        },
    )


def clear_tombstones(conn: psycopg.Connection, keys: Iterable[tuple[FactKey, int]]) -> list[Tombstone]:
    """RFC 5.4: remove the tombstones that bind re-asserted ``(key, level)``s (RFC 3.4);
    returns what they recorded."""
    uniq = sorted(set(keys))
    if not uniq:
        return []
    cur = conn.cursor(row_factory=dict_row).execute(
        q("revision_clear_tombstones"),
        {
            "scopes": [k[0][0] for k in uniq],
            "subjects": [k[0][1] for k in uniq],
            "predicates": [k[0][2] for k in uniq],
            "objects": [k[0][3] for k in uniq],
            "ranks": [k[1] for k in uniq],
        },
    )
    return [Tombstone.from_row(**r) for r in cur.fetchall()]
