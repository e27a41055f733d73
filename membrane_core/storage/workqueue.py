"""The ``work_items`` queue: bounded claims with ``SKIP LOCKED`` (RFC 9.3, 9.4).

Items are written in the transaction of the change that causes them
(:class:`membrane_core.storage.records.RowBatch`); a batch job claims at most
``limit`` due items of one kind, so its cost follows the work that is due, not the
size of the store.
"""

from __future__ import annotations

import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from membrane_core.enums import WorkKind
from membrane_core.storage.queries import q


def worker_name() -> str:
    """This process's claim owner, ``host:pid``: what a lease names (RFC 9.4)."""
    return f"{socket.gethostname()}:{os.getpid()}"


#: RFC 9.4: attempts after which an item is marked dead instead of retried.
MAX_ATTEMPTS = 5


@dataclass(frozen=True)
class WorkItem:
    """A claimed work item."""

    id: int
    kind: WorkKind
    target_id: uuid.UUID
    attempts: int
    due_at: datetime


def claim(
    conn: psycopg.Connection, kind: WorkKind, *, owner: str, limit: int, now: datetime,
    lease_seconds: int = 300,
) -> list[WorkItem]:
    """RFC 9.4: claim up to ``limit`` due items of ``kind`` for ``lease_seconds``."""
    cur = conn.execute(q("claim_work"), {
        "owner": owner, "now": now, "lease_seconds": lease_seconds, "kind": kind.value,
        "limit": limit,
    })
    return [WorkItem(r[0], WorkKind(r[1]), r[2], r[3], r[4]) for r in cur.fetchall()]


def complete(conn: psycopg.Connection, ids: Sequence[int], *, owner: str) -> int:
    """Delete finished items the caller still holds; returns how many."""
    if not ids:
        return 0
    return conn.execute(q("complete_work"), {"ids": list(ids), "owner": owner}).rowcount


def reschedule(
    conn: psycopg.Connection, items: Sequence[tuple[int, datetime, str | None]], *, owner: str
) -> int:
    """Release ``(id, due_at, error)`` items with a new due time; ``error`` None resets attempts."""
    if not items:
        return 0
    ids, due, errs = zip(*items, strict=True)
    return conn.execute(q("reschedule_work"), {
        "ids": list(ids), "due": list(due), "errors": list(errs), "owner": owner,
    }).rowcount


def bury(conn: psycopg.Connection, items: Sequence[tuple[int, str]], *, owner: str) -> int:
    """Mark ``(id, error)`` items dead (RFC 9.4)."""
    if not items:
        return 0
    ids, errs = zip(*items, strict=True)
    return conn.execute(q("bury_work"), {"ids": list(ids), "errors": list(errs),
                                         "owner": owner}).rowcount


def reap(conn: psycopg.Connection, *, now: datetime) -> int:
    """Release expired claims; returns how many (RFC 9.4)."""
    return conn.execute(q("reap_expired_claims"), {"now": now}).rowcount


def backlog(conn: psycopg.Connection, *, now: datetime) -> list[dict[str, Any]]:
    """Work backlog by kind (RFC 14.2)."""
    cur = conn.execute(q("work_backlog"), {"now": now})
    cols = [c.name for c in cur.description or []]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]
