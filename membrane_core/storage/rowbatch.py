"""A write's rows grouped by table, flushed with one COPY per table (RFC 3.3, 11.1).

Capture, revision, consolidation and entity resolution all queue their rows on a
:class:`RowBatch`; also the record-row helpers every writer shares (the fact key, the
projected size and the indexed text).
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import psycopg

from membrane_core import budget
from membrane_core.enums import AuditAction
from membrane_core.models import EpisodicPayload, MemoryRecord, SemanticPayload
from membrane_core.providers.base import normalise_predicate
from membrane_core.storage.queries import q

_WS = re.compile(r"\s+")


def _json(value: dict[str, Any] | None) -> str:
    return json.dumps(value, ensure_ascii=False) if value else "{}"


def norm_term(value: str) -> str:
    """Normalised form of a fact term or entity name: case-folded, whitespace collapsed."""
    return _WS.sub(" ", value).strip().casefold()


FactKey = tuple[str, str, str, str]


def fact_key(scope: str, subject: str, predicate: str, obj: str) -> FactKey:
    """RFC 3.4: the key every writer compares facts by; the predicate in snake_case."""
    return (scope, norm_term(subject), normalise_predicate(predicate), norm_term(obj))


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
    p = record.payload
    parts: list[str] = [record.summary or ""]
    if isinstance(p, EpisodicPayload):
        parts += [p.text or "", " ".join(p.entities), " ".join(c.tool for c in p.tool_calls)]
    elif isinstance(p, SemanticPayload):
        parts += [p.subject, p.predicate.replace("_", " "), p.object]
    else:
        parts.append(json.dumps(p.model_dump(mode="json", exclude={"kind"}), ensure_ascii=False))
    parts += record.tags
    return " ".join(x for x in parts if x)[:100_000]


def _record_row(r: MemoryRecord, payload_json: str) -> tuple[Any, ...]:
    lc, d = r.lifecycle, r.lifecycle.decay
    fact = r.payload if isinstance(r.payload, SemanticPayload) else None
    v = r.validity
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
        r.summary,
        _json(r.metadata),
        *(fact_key(r.scope, fact.subject, fact.predicate, fact.object)[1:] if fact else (None, None, None)),
        projected_bytes(r, payload_json),
        search_text(r),
    )


@dataclass
class RowBatch:
    """Rows of one write, grouped by table, for one COPY per table."""

    records: list[tuple[Any, ...]] = field(default_factory=list)
    payloads: list[tuple[Any, ...]] = field(default_factory=list)
    tags: list[tuple[Any, ...]] = field(default_factory=list)
    provenance: list[tuple[Any, ...]] = field(default_factory=list)
    relations: list[tuple[Any, ...]] = field(default_factory=list)
    audit: list[tuple[Any, ...]] = field(default_factory=list)
    work: list[tuple[str, uuid.UUID, datetime]] = field(default_factory=list)

    def add_record(self, r: MemoryRecord, *, actor: str, rationale: str) -> None:
        """Queue a new record with its payload, tags, provenance, relations and create entry."""
        payload_json = r.payload.model_dump_json()
        self.records.append(_record_row(r, payload_json))
        self.payloads.append((r.id, r.payload.kind, payload_json))
        self.tags.extend((r.id, t) for t in dict.fromkeys(r.tags))
        self.provenance.extend(
            (r.id, s.kind.value, s.ref, s.hash, s.created_by, s.timestamp, r.created_at) for s in r.provenance
        )
        self.relations.extend(
            (r.id, rel.predicate, rel.target_id, rel.weight, r.created_at) for rel in r.relations
        )
        self.audit_entry(
            r.id, r.scope, r.sensitivity.value, AuditAction.CREATE, actor, r.created_at, rationale
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
        """Queue one audit entry (RFC 5.5)."""
        self.audit.append((record_id, scope, sensitivity, action.value, actor, ts, rationale, _json(details)))

    def flush(self, conn: psycopg.Connection) -> None:
        """Write every queued row: one COPY per table, one statement for work items."""
        cur = conn.cursor()
        for name, rows in (
            ("copy_records", self.records),
            ("copy_payloads", self.payloads),
            ("copy_tags", self.tags),
            ("copy_provenance", self.provenance),
            ("copy_relations", self.relations),
            ("copy_audit", self.audit),
        ):
            if rows:
                with cur.copy(q(name)) as copy:
                    for row in rows:
                        copy.write_row(row)
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
            with cur.copy(q("copy_work_items")) as copy:
                for (kind, target), due in fresh.items():
                    copy.write_row((kind, target, due))
        if upsert:
            kinds, targets, dues = zip(*upsert, strict=True)
            cur.execute(
                q("insert_work_items"), {"kinds": list(kinds), "targets": list(targets), "due": list(dues)}
            )
