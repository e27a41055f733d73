"""Proposals awaiting review: writing, corroborating, deciding and listing them (RFC 5.7)."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg

from membrane_core.capture.plan import new_id
from membrane_core.enums import Sensitivity
from membrane_core.storage.queries import q
from membrane_core.storage.rows import fetch_all, fetch_one


@dataclass(frozen=True)
class ProposalRow:
    """A ``proposals`` row (RFC 5.7)."""

    id: uuid.UUID
    scope: str
    sensitivity: str
    source: str
    proposed_by: str
    actors: list[str]
    corroborations: int
    status: str
    created_at: datetime
    expires_at: datetime
    decided_by: str | None
    decided_at: datetime | None
    rationale: str | None


@dataclass
class Book:
    """The proposals one write makes or corroborates, flushed in a few statements after its
    records (RFC 5.7): new proposals, their records, and corroborations of pending ones."""

    now: datetime
    ttl: timedelta
    new: list[tuple[uuid.UUID, str, str, str, str]] = field(default_factory=list)
    members: list[tuple[uuid.UUID, uuid.UUID]] = field(default_factory=list)
    corroborations: list[tuple[uuid.UUID, str, int]] = field(default_factory=list)

    def propose(self, scope: str, sensitivity: Sensitivity, source: str, actor: str) -> uuid.UUID:
        """A new proposal of ``actor``'s write; its records are added with :meth:`add`."""
        pid = new_id()  # time-ordered: proposals of one batch list in the order they were made
        self.new.append((pid, scope, sensitivity.value, source, actor))
        return pid

    def add(self, proposal_id: uuid.UUID, record_ids: Sequence[uuid.UUID]) -> None:
        """Records that join a proposal (new or pending)."""
        self.members.extend((rid, proposal_id) for rid in record_ids)

    def corroborate(self, proposal_id: uuid.UUID, actor: str, rank: int) -> None:
        """One corroboration of a pending proposal by ``actor``'s write at level ``rank``."""
        self.corroborations.append((proposal_id, actor, rank))

    def drop(self, proposal_id: uuid.UUID) -> None:
        """A new proposal not made after all: its write joined a pending one."""
        self.new = [row for row in self.new if row[0] != proposal_id]

    def flush(self, conn: psycopg.Connection) -> None:
        """Write the proposals, then their records, then the corroborations."""
        cur = conn.cursor()
        if self.new:
            cur.execute(
                q("proposal_insert"),
                {
                    "ids": [r[0] for r in self.new],
                    "scopes": [r[1] for r in self.new],
                    "sensitivities": [r[2] for r in self.new],
                    "sources": [r[3] for r in self.new],
                    "actors": [r[4] for r in self.new],
                    "created": [self.now] * len(self.new),
                    "expires": [self.now + self.ttl] * len(self.new),
                },
            )
        if self.members:
            cur.execute(
                q("proposal_records_insert"),
                {"records": [m[0] for m in self.members], "proposals": [m[1] for m in self.members]},
            )
        if self.corroborations:
            cur.execute(
                q("proposal_corroborate"),
                {
                    "ids": [c[0] for c in self.corroborations],
                    "actors": [c[1] for c in self.corroborations],
                    "ranks": [c[2] for c in self.corroborations],
                },
            )


def pending_of(conn: psycopg.Connection, record_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, uuid.UUID]:
    """The pending proposal of each record among ``record_ids`` that has one."""
    if not record_ids:
        return {}
    cur = conn.execute(q("proposal_of_records"), {"ids": list(record_ids)})
    return {rid: pid for rid, pid in cur.fetchall()}


def lock(conn: psycopg.Connection, proposal_id: uuid.UUID) -> ProposalRow | None:
    """One proposal, locked for its decision."""
    return fetch_one(conn, ProposalRow, q("proposal_lock"), {"id": proposal_id})


def record_ids(conn: psycopg.Connection, proposal_id: uuid.UUID) -> list[uuid.UUID]:
    """The records of a proposal, by id (their lock order)."""
    return [r[0] for r in conn.execute(q("proposal_record_ids"), {"id": proposal_id}).fetchall()]


