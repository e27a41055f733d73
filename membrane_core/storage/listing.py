"""Lists in keyset pages: records, lineage, operations, the work queue, scopes (RFC 10.7)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

import psycopg
from psycopg.rows import dict_row

from membrane_core.storage import audit
from membrane_core.storage.queries import Shaped, q, shaped
from membrane_core.storage.retrieval import ReadFilter, Stored, stored
from membrane_core.storage.rows import fetch_all

#: RFC 10.7: how a page of records reads its scopes: the listed scopes' indexes merged, or
#: every scope's (found by a loose scan of the index).
ScopePlan = Literal["listed", "every"]

#: RFC 10.7: the relations a lineage walks (RFC 5.2: supersede, merge, fork, contest).
CORRECTIONS = ("supersedes", "superseded_by", "derived_from", "contests", "contested_by")


@dataclass(frozen=True)
class Position:
    """A keyset position: the last row of the previous page, newest first."""

    created_at: datetime
    id: uuid.UUID


@dataclass(frozen=True)
class RecordQuery:
    """RFC 10.7: one page of records. ``filter`` holds the predicates retrieval applies (RFC
    8.1: trust, time, status, types, tags); the rest are the list's own, each ``None`` when
    not asked for. ``scopes`` are already narrowed to the caller's policy."""

    filter: ReadFilter
    plan: ScopePlan
    scopes: Sequence[str]
    limit: int
    max_bytes: int
    statuses: Sequence[str] | None = None
    ranks: Sequence[int] | None = None
    entity: uuid.UUID | None = None
    subjects: Sequence[str] | None = None
    predicates: Sequence[str] | None = None
    created: tuple[datetime | None, datetime | None] = (None, None)
    occurred: tuple[datetime | None, datetime | None] = (None, None)
    valid: tuple[datetime | None, datetime | None] = (None, None)
    after: Position | None = None

    def shaped(self) -> Shaped:
        """The statement of this page, its shape chosen by the scope plan (RFC 8.1.5)."""
        return shaped(
            "list_records",
            {
                **self.filter.params(),
                "every_scope": self.plan == "every",
                "one_scope": self.plan == "listed" and len(self.scopes) == 1,
                "many_scopes": self.plan == "listed" and len(self.scopes) != 1,
                "positioned": self.after is not None,
                "scopes": list(self.scopes),
                "statuses": list(self.statuses) if self.statuses is not None else None,
                "ranks": list(self.ranks) if self.ranks is not None else None,
                "entity": self.entity,
                "subjects": list(self.subjects) if self.subjects is not None else None,
                "predicates": list(self.predicates) if self.predicates is not None else None,
                "created_after": self.created[0],
                "created_before": self.created[1],
                "occurred_after": self.occurred[0],
                "occurred_before": self.occurred[1],
                "valid_after": self.valid[0],
                "valid_before": self.valid[1],
                "after_created": self.after.created_at if self.after else None,
                "after_id": self.after.id if self.after else None,
                "limit": self.limit,
                "rows": self.limit + 1,
                "max_bytes": self.max_bytes,
            },
            # the row limits are written in: under a bound LIMIT a generic plan expects more
            # rows, loses to a custom plan, and every call is planned again (RFC 10.7)
            ints=("max_rank", "limit", "rows"),
        )


@dataclass(frozen=True)
class Listed:
    """A row of a page (RFC 10.7): its place, projected and running bytes, whether it fits
    the page, its status as of the read, and the hydrated record when it fits."""

    ord: int
    id: uuid.UUID
    created_at: datetime
    bytes: int
    running: int
    fits: bool
    status: str
    record: Stored | None


def _execute(conn: psycopg.Connection, st: Shaped) -> list[dict[str, Any]]:
    cur: psycopg.RawCursor[dict[str, Any]] = psycopg.RawCursor(conn, row_factory=dict_row)
    cur.execute(st.sql, st.values, prepare=True, binary=True)
    return cur.fetchall()


