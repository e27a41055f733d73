"""The audit log as callers see it: history with chain verification, and hard deletion (RFC 5.5).

The chain hash is computed by a database trigger (``audit_entry_hash`` in
``schema.sql``); :func:`entry_hash` is its exact Python twin, so a reader verifies
the chain without trusting the database function that wrote it.
"""

from __future__ import annotations

import contextlib
import hashlib
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from membrane_core import errors
from membrane_core.enums import AuditAction, DeletionPolicy, Sensitivity
from membrane_core.models import AuditEntry, AuditHistory
from membrane_core.revision.rules import require_trusted_writer
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage import audit, records, retrieval
from membrane_core.storage.db import Connection, Database
from membrane_core.storage.rowbatch import SEALED_RATIONALE
from membrane_core.trust import TrustPolicy

_SEP = "\x1f"  # chr(31), the field separator of audit_entry_hash


def content_digest(rationale: str, details_text: str) -> bytes:
    """RFC 5.5: ``sha256(rationale US details)``, the part of an entry an erasure may blank."""
    return hashlib.sha256(_SEP.join((rationale, details_text)).encode("utf-8")).digest()


def entry_hash(
    prev: bytes | None,
    record_id: uuid.UUID,
    action: str,
    actor: str,
    ts: datetime,
    digest: bytes,
) -> bytes:
    """RFC 5.5: ``sha256(prev_hash || record_id, action, actor, ts, hex(content_digest))``.

    ``ts`` is rendered in UTC with microseconds (``to_char(.., 'YYYY-MM-DD"T"HH24:MI:SS.US')``).
    """
    stamp = ts.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")
    text = _SEP.join((str(record_id), action, actor, stamp, digest.hex()))
    return hashlib.sha256((prev or b"") + text.encode("utf-8")).digest()


def broken_link(rows: Sequence[audit.AuditRow]) -> int | None:
    """RFC 5.5: the position of the first entry whose link, hash or content digest does not
    verify; ``None`` when the whole chain does. An erased entry (RFC 15.4) verifies by its
    stored digest: its text is gone, the chain through it is not."""
    prev: bytes | None = None
    for n, row in enumerate(rows):
        if row.prev_hash != prev:
            return n
        if row.erased_by is None and row.content_digest != content_digest(row.rationale, row.details_text):
            return n
        if row.hash != entry_hash(prev, row.record_id, row.action, row.actor, row.ts, row.content_digest):
            return n
        prev = row.hash
    return None


def verify_chain(rows: Sequence[audit.AuditRow]) -> bool:
    """RFC 5.5: every entry links to its predecessor's hash and its own hash recomputes."""
    return broken_link(rows) is None


#: RFC 5.5, 7.3: detail fields that name other records (one id, or a list of them).
REFERENCE_KEYS = (
    "superseded_by",
    "supersedes",
    "variant_id",
    "forked_from",
    "merged_from",
    "merged_into",
    "contesting_record_id",
    "source_id",
)


def _named(details: dict[str, Any]) -> list[str]:
    out: list[str] = []
    for key in REFERENCE_KEYS:
        value = details.get(key)
        out.extend(value if isinstance(value, list) else [value] if value is not None else [])
    return [v for v in out if isinstance(v, str)]


def _shown(conn: Connection, trust: TrustPolicy, rows: Sequence[audit.AuditRow]) -> set[str]:
    """The records the entries' details name that ``trust`` sees in full (one statement)."""
    ids: set[uuid.UUID] = set()
    for row in rows:
        for value in _named(row.details):
            with contextlib.suppress(ValueError):
                ids.add(uuid.UUID(value))
    return {
        str(i)
        for i, a in retrieval.access(conn, sorted(ids)).items()
        if trust.visibility(a.scope, a.sensitivity) == "full"
    }


