"""Writing embeddings and extracted facts from background batches (RFC 12.1, 12.2).

Both write in one statement per table and only for work items the caller still
holds, in the transaction that completes those items, so a batch is written once
even when a lease expired and another worker took the items over (RFC 9.4).
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta

import psycopg

from membrane_core import errors
from membrane_core.enums import AuditAction, RevisionStatus, Sensitivity, WorkKind
from membrane_core.models import MemoryRecord
from membrane_core.sealing import Sealer
from membrane_core.storage import proposals, records, rowbatch
from membrane_core.storage.queries import q


@dataclass(frozen=True)
class SourceLabel:
    """What a derived fact takes from its source: scope, sensitivity, status (RFC 7.4)."""

    scope: str
    sensitivity: Sensitivity
    status: RevisionStatus


def lock_sources(conn: psycopg.Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, SourceLabel]:
    """The :class:`SourceLabel` of each source, locked ``FOR SHARE`` (RFC 7.4)."""
    cur = conn.execute(q("drv_lock_sources"), {"ids": list(ids)})
    return {
        rid: SourceLabel(scope, Sensitivity(sens), RevisionStatus(status))
        for rid, scope, sens, status in cur.fetchall()
    }


@dataclass(frozen=True)
class Texts:
    """What the embedding provider reads of a batch (RFC 12.1, 7.6): the text of each record,
    the sealed records withheld from it, and those whose key the ring lacks (with the error)."""

    texts: dict[uuid.UUID, str]
    withheld: set[uuid.UUID]
    unopened: dict[uuid.UUID, str]
    #: the sealed records opened for the provider: they get a vector, never token signs (RFC 8.2.3)
    opened: set[uuid.UUID] = field(default_factory=set)


def texts(conn: psycopg.Connection, ids: Sequence[uuid.UUID], sealer: Sealer, *, open_sealed: bool) -> Texts:
    """The indexed text of each existing record (RFC 12.1).

    A sealed record's indexed text is empty: with ``open_sealed`` it is made from the opened
    content, as for a plain record; without, the record is withheld (RFC 7.6).
    """
    cur = conn.execute(q("emb_texts"), {"ids": list(ids)})
    out = Texts({}, set(), {})
    for rid, text, sealed in cur.fetchall():
        if sealed is None:
            out.texts[rid] = text
        elif not open_sealed:
            out.withheld.add(rid)
        else:
            try:
                c = sealer.open_row({"id": rid, "sealed": sealed})
            except errors.EncryptionKeyUnavailable as exc:
                out.unopened[rid] = exc.message
                continue
            payload = rowbatch.PAYLOAD.validate_python(c["payload"])
            out.texts[rid] = records.search_text_of(payload, c["summary"], c["tags"])
            out.opened.add(rid)
    return out


def write_embeddings(
    conn: psycopg.Connection,
    vectors: dict[uuid.UUID, Sequence[float]],
    *,
    model: str,
    now: datetime,
    signs: Mapping[uuid.UUID, bytes] | None = None,
) -> int:
    """RFC 12.1: upsert vectors in one statement; records deleted meanwhile are skipped.
    ``signs``: each record's token signs (RFC 8.2.3), NULL for a record without."""
    if not vectors:
        return 0
    ids = list(vectors)
    lits = ["[" + ",".join(repr(float(x)) for x in vectors[i]) + "]" for i in ids]
    by_id = signs or {}
    return conn.execute(
        q("emb_upsert"),
        {"ids": ids, "vecs": lits, "signs": [by_id.get(i) for i in ids], "model": model, "now": now},
    ).rowcount


#: RFC 12.5: a vector of at most this many bytes (4 a dimension, 8 of header) fits in its
#: row beside the record's id, scope and model under Postgres's 2 KB TOAST threshold, so
#: one stored out of line (laid out before migration 0014) is embedded again.
INLINE_VECTOR_BYTES = 1800


def vector_fits_in_row(dim: int) -> bool:
    """RFC 12.5: whether a ``dim``-dimension vector stays in its row (storage ``MAIN``)."""
    return 4 * dim + 8 <= INLINE_VECTOR_BYTES