def records_page(
    conn: psycopg.Connection, query: RecordQuery, target_visible: Callable[[str, str], bool]
) -> list[Listed]:
    """RFC 10.7: the page's rows, one more than ``limit`` when more match; relations only to
    targets shown in full (RFC 2.5)."""
    out = []
    for row in _execute(conn, query.shaped()):
        record = stored(row, target_visible) if row["fits"] and row["id"] is not None else None
        out.append(
            Listed(
                ord=row["ord"],
                id=row["listed_id"],
                created_at=row["listed_created_at"],
                bytes=row["bytes"],
                running=row["running"],
                fits=row["fits"],
                status=row["status_as_of"],
                record=record,
            )
        )
    return out


def bare_page(
    conn: psycopg.Connection, scope: str, limit: int, after: Position | None
) -> list[tuple[uuid.UUID, datetime]]:
    """RFC 14.1: the benchmark's baseline: one scope's newest ids by the index alone."""
    params = {
        "scope": scope,
        "limit": limit,
        "after_created": after.created_at if after else None,
        "after_id": after.id if after else None,
    }
    return [(r[0], r[1]) for r in conn.execute(q("list_records_bare"), params, prepare=True).fetchall()]


@dataclass(frozen=True)
class LineageNode:
    """A record a lineage walk reached: its depth and what its trust check reads."""

    id: uuid.UUID
    depth: int
    scope: str
    sensitivity: str
    status: str
    recorded_at: datetime


@dataclass(frozen=True)
class LineageRelation:
    """A correction relation between two records of a lineage."""

    source_id: uuid.UUID
    predicate: str
    target_id: uuid.UUID
    created_at: datetime


def lineage(
    conn: psycopg.Connection,
    record_id: uuid.UUID,
    *,
    as_of: datetime | None,
    max_nodes: int,
    max_depth: int,
) -> tuple[list[LineageNode], list[LineageRelation], list[audit.AuditRow]]:
    """RFC 10.7: the records connected to ``record_id`` by corrections (at most
    ``max_nodes + 1``, nearest first), the relations among them and their correction entries."""
    params = {
        "id": record_id,
        "as_of": as_of,
        "predicates": list(CORRECTIONS),
        "max_nodes": max_nodes,
        "max_depth": max_depth,
    }
    nodes = fetch_all(conn, LineageNode, q("lineage_walk"), params)
    ids = [n.id for n in nodes[:max_nodes]]
    rels = fetch_all(
        conn,
        LineageRelation,
        q("lineage_edges"),
        {"ids": ids, "predicates": list(CORRECTIONS), "as_of": as_of},
    )
    entries = fetch_all(conn, audit.AuditRow, q("lineage_audit"), {"ids": ids, "as_of": as_of})
    return nodes, rels, entries


@dataclass(frozen=True)
class OperationRow:
    """An operation as a list shows it (RFC 10.7)."""

    id: uuid.UUID
    kind: str
    status: str
    principal: str
    record_id: uuid.UUID | None
    record_ids: list[uuid.UUID]
    error: dict[str, Any] | None
    result: dict[str, Any] | None
    created_at: datetime
    finished_at: datetime | None
    request_id: str | None
    target_id: uuid.UUID | None
    attempts: int
    scope: str | None


def operations_page(
    conn: psycopg.Connection,
    *,
    principal: str | None,
    kinds: Sequence[str] | None,
    statuses: Sequence[str] | None,
    scope: str | None,
    created: tuple[datetime | None, datetime | None],
    after: Position | None,
    limit: int,
) -> list[OperationRow]:
    """RFC 10.7: up to ``limit`` operations, newest first, after ``after``."""
    return fetch_all(
        conn,
        OperationRow,
        q("list_operations"),
        {
            "principal": principal,
            "kinds": list(kinds) if kinds is not None else None,
            "statuses": list(statuses) if statuses is not None else None,
            "scope": scope,
            "created_after": created[0],
            "created_before": created[1],
            "after_created": after.created_at if after else None,
            "after_id": after.id if after else None,
            "limit": limit,
        },
    )