def _with_shown_references(details: dict[str, Any], shown: set[str]) -> dict[str, Any]:
    """RFC 7.3: ``details`` without the names of records the caller may not see in full (or
    that are gone): a hidden record is never named, as by id it is 404."""
    if not _named(details):
        return details
    out = dict(details)
    for key in REFERENCE_KEYS:
        value = out.get(key)
        if isinstance(value, list):
            out[key] = [v for v in value if v in shown]
        elif value is not None and value not in shown:
            del out[key]
    return out


def opened_entry(sealer: Sealer, row: audit.AuditRow, details: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """RFC 7.6: an entry's rationale and details, its sealed rationale opened."""
    note = details.get(SEALED_RATIONALE)
    if not isinstance(note, str):
        return row.rationale, details
    return sealer.open_note(row.record_id, note), {k: v for k, v in details.items() if k != SEALED_RATIONALE}


def history(db: Database, record_id: uuid.UUID, trust: TrustPolicy, sealer: Sealer = NO_KEYS) -> AuditHistory:
    """RFC 5.5: a record's entries in order with ``chain_valid``; works after deletion.

    Trust is checked against the scope and sensitivity stored on the latest entry: hidden
    (or never written) is ``NotFound``; one level above the caller's maximum returns the
    entries with rationale and details blanked (RFC 7.3). A sealed rationale is opened after
    that check, for entries shown in full (RFC 7.6); the chain is verified over what is stored.
    """
    with db.transaction() as conn:  # RFC 13.2: a record's history reads the primary
        rows = audit.entries(conn, record_id)
        if not rows:
            raise errors.NotFound(f"record {record_id} not found")
        last = rows[-1]
        visibility = trust.visibility(last.scope, Sensitivity(last.sensitivity))
        if visibility == "hidden":
            raise errors.NotFound(f"record {record_id} not found")
        redacted = visibility == "redacted"
        shown = set() if redacted else _shown(conn, trust, rows)
    entries = []
    for r in rows:
        rationale, details = ("", {}) if redacted else opened_entry(sealer, r, r.details)
        entries.append(
            AuditEntry(
                action=r.action,
                actor=r.actor,
                timestamp=r.ts,
                rationale=rationale,
                details=details if redacted else _with_shown_references(details, shown),
                erased=r.erased_by is not None,
            )
        )
    return AuditHistory(record_id=record_id, entries=entries, chain_valid=verify_chain(rows))


def delete(
    db: Database,
    record_id: uuid.UUID,
    trust: TrustPolicy,
    rationale: str,
    *,
    now: datetime,
    sealer: Sealer = NO_KEYS,
) -> None:
    """RFC 5.5: hard-delete a record whose deletion policy allows it, appending a ``delete`` entry.

    Hidden or missing is ``NotFound``; a scope the caller cannot write, or a record it sees
    only redacted, is ``Forbidden``; deletion policy ``never`` is ``RevisionRefused``.
    """
    why = rationale.strip()
    if not why:
        raise errors.InvalidInput(
            "a deletion needs a rationale",
            details=[{"field": "rationale", "message": "must not be empty", "type": "value_error"}],
        )
    with db.transaction() as conn:
        target = audit.lock_for_delete(conn, record_id)
        if target is None:
            raise errors.NotFound(f"record {record_id} not found")
        visibility = trust.visibility(target.scope, target.sensitivity)
        if visibility == "hidden":
            raise errors.NotFound(f"record {record_id} not found")
        if visibility == "redacted" or not trust.can_write_scope(target.scope):
            raise errors.Forbidden(f"the caller may not delete record {record_id}")
        require_trusted_writer(trust)  # RFC 5.7: a reviewed key's writes are captures only
        if target.deletion_policy is DeletionPolicy.NEVER:
            raise errors.RevisionRefused(f"record {record_id} has deletion policy 'never'")
        batch = records.RowBatch(sealer=sealer)
        batch.audit_entry(
            record_id,
            target.scope,
            target.sensitivity,
            AuditAction.DELETE,
            trust.actor,
            now,
            why,
            {"operation": "delete", "type": target.type, "status": target.status},
        )
        batch.flush(conn)
        audit.delete_record(conn, record_id)