def enqueue_stale(
    conn: psycopg.Connection,
    *,
    model: str,
    tokens: bool,
    inline: bool,
    every: bool,
    scopes: Sequence[str] | None,
    after: uuid.UUID | None,
    limit: int,
    now: datetime,
) -> tuple[uuid.UUID | None, int, int]:
    """RFC 12.5, 9.3: one chunk of embedding again: an ``embed`` item for each of the next
    ``limit`` records by id (after ``after``) with text whose vector is missing, is not
    ``model``'s, lacks the token signs a provider with ``tokens`` gives, or is out of line
    though it fits in the row (``every``: each one with text); ``(last id read, records
    read, items)``."""
    row = conn.execute(
        q("emb_enqueue_stale"),
        {
            "after": after,
            "limit": limit,
            "model": model,
            "tokens": tokens,
            "inline": inline,
            "all": every,
            "scopes": list(scopes) if scopes else None,
            "now": now,
        },
    ).fetchone()
    assert row is not None
    return row[0], int(row[1]), int(row[2])


def embedding_progress(conn: psycopg.Connection, *, model: str, tokens: bool, inline: bool) -> dict[str, int]:
    """RFC 12.5: records with text and no vector, vectors of another model, vectors without
    the signs a provider with ``tokens`` gives, vectors out of line though they fit in the
    row (``inline``), and the embed items pending and dead."""
    names = ("without_vector", "other_model", "without_signs", "out_of_line", "pending", "dead")
    out = dict.fromkeys(names, 0)
    params = {"model": model, "tokens": tokens, "inline": inline}
    for what, n in conn.execute(q("emb_progress"), params).fetchall():
        out[what] = int(n)
    return out


@dataclass(frozen=True)
class DerivedFact:
    """A semantic fact derived from one or more existing sources (RFC 6.4, 7.4)."""

    record: MemoryRecord
    source_ids: list[uuid.UUID]
    actor: str


@dataclass(frozen=True)
class DerivedOutcome:
    """What writing derived facts did, by fact key."""

    created: list[uuid.UUID]
    reinforced: list[uuid.UUID]
    tombstoned: int
    #: RFC 5.7: pending proposed facts the sources corroborated
    corroborated: list[uuid.UUID] = field(default_factory=list)


def write_facts(
    conn: psycopg.Connection,
    facts: Sequence[DerivedFact],
    *,
    now: datetime,
    opts: records.WorkOptions,
    review: bool = False,
) -> DerivedOutcome:
    """RFC 5.4, 6.2, 7.4: create facts ``derived_from`` their sources unless tombstoned.

    Uses the capture path's per-key advisory lock and match; a live fact with the same
    key is reinforced once per source not yet linked to it (and takes the higher
    sensitivity) instead of being duplicated. Facts must have distinct keys.

    ``review`` (the extraction pool's writes, RFC 5.7): a pending proposed fact with the key
    is corroborated by each source not yet linked to it; with ``opts.review_extractions``
    a new fact is proposed, one proposal each, and an active one is not reinforced.
    Consolidation passes no ``review`` and leaves a proposed key alone, as a contested one.
    """
    if not facts:
        return DerivedOutcome([], [], 0)
    keys = [records.record_fact_key(f.record, opts.sealer) for f in facts]
    matches = records.lock_and_match_facts(conn, keys)
    propose = review and opts.review_extractions
    pending = (
        proposals.pending_of(
            conn, [m.live_id for m in matches if m.live_id and m.live_status is RevisionStatus.PROPOSED]
        )
        if review
        else {}
    )
    batch = records.RowBatch(sealer=opts.sealer)
    book = proposals.Book(now=now, ttl=opts.review_ttl)
    created: list[uuid.UUID] = []
    existing: list[tuple[uuid.UUID, DerivedFact]] = []
    proposed: list[tuple[uuid.UUID, DerivedFact]] = []
    tombstoned = 0
    for fact, match in zip(facts, matches, strict=True):
        if match.live_id is not None:
            # a contested fact is settled by revision (RFC 5.1); a proposed one by review (5.7)
            if match.live_status is RevisionStatus.ACTIVE and not propose:
                existing.append((match.live_id, fact))
            elif match.live_id in pending:
                proposed.append((match.live_id, fact))
        elif match.blocked:
            tombstoned += 1
        else:
            r = fact.record
            if propose:
                r = r.model_copy(update={"status": RevisionStatus.PROPOSED})
                book.add(book.propose(r.scope, r.sensitivity, "extraction", fact.actor), [r.id])
            batch.add_record(r, actor=fact.actor, rationale="extracted from episode")
            batch.relations.extend((r.id, "derived_from", s, None, now) for s in fact.source_ids)
            _schedule(batch, r, now, opts)
            created.append(r.id)
    reinforced = _reinforce(conn, batch, existing, now) if existing else []
    corroborated = _corroborate(conn, batch, book, proposed, pending, now) if proposed else []
    batch.flush(conn)
    book.flush(conn)
    return DerivedOutcome(created, reinforced, tombstoned, corroborated)


