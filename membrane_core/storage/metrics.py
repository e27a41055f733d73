"""Aggregates behind ``Membrane.metrics`` (RFC 14.2); every record count is trust-filtered in SQL."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg
from psycopg.rows import dict_row

from membrane_core.enums import WorkKind
from membrane_core.storage import workqueue
from membrane_core.storage.queries import q
from membrane_core.storage.rows import fetch_all


@dataclass(frozen=True)
class Readable:
    """What the caller may read: scopes (``None`` for every scope) and a maximum sensitivity rank."""

    scopes: list[str] | None
    max_rank: int
    now: datetime

    def params(self) -> dict[str, Any]:
        """Query parameters of the trust predicate."""
        return {
            "all_scopes": self.scopes is None,
            "scopes": self.scopes or [],
            "max_rank": self.max_rank,
            "now": self.now,
        }


def collect(conn: psycopg.Connection, readable: Readable, *, deployment: bool) -> dict[str, Any]:
    """RFC 14.2: raw aggregates: records, by type and status, procedural, audit; with
    ``deployment``, also the inbox and the work backlog (``None`` without)."""
    p = readable.params()
    cur = conn.cursor(row_factory=dict_row)
    records = cur.execute(q("metrics_records"), p).fetchone() or {}
    by = cur.execute(q("metrics_by_type_status"), p).fetchall()
    procedural = cur.execute(q("metrics_procedural"), p).fetchone() or {}
    audit_row = conn.execute(q("metrics_audit"), p).fetchone()
    raw: dict[str, Any] = {
        "records": dict(records),
        "by_type_status": [dict(r) for r in by],
        "procedural": dict(procedural),
        "audit_entries": int(audit_row[0]) if audit_row else 0,
        "operations": None,
        "backlog": None,
    }
    if deployment:
        raw["operations"] = [dict(r) for r in cur.execute(q("metrics_operations")).fetchall()]
        raw["backlog"] = workqueue.backlog(conn, now=readable.now)
    return raw


@dataclass(frozen=True)
class GaugeSample:
    """One sample of the deployment gauges: which gauge, its kind (and status), its value."""

    gauge: str
    kind: str
    status: str | None
    value: float


def deployment(conn: psycopg.Connection, *, now: datetime) -> list[GaugeSample]:
    """RFC 14.2: the deployment gauges of a Prometheus scrape, in one statement that reads
    only pending operations and due work items (the queues' partial indexes)."""
    params = {"now": now, "work_kinds": [k.value for k in WorkKind]}
    return fetch_all(conn, GaugeSample, q("metrics_deployment"), params)
