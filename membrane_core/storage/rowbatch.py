"""A write's rows grouped by table, flushed with one COPY per table (RFC 3.3, 11.1).

Capture, revision, consolidation and entity resolution all queue their rows on a
:class:`RowBatch`; also the record-row helpers every writer shares (the fact key, the
projected size and the indexed text). A batch with a key ring seals the records at or above
its level as it queues them (RFC 7.6), so their content never reaches Postgres in plain text.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, NamedTuple

import psycopg
from psycopg.types.json import set_json_dumps
from pydantic import TypeAdapter

from membrane_core import budget
from membrane_core.enums import AuditAction
from membrane_core.models import EpisodicPayload, MemoryRecord, Payload, SemanticPayload
from membrane_core.providers.base import normalise_predicate
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage.queries import q

_WS = re.compile(r"\s+")

#: RFC 3.3: the column types of each ``COPY`` a batch writes, in its columns' order. Rows go
#: in binary: no value is escaped into text in Python nor parsed back in Postgres (formatting
#: a record row took 12 to 28 µs in text, 4 to 6 in binary). ``jsonb`` values are JSON text
#: already; ``tests/integration/test_copy_types.py`` holds these to the catalog.
COPY_TYPES: dict[str, tuple[str, ...]] = {
    "copy_records": (
        "uuid",
        "text",
        "text",
        "text",
        "double precision",
        "double precision",
        "text",
        "text",
        "bigint",
        "double precision",
        "bigint",
        "double precision",
        "double precision",
        "timestamptz",
        "boolean",
        "text",
        "text",
        "timestamptz",
        "timestamptz",
        "timestamptz",
        "timestamptz",
        "timestamptz",
        "timestamptz",
        "text",
        "jsonb",
        "text",
        "text",
        "text",
        "integer",
        "text",
    ),
    "copy_payloads": ("uuid", "text", "jsonb", "text", "bytea"),
    "copy_tags": ("uuid", "text"),
    "copy_provenance": ("uuid", "text", "text", "text", "text", "timestamptz", "timestamptz"),
    "copy_relations": ("uuid", "text", "uuid", "double precision", "timestamptz"),
    "copy_audit": ("uuid", "text", "text", "text", "text", "timestamptz", "text", "jsonb"),
    "copy_work_items": ("text", "uuid", "timestamptz"),
    "copy_entity_terms": ("uuid", "text", "text", "text"),
    "op_copy": (
        "uuid",
        "text",
        "text",
        "text",
        "text",
        "jsonb",
        "jsonb",
        "uuid",
        "uuid",
        "jsonb",
        "timestamptz",
        "timestamptz",
        "text",
    ),
}


def _as_is(text: str) -> str:
    return text


def copy_cursor(conn: psycopg.Connection) -> psycopg.Cursor[Any]:
    """A cursor for :func:`copy_rows`: its ``jsonb`` values are JSON text, sent as they are."""
    cur = conn.cursor()
    set_json_dumps(_as_is, cur)
    return cur


def copy_rows(cur: psycopg.Cursor[Any], name: str, rows: Iterable[Sequence[Any]]) -> None:
    """RFC 3.3: ``rows`` into the table of the ``COPY`` statement ``name``, in binary, on a
    :func:`copy_cursor`."""
    with cur.copy(q(name)) as copy:
        copy.set_types(list(COPY_TYPES[name]))
        for row in rows:
            copy.write_row(row)


#: RFC 7.6: the audit detail holding a sealed record's sealed rationale.
SEALED_RATIONALE = "sealed_rationale"


def _json(value: dict[str, Any] | None) -> str:
    return json.dumps(value, ensure_ascii=False) if value else "{}"


def norm_term(value: str) -> str:
    """Normalised form of a fact term or entity name: case-folded, whitespace collapsed."""
    return _WS.sub(" ", value).strip().casefold()


FactKey = tuple[str, str, str, str]


def fact_key(
    scope: str, subject: str, predicate: str, obj: str, *, sealer: Sealer = NO_KEYS, rank: int = 0
) -> FactKey:
    """RFC 3.4: the key every writer compares facts by; the predicate in snake_case. A fact at
    level ``rank`` that ``sealer`` seals stores its terms as blind values (RFC 7.6)."""
    key = (scope, norm_term(subject), normalise_predicate(predicate), norm_term(obj))
    return stored_key(key, sealer, rank)


def stored_key(key: FactKey, sealer: Sealer, rank: int) -> FactKey:
    """RFC 7.6: a normalised (or stored) fact key as a fact at level ``rank`` stores it: blind
    terms when the level is sealed, else as it is."""
    if not sealer.seals(rank):
        return key
    return (key[0], *sealer.blind_terms(key[0], (key[1], key[2], key[3])))


def projected_bytes(record: MemoryRecord, payload_json: str | None = None) -> int:
    """Projected hydrated size used by the byte budget (RFC 8.3)."""
    if payload_json is None:
        payload_json = record.payload.model_dump_json()
    return (
        len(payload_json.encode())
        + budget.encoded_size(record.metadata)
        + len((record.summary or "").encode())
        + sum(len(t) + 4 for t in record.tags)
        + 512
    )


def search_text(record: MemoryRecord) -> str:
    """Text indexed for full-text search (RFC 8.1)."""
    return search_text_of(record.payload, record.summary, record.tags)


#: A payload of any record class, as stored (RFC 2.1).
PAYLOAD: TypeAdapter[Payload] = TypeAdapter(Payload)


def search_text_of(p: Payload, summary: str | None, tags: list[str]) -> str:
    """Text indexed for full-text search (RFC 8.1) of a payload, summary and tags; also what
    the embedding provider reads of a sealed record, whose indexed text is empty (RFC 7.6)."""
    parts: list[str] = [summary or ""]
    if isinstance(p, EpisodicPayload):
        parts += [p.text or "", " ".join(p.entities), " ".join(c.tool for c in p.tool_calls)]
    elif isinstance(p, SemanticPayload):
        parts += [p.subject, p.predicate.replace("_", " "), p.object]
    else:
        parts.append(json.dumps(p.model_dump(mode="json", exclude={"kind"}), ensure_ascii=False))
    parts += tags
    return " ".join(x for x in parts if x)[:100_000]


def _record_row(r: MemoryRecord, payload_json: str, sealer: Sealer | None) -> tuple[Any, ...]:
    """The ``memory_records`` row; sealed (``sealer`` given), without summary, metadata or
    indexed text, its fact key blind (RFC 7.6)."""
    lc, d = r.lifecycle, r.lifecycle.decay
    fact = r.payload if isinstance(r.payload, SemanticPayload) else None
    v = r.validity
    key = (
        fact_key(
            r.scope,
            fact.subject,
            fact.predicate,
            fact.object,
            sealer=sealer or NO_KEYS,
            rank=r.sensitivity.rank,
        )[1:]
        if fact
        else (None, None, None)
    )
    return (
        r.id,
        r.type.value,
        r.scope,
        r.sensitivity.value,
        r.confidence,
        r.salience,
        r.status.value,
        d.curve.value,
        d.half_life_seconds,
        d.min_salience,
        d.max_age_seconds,
        d.reinforcement_gain,
        lc.base_salience,
        lc.reinforced_at,
        lc.pinned,
        lc.deletion_policy.value,
        v.mode.value if v else None,
        v.valid_from if v else None,
        v.valid_to if v else None,
        r.recorded_at,
        r.occurred_at,
        r.created_at,
        r.updated_at,
        None if sealer else r.summary,
        "{}" if sealer else _json(r.metadata),
        *key,
        projected_bytes(r, payload_json),
        "" if sealer else search_text(r),
    )


def sealed_content(payload_json: str, summary: str | None, metadata: dict[str, Any], tags: list[str]) -> str:
    """RFC 7.6: the JSON a record's ciphertext holds: payload, summary, metadata and tags."""
    return (
        f'{{"payload":{payload_json},"summary":{json.dumps(summary, ensure_ascii=False)},'
        f'"metadata":{_json(metadata)},"tags":{json.dumps(tags, ensure_ascii=False)}}}'
    )


