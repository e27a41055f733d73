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
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol, TypeVar

import psycopg

from membrane_core.enums import WorkKind
from membrane_core.storage.db import Connection, Database
from membrane_core.storage.queries import q
from membrane_core.storage.rows import fetch_all

#: One chunk of a store-wide enqueue: ``(connection, cursor) -> (next cursor, records read,
#: items written)``, the cursor the last record id read (None before the first).
ChunkStep = Callable[[Connection, uuid.UUID | None], tuple[uuid.UUID | None, int, int]]


def enqueue_in_chunks(
    db: Database, step: ChunkStep, *, chunk: int, on_chunk: Callable[[int, int], None] | None = None
) -> int:
    """RFC 9.3: run ``step`` over the store by id, one transaction a chunk of ``chunk``
    records, so that traffic goes on; ``on_chunk(records read, items written)`` after each.
    Returns the items written (RFC 7.6 rotation, 12.5 embedding again)."""
    after: uuid.UUID | None = None
    total = 0
    while True:
        with db.transaction() as conn:
            after, read, queued = step(conn, after)
        total += queued
        if on_chunk is not None:
            on_chunk(read, queued)
        if read < chunk:
            return total


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

    @classmethod
    def from_row(cls, *, kind: str, **rest: Any) -> WorkItem:
        """The row with its kind as an enum."""
        return cls(kind=WorkKind(kind), **rest)


def claim(
    conn: psycopg.Connection,
    kind: WorkKind,
    *,
    owner: str,
    limit: int,
    now: datetime,
    lease_seconds: int = 300,
) -> list[WorkItem]:
    """RFC 9.4: claim up to ``limit`` due items of ``kind`` for ``lease_seconds``."""
    return fetch_all(
        conn,
        WorkItem,
        q("claim_work"),
        {
            "owner": owner,
            "now": now,
            "lease_seconds": lease_seconds,
            "kind": kind.value,
            "limit": limit,
        },
    )


def hold(conn: psycopg.Connection, ids: Sequence[int], *, owner: str) -> dict[int, uuid.UUID]:
    """Lock the claimed items ``owner`` still holds, in id order; ``{item id: target id}``.

    RFC 9.4: an item whose lease lapsed and was claimed again is not returned, so a slow
    worker never writes what another one took over.
    """
    if not ids:
        return {}
    cur = conn.execute(q("hold_work"), {"ids": list(ids), "owner": owner})
    return {item_id: target for item_id, target in cur.fetchall()}


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
    return conn.execute(
        q("reschedule_work"),
        {
            "ids": list(ids),
            "due": list(due),
            "errors": list(errs),
            "owner": owner,
        },
    ).rowcount


def bury(conn: psycopg.Connection, items: Sequence[tuple[int, str]], *, owner: str) -> int:
    """Mark ``(id, error)`` items dead (RFC 9.4)."""
    if not items:
        return 0
    ids, errs = zip(*items, strict=True)
    return conn.execute(q("bury_work"), {"ids": list(ids), "errors": list(errs), "owner": owner}).rowcount


def release(conn: psycopg.Connection, ids: Sequence[int], *, owner: str) -> int:
    """RFC 9.4: give back the items of ``ids`` that ``owner`` still holds, due as they were and
    their claim's attempt not counted; returns how many."""
    if not ids:
        return 0
    return conn.execute(q("release_work"), {"ids": list(ids), "owner": owner}).rowcount


def reap(conn: psycopg.Connection, *, now: datetime) -> int:
    """Release expired claims; returns how many (RFC 9.4)."""
    return conn.execute(q("reap_expired_claims"), {"now": now}).rowcount


def backlog(conn: psycopg.Connection, *, now: datetime) -> list[dict[str, Any]]:
    """Work backlog by kind (RFC 14.2)."""
    cur = conn.execute(q("work_backlog"), {"now": now})
    cols = [c.name for c in cur.description or []]
    return [dict(zip(cols, row, strict=True)) for row in cur.fetchall()]


class Decision(Protocol):
    """What a job decided for the items it held: complete ``done``, release ``later``."""

    @property
    def done(self) -> list[int]: ...

    @property
    def later(self) -> list[tuple[int, datetime]]: ...


D = TypeVar("D", bound=Decision)


class WorkQueue:
    """The work-item queue of one database, as the batch runner uses it (RFC 9.4)."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def claim(
        self, kind: WorkKind, *, owner: str, limit: int, now: datetime, lease_seconds: int
    ) -> list[WorkItem]:
        """RFC 9.4: claim up to ``limit`` due items of ``kind`` in a transaction of its own."""
        with self._db.transaction() as conn:
            return claim(conn, kind, owner=owner, limit=limit, now=now, lease_seconds=lease_seconds)

    def apply(
        self, ids: Sequence[int], *, owner: str, work: Callable[[Connection, dict[int, uuid.UUID]], D]
    ) -> tuple[D, int]:
        """In one transaction: hold ``ids``, run ``work``, complete and release what it says."""
        with self._db.transaction() as conn:
            held = hold(conn, ids, owner=owner)
            out = work(conn, held)
            complete(conn, out.done, owner=owner)
            reschedule(conn, [(i, due, None) for i, due in out.later], owner=owner)
        return out, len(held)

    def fail(
        self, again: Sequence[tuple[int, datetime, str]], dead: Sequence[tuple[int, str]], *, owner: str
    ) -> None:
        """RFC 9.4: release ``again`` with a due time and an error; bury ``dead``."""
        with self._db.transaction() as conn:
            reschedule(conn, list(again), owner=owner)
            bury(conn, list(dead), owner=owner)

    def release(self, ids: Sequence[int], *, owner: str) -> int:
        """RFC 9.4: give back what ``owner`` still holds of ``ids``, the attempt not counted."""
        with self._db.transaction() as conn:
            return release(conn, ids, owner=owner)
