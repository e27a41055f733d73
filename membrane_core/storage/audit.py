"""Reading the append-only audit log and hard deletion (RFC 5.5)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from membrane_core.storage.queries import q


@dataclass(frozen=True)
class AuditRow:
    """One ``audit_log`` row, with ``details_text`` exactly as the chain hash saw it."""

    id: int
    record_id: uuid.UUID
    scope: str
    sensitivity: str
    action: str
    actor: str
    ts: datetime
    rationale: str
    details: dict[str, Any]
    details_text: str
    prev_hash: bytes | None
    hash: bytes


@dataclass(frozen=True)
class DeleteTarget:
    """A record locked for hard deletion."""

    id: uuid.UUID
    type: str
    scope: str
    sensitivity: str
    status: str
    deletion_policy: str


def entries(conn: psycopg.Connection, record_id: uuid.UUID) -> list[AuditRow]:
    """RFC 5.5: every entry of a record in append order (the record may be deleted)."""
    cur = conn.execute(q("audit_entries"), {"id": record_id})
    return [
        AuditRow(r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], r[9],
                 bytes(r[10]) if r[10] is not None else None, bytes(r[11]))
        for r in cur.fetchall()
    ]


def lock_for_delete(conn: psycopg.Connection, record_id: uuid.UUID) -> DeleteTarget | None:
    """Lock a record for deletion; ``None`` when it does not exist."""
    row = conn.execute(q("audit_lock_for_delete"), {"id": record_id}).fetchone()
    return DeleteTarget(*row) if row else None


def delete_record(conn: psycopg.Connection, record_id: uuid.UUID) -> None:
    """RFC 5.5: delete the record (children cascade) and its work items; the audit log stays."""
    conn.execute(q("audit_delete_record"), {"id": record_id})
    conn.execute(q("audit_delete_work"), {"id": record_id})
