"""Sealing stored records under the current key: rotation and first sealing (RFC 7.6).

A batch locks its records' fact keys (advisory, as every fact writer does) and then their
rows in id order, re-reads them under the lock, and writes every new ciphertext in one
statement, in the caller's transaction: a reader sees a record under its old key or its
new one, never in between, and both keys are in the ring until rotation is done. A
record written before encryption was enabled loses its plain summary, metadata, indexed
text, tags, fact key and entity terms in the same transaction.
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

from membrane_core.sealing import Sealer, is_blind
from membrane_core.storage import revisions
from membrane_core.storage.queries import q
from membrane_core.storage.rowbatch import FactKey, sealed_content, stored_key


@dataclass(frozen=True)
class Sealed:
    """What one batch did: records re-encrypted under the current key, sealed for the first
    time, and left as they were (already under the current key, gone, or below the level)."""

    resealed: int
    first: int
    unchanged: int


def _plain_content(row: dict[str, Any]) -> str:
    body = json.dumps(row["body"], ensure_ascii=False)
    return sealed_content(body, row["summary"], row["metadata"], list(row["tags"]))


def _lock_keys(conn: psycopg.Connection, ids: Sequence[uuid.UUID], sealer: Sealer) -> None:
    """RFC 5.4: a fact whose key turns blind is written under the locks of both spellings."""
    keys: list[FactKey] = []
    for scope, s, p, o in conn.execute(q("seal_fact_keys"), {"ids": list(ids)}).fetchall():
        key = (scope, s, p, o)
        if not is_blind(s):
            keys += [key, stored_key(key, sealer, sealer.at_or_above.rank)]
    revisions.lock_keys(conn, keys)


def seal(conn: psycopg.Connection, ids: Sequence[uuid.UUID], sealer: Sealer) -> Sealed:
    """RFC 7.6: seal ``ids`` under the current key, in the caller's transaction.

    A record sealed under another key is opened and sealed again; a plain record at or above
    the sealed level is sealed for the first time. ``EncryptionKeyUnavailable`` (naming the
    key) when a record's key is not in the ring: nothing is written for the batch.
    """
    if not ids or not sealer.enabled:
        return Sealed(0, 0, len(ids))
    current = sealer.current_key
    _lock_keys(conn, sorted(set(ids)), sealer)
    rows = conn.cursor(row_factory=dict_row).execute(q("seal_lock"), {"ids": sorted(set(ids))}).fetchall()
    payloads: list[tuple[uuid.UUID, str, bytes]] = []
    first: list[dict[str, Any]] = []
    for row in rows:
        if row["sealed"] is not None:
            if row["key_id"] == current:
                continue
            content = sealer.open_text(row["id"], bytes(row["sealed"]))
        elif sealer.seals(int(row["sensitivity_rank"])):
            content = _plain_content(row)
            first.append(row)
        else:
            continue
        payloads.append((row["id"], *sealer.seal_content(row["id"], content)))
    if payloads:
        ids_, keys_, blobs = zip(*payloads, strict=True)
        conn.execute(
            q("seal_write_payloads"), {"ids": list(ids_), "key_ids": list(keys_), "sealed": list(blobs)}
        )
    if first:
        _clear_plain(conn, first, sealer)
    return Sealed(len(payloads) - len(first), len(first), len(ids) - len(payloads))


def _clear_plain(conn: psycopg.Connection, rows: Sequence[dict[str, Any]], sealer: Sealer) -> None:
    """RFC 7.6: what a record sealed for the first time held in plain text, cleared or blind."""
    ids = [r["id"] for r in rows]
    keys: list[tuple[str | None, str | None, str | None]] = []
    for r in rows:
        if r["fact_subject"] is not None:
            key = (r["scope"], r["fact_subject"], r["fact_predicate"], r["fact_object"])
            _, s, p, o = stored_key(key, sealer, sealer.at_or_above.rank)
            keys.append((s, p, o))
        else:
            keys.append((None, None, None))
    conn.execute(
        q("seal_clear_records"),
        {
            "ids": ids,
            "subjects": [k[0] for k in keys],
            "predicates": [k[1] for k in keys],
            "objects": [k[2] for k in keys],
        },
    )
    conn.execute(q("seal_clear_tags"), {"ids": ids})
    tagged = [(r["id"], sealer.blind_tag(t)) for r in rows for t in r["tags"]]
    if tagged:
        conn.execute(q("seal_insert_tags"), {"ids": [t[0] for t in tagged], "tags": [t[1] for t in tagged]})
    conn.execute(q("seal_clear_token_signs"), {"scopes": [r["scope"] for r in rows], "ids": ids})
    entities = [r["id"] for r in rows if r["type"] == "entity"]
    if entities:
        conn.execute(q("seal_clear_entity_keys"), {"ids": entities})


def enqueue(
    conn: psycopg.Connection, sealer: Sealer, *, after: uuid.UUID | None, limit: int, now: datetime
) -> tuple[uuid.UUID | None, int, int]:
    """RFC 7.6, 9.3: one chunk of rotation: a ``seal`` item for each of the next ``limit``
    records by id (after ``after``) still to seal; ``(last id read, records read, items)``."""
    row = conn.execute(
        q("seal_enqueue"),
        {
            "after": after,
            "limit": limit,
            "rank": sealer.at_or_above.rank,
            "key_id": sealer.current_key,
            "now": now,
        },
    ).fetchone()
    assert row is not None
    return row[0], int(row[1]), int(row[2])


def progress(conn: psycopg.Connection, sealer: Sealer) -> dict[str, Any]:
    """RFC 7.6: sealed records by key, plain records at or above the level, seal items left."""
    out: dict[str, Any] = {"by_key": {}, "plain": 0, "pending": 0, "dead": 0}
    for what, key_id, n in conn.execute(q("seal_progress"), {"rank": sealer.at_or_above.rank}).fetchall():
        if what == "key":
            out["by_key"][key_id] = int(n)
        else:
            out[what] = int(n)
    return out
