"""Reading the append-only audit log and hard deletion (RFC 5.5)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import psycopg

from membrane_core.enums import AuditAction, DeletionPolicy, MemoryType, RevisionStatus, Sensitivity
from membrane_core.storage.queries import q
from membrane_core.storage.rows import fetch_all, fetch_one


@dataclass(frozen=True)
class AuditRow:
    """One ``audit_log`` row, with ``details_text`` exactly as its content digest saw it;
    ``erased_by`` names the erasure that blanked its rationale and details (RFC 15.4)."""

    id: int
    record_id: uuid.UUID
    scope: str
    sensitivity: Sensitivity
    action: AuditAction
    actor: str
    ts: datetime
    rationale: str
    details: dict[str, Any]
    details_text: str
    prev_hash: bytes | None
    hash: bytes
    content_digest: bytes
    erased_by: uuid.UUID | None = None

    @classmethod
    def from_row(
        cls, *, sensitivity: str, action: str, prev_hash: Any, hash: Any, content_digest: Any, **rest: Any
    ) -> AuditRow:
        """The row with enums and the hashes as ``bytes``."""
        return cls(
            sensitivity=Sensitivity(sensitivity),
            action=AuditAction(action),
            prev_hash=bytes(prev_hash) if prev_hash is not None else None,
            hash=bytes(hash),
            content_digest=bytes(content_digest),
            **rest,
        )


@dataclass(frozen=True)
class DeleteTarget:
    """A record locked for hard deletion."""

    id: uuid.UUID
    type: MemoryType
    scope: str
    sensitivity: Sensitivity
    status: RevisionStatus
    deletion_policy: DeletionPolicy

    @classmethod
    def from_row(
        cls, *, type: str, sensitivity: str, status: str, deletion_policy: str, **rest: Any
    ) -> DeleteTarget:
        """The row with its enums."""
        return cls(
            type=MemoryType(type),
            sensitivity=Sensitivity(sensitivity),
            status=RevisionStatus(status),
            deletion_policy=DeletionPolicy(deletion_policy),
            **rest,
        )


def entries(conn: psycopg.Connection, record_id: uuid.UUID) -> list[AuditRow]:
    """RFC 5.5: every entry of a record in append order (the record may be deleted)."""
    return fetch_all(conn, AuditRow, q("audit_entries"), {"id": record_id})


def lock_for_delete(conn: psycopg.Connection, record_id: uuid.UUID) -> DeleteTarget | None:
    """Lock a record for deletion; ``None`` when it does not exist."""
    return fetch_one(conn, DeleteTarget, q("audit_lock_for_delete"), {"id": record_id})


def delete_record(conn: psycopg.Connection, record_id: uuid.UUID) -> None:
    """RFC 5.5: delete the record (children cascade) and its work items; the audit log stays."""
    conn.execute(q("audit_delete_record"), {"id": record_id})
    conn.execute(q("audit_delete_work"), {"id": record_id})