@dataclass(frozen=True)
class JobRow:
    """One job's items by state (RFC 10.7)."""

    kind: str
    due: int
    claimed: int
    retrying: int
    buried: int
    pending: int
    oldest_due_at: datetime | None


@dataclass(frozen=True)
class BuriedRow:
    """A buried work item (RFC 9.4)."""

    id: int
    kind: str
    target_id: uuid.UUID
    attempts: int
    last_error: str | None
    due_at: datetime
    created_at: datetime


def jobs(conn: psycopg.Connection, now: datetime) -> list[JobRow]:
    """RFC 10.7: every job that has items, by state."""
    return fetch_all(conn, JobRow, q("work_jobs"), {"now": now})


def buried(
    conn: psycopg.Connection, kinds: Sequence[str] | None, after: int | None, limit: int
) -> list[BuriedRow]:
    """RFC 10.7: up to ``limit`` buried items by id after ``after``."""
    params = {"kinds": list(kinds) if kinds is not None else None, "after": after, "limit": limit}
    return fetch_all(conn, BuriedRow, q("work_buried"), params)


@dataclass(frozen=True)
class Requeued:
    """A work item put back, with its record's scope and sensitivity (RFC 10.7)."""

    id: int
    kind: str
    target_id: uuid.UUID
    last_error: str | None
    scope: str
    sensitivity: str


def requeue(conn: psycopg.Connection, ids: Sequence[int], now: datetime) -> list[Requeued]:
    """RFC 10.7: put the buried items among ``ids`` whose record exists back, due ``now``,
    their records locked first (RFC 5.5: the audit entries written next chain safely)."""
    conn.execute(q("work_requeue_lock"), {"ids": list(ids)})
    return fetch_all(conn, Requeued, q("work_requeue"), {"ids": list(ids), "now": now})


def audit_requeues(
    conn: psycopg.Connection,
    entries: Sequence[tuple[uuid.UUID, str, str, str, dict[str, Any]]],
    *,
    actor: str,
    now: datetime,
) -> None:
    """RFC 10.7, 5.5: one ``requeue`` entry per ``(record_id, scope, sensitivity, rationale,
    details)``, in one statement."""
    if not entries:
        return
    conn.execute(
        q("work_requeue_audit"),
        {
            "record_ids": [e[0] for e in entries],
            "scopes": [e[1] for e in entries],
            "sensitivities": [e[2] for e in entries],
            "rationales": [e[3] for e in entries],
            "details": [json.dumps(e[4], separators=(",", ":")) for e in entries],
            "actor": actor,
            "now": now,
        },
    )


@dataclass(frozen=True)
class InboxRow:
    """Operations of one kind and status (RFC 10.7)."""

    kind: str
    status: str
    count: int


def inbox_counts(conn: psycopg.Connection) -> list[InboxRow]:
    """RFC 10.7: queued, running and failed operations by kind."""
    return fetch_all(conn, InboxRow, q("inbox_counts"))


@dataclass(frozen=True)
class ScopeRow:
    """A scope's records by status (RFC 10.7)."""

    scope: str
    records: int
    active: int
    contested: int
    retracted: int
    proposed: int


def scope_counts(conn: psycopg.Connection, f: ReadFilter, limit: int) -> list[ScopeRow]:
    """RFC 10.7: the records of each scope ``f`` reads, by status."""
    st = shaped("scope_counts", {**f.params(), "limit": limit}, ints=("max_rank",))
    cur: psycopg.RawCursor[Any] = psycopg.RawCursor(conn)
    cur.execute(st.sql, st.values, prepare=True, binary=True)
    return [ScopeRow(*row) for row in cur.fetchall()]