def _corroborate(
    conn: psycopg.Connection,
    batch: records.RowBatch,
    book: proposals.Book,
    proposed: list[tuple[uuid.UUID, DerivedFact]],
    pending: dict[uuid.UUID, uuid.UUID],
    now: datetime,
) -> list[uuid.UUID]:
    """RFC 5.7: each source not yet linked to a pending proposed fact becomes its evidence and
    counts once for its proposal."""
    facts = [f for f, _ in proposed]
    sources = [s for _, d in proposed for s in d.source_ids]
    cur = conn.execute(q("drv_linked_sources"), {"facts": facts, "sources": sources})
    linked = {(rid, source) for rid, source in cur.fetchall()}
    out: list[uuid.UUID] = []
    for fact_id, derived in proposed:
        for source in derived.source_ids:
            if (fact_id, source) in linked:
                continue
            linked.add((fact_id, source))
            batch.relations.append((fact_id, "derived_from", source, None, now))
            book.corroborate(pending[fact_id], derived.actor, derived.record.sensitivity.rank)
            out.append(fact_id)
    return list(dict.fromkeys(out))


def _schedule(batch: records.RowBatch, r: MemoryRecord, now: datetime, opts: records.WorkOptions) -> None:
    # RFC 9.3: the same work a captured fact gets.
    if opts.embeds(r):
        batch.work.append((WorkKind.EMBED.value, r.id, now))
    batch.work.append(
        (WorkKind.DECAY.value, r.id, now + timedelta(seconds=r.lifecycle.decay.half_life_seconds))
    )


def _reinforce(
    conn: psycopg.Connection,
    batch: records.RowBatch,
    existing: list[tuple[uuid.UUID, DerivedFact]],
    now: datetime,
) -> list[uuid.UUID]:
    facts = [f for f, _ in existing]
    sources = [s for _, d in existing for s in d.source_ids]
    cur = conn.execute(q("drv_linked_sources"), {"facts": facts, "sources": sources})
    linked = {(rid, source) for rid, source in cur.fetchall()}
    counts: dict[uuid.UUID, int] = {}
    new_links: list[tuple[uuid.UUID, uuid.UUID, DerivedFact]] = []
    for fact_id, derived in existing:
        for source in derived.source_ids:
            if (fact_id, source) not in linked:
                linked.add((fact_id, source))
                counts[fact_id] = counts.get(fact_id, 0) + 1
                new_links.append((fact_id, source, derived))
    if not counts:
        return []
    ranks: dict[uuid.UUID, int] = {}
    for fact_id, _, derived in new_links:
        ranks[fact_id] = max(ranks.get(fact_id, 0), derived.record.sensitivity.rank)
    # RFC 6.2, 7.4: gain per new source; sensitivity rises to the sources' maximum.
    cur = conn.execute(
        q("reinforce_facts"),
        {
            "ids": list(counts),
            "counts": list(counts.values()),
            "ranks": [ranks[f] for f in counts],
            "now": now,
        },
    )
    labels = {rid: (scope, sens) for rid, scope, sens in cur.fetchall()}
    for fact_id, source, derived in new_links:
        scope, sens = labels[fact_id]
        batch.relations.append((fact_id, "derived_from", source, None, now))
        batch.audit_entry(
            fact_id,
            scope,
            sens,
            AuditAction.REINFORCE,
            derived.actor,
            now,
            "extracted again",
            {"source_id": str(source)},
        )
    return list(counts)