def decide(
    conn: psycopg.Connection,
    proposal_id: uuid.UUID,
    *,
    outcome: str,
    actor: str,
    rationale: str | None,
    now: datetime,
) -> None:
    """A pending proposal's outcome."""
    conn.execute(
        q("proposal_decide"),
        {"id": proposal_id, "outcome": outcome, "actor": actor, "rationale": rationale, "now": now},
    )


def settle(conn: psycopg.Connection, ids: Sequence[uuid.UUID], status: str, now: datetime) -> None:
    """The records of a decided proposal take ``status`` (those still proposed) and the
    decision's time (RFC 5.6: before it they read proposed)."""
    conn.execute(q("review_settle"), {"ids": list(ids), "status": status, "now": now})


def conflicts(
    conn: psycopg.Connection, keys: Mapping[uuid.UUID, tuple[str, str, str, str]], max_rank: int
) -> dict[uuid.UUID, list[uuid.UUID]]:
    """For each fact's key: the active facts with its scope, subject and predicate and another
    object, at levels up to ``max_rank`` (RFC 5.7), in one statement."""
    out: dict[uuid.UUID, list[uuid.UUID]] = {fid: [] for fid in keys}
    if not keys:
        return out
    ids = list(keys)
    params = {
        "ids": ids,
        "scopes": [keys[i][0] for i in ids],
        "subjects": [keys[i][1] for i in ids],
        "predicates": [keys[i][2] for i in ids],
        "objects": [keys[i][3] for i in ids],
        "max_rank": max_rank,
    }
    for fid, rid in conn.execute(q("review_conflicts_many"), params).fetchall():
        out[fid].append(rid)
    return out


def sources(conn: psycopg.Connection, fact_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The records each fact derives from (RFC 3.4)."""
    out: dict[uuid.UUID, list[uuid.UUID]] = {fid: [] for fid in fact_ids}
    if fact_ids:
        for fid, rid in conn.execute(q("review_sources"), {"ids": list(fact_ids)}).fetchall():
            out[fid].append(rid)
    return out


@dataclass(frozen=True)
class QueuePosition:
    """A keyset position in the queue: the last proposal of the previous page."""

    created_at: datetime
    id: uuid.UUID
    corroborations: int = 0


def queue(
    conn: psycopg.Connection,
    *,
    order: str,
    scopes: Sequence[str] | None,
    max_rank: int,
    actor: str,
    after: QueuePosition | None,
    limit: int,
) -> list[ProposalRow]:
    """RFC 5.7: up to ``limit`` pending proposals the caller may decide, after ``after``."""
    params = {
        "all_scopes": scopes is None,
        "scopes": list(scopes or []),
        "max_rank": max_rank,
        "actor": actor,
        "after_created": after.created_at if after else None,
        "after_id": after.id if after else None,
        "after_count": after.corroborations if after else 0,
        "limit": limit,
    }
    name = "review_queue_corroboration" if order == "corroboration" else "review_queue_age"
    return fetch_all(conn, ProposalRow, q(name), params)


def members(conn: psycopg.Connection, proposal_ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, list[uuid.UUID]]:
    """The records of each proposal."""
    out: dict[uuid.UUID, list[uuid.UUID]] = {pid: [] for pid in proposal_ids}
    for pid, rid in conn.execute(q("review_members"), {"ids": list(proposal_ids)}).fetchall():
        out[pid].append(rid)
    return out


def expired(conn: psycopg.Connection, now: datetime, limit: int) -> list[uuid.UUID]:
    """Up to ``limit`` pending proposals past their expiry (unlocked: the caller locks each)."""
    return [r[0] for r in conn.execute(q("review_expired"), {"now": now, "limit": limit}).fetchall()]


@dataclass(frozen=True)
class QueueGauge:
    """Pending proposals of a scope (RFC 14.2)."""

    scope: str
    depth: int
    oldest: datetime


def gauges(conn: psycopg.Connection) -> tuple[list[QueueGauge], dict[str, int]]:
    """RFC 14.2: the queue by scope, and decided proposals by outcome."""
    queue_rows = fetch_all(conn, QueueGauge, q("review_queue_gauges"))
    decided = {status: int(n) for status, n in conn.execute(q("review_decisions_count")).fetchall()}
    return queue_rows, decided