class AuditEntry(NamedTuple):
    """One ``audit_log`` row as COPY writes it (RFC 5.5); its hash is the trigger's."""

    record_id: uuid.UUID
    scope: str
    sensitivity: str
    action: str
    actor: str
    ts: datetime
    rationale: str
    details: str  #: JSON text


@dataclass
class RowBatch:
    """Rows of one write, grouped by table, for one COPY per table."""

    records: list[tuple[Any, ...]] = field(default_factory=list)
    payloads: list[tuple[Any, ...]] = field(default_factory=list)
    tags: list[tuple[Any, ...]] = field(default_factory=list)
    provenance: list[tuple[Any, ...]] = field(default_factory=list)
    relations: list[tuple[Any, ...]] = field(default_factory=list)
    audit: list[AuditEntry] = field(default_factory=list)
    work: list[tuple[str, uuid.UUID, datetime]] = field(default_factory=list)
    #: RFC 7.6: seals the records (and audit rationales) at or above its level
    sealer: Sealer = NO_KEYS

    def add_record(
        self, r: MemoryRecord, *, actor: str, rationale: str, details: dict[str, Any] | None = None
    ) -> None:
        """Queue a new record with its payload, tags, provenance, relations and create entry
        (with ``details``, RFC 5.5); sealed when the batch's sealer seals its level (RFC 7.6)."""
        payload_json = r.payload.model_dump_json()
        tags = list(dict.fromkeys(r.tags))
        if self.sealer.seals(r.sensitivity):
            self.records.append(_record_row(r, payload_json, self.sealer))
            # in the order a plain record's tags are read back in (record_fields sorts them)
            content = sealed_content(payload_json, r.summary, r.metadata, sorted(tags))
            key_id, blob = self.sealer.seal_content(r.id, content)
            self.payloads.append((r.id, r.payload.kind, None, key_id, blob))
            self.tags.extend((r.id, self.sealer.blind_tag(t)) for t in tags)
        else:
            self.records.append(_record_row(r, payload_json, None))
            self.payloads.append((r.id, r.payload.kind, payload_json, None, None))
            self.tags.extend((r.id, t) for t in tags)
        self.provenance.extend(
            (r.id, s.kind.value, s.ref, s.hash, s.created_by, s.timestamp, r.created_at) for s in r.provenance
        )
        self.relations.extend(
            (r.id, rel.predicate, rel.target_id, rel.weight, r.created_at) for rel in r.relations
        )
        self.audit_entry(
            r.id, r.scope, r.sensitivity.value, AuditAction.CREATE, actor, r.created_at, rationale, details
        )

    def audit_entry(
        self,
        record_id: uuid.UUID,
        scope: str,
        sensitivity: str,
        action: AuditAction,
        actor: str,
        ts: datetime,
        rationale: str,
        details: dict[str, Any] | None = None,
    ) -> None:
        """Queue one audit entry (RFC 5.5); the rationale of a sealed record's entry is sealed
        into its details, so the chain hashes the ciphertext (RFC 7.6)."""
        if self.sealer.seals(sensitivity):
            details = {**(details or {}), SEALED_RATIONALE: self.sealer.seal_note(record_id, rationale)}
            rationale = ""
        self.audit.append(
            AuditEntry(record_id, scope, sensitivity, action.value, actor, ts, rationale, _json(details))
        )

    def flush(self, conn: psycopg.Connection) -> None:
        """Write every queued row: one COPY per table, one statement for work items."""
        cur = copy_cursor(conn)
        for name, rows in (
            ("copy_records", self.records),
            ("copy_payloads", self.payloads),
            ("copy_tags", self.tags),
            ("copy_provenance", self.provenance),
            ("copy_relations", self.relations),
            ("copy_audit", self.audit),
        ):
            if rows:
                copy_rows(cur, name, rows)
        # RFC 9.3: items for records inserted by this batch cannot conflict, so they
        # go through COPY; items for existing records keep the upsert's earlier due time.
        new_ids = {row[0] for row in self.records}
        fresh: dict[tuple[str, uuid.UUID], datetime] = {}
        upsert: list[tuple[str, uuid.UUID, datetime]] = []
        for kind, target, due in self.work:
            if target in new_ids:
                prev = fresh.get((kind, target))
                fresh[(kind, target)] = due if prev is None or due < prev else prev
            else:
                upsert.append((kind, target, due))
        if fresh:
            copy_rows(cur, "copy_work_items", ((kind, target, due) for (kind, target), due in fresh.items()))
        if upsert:
            kinds, targets, dues = zip(*upsert, strict=True)
            cur.execute(
                q("insert_work_items"), {"kinds": list(kinds), "targets": list(targets), "due": list(dues)}
            )
