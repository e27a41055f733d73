"""Writing and reading records (RFC 3.3, 2.1); the capture hot path uses COPY."""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

import psycopg
from psycopg.rows import dict_row

from membrane_core.capture.plan import CapturePlan
from membrane_core.enums import AuditAction, OutcomeStatus, RevisionStatus, WorkKind
from membrane_core.models import EpisodicPayload, MemoryRecord, SemanticPayload
from membrane_core.policy import Policy
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage import proposals
from membrane_core.storage.entities import resolve_mentions
from membrane_core.storage.queries import q
from membrane_core.storage.rowbatch import (
    FactKey,
    RowBatch,
    fact_key,
    norm_term,
    projected_bytes,
    sealed_content,
    search_text,
    search_text_of,
    stored_key,
)


@dataclass(frozen=True)
class WorkOptions:
    """Which background work a capture schedules (RFC 9.3), the policy for records it derives,
    and the sealer its records are written with (RFC 7.6)."""

    embed: bool = False
    extract: bool = False
    compress_after: timedelta = timedelta(hours=24)
    policy: Policy = field(default_factory=Policy)
    #: RFC 7.6: seals the records at or above its level; nothing without keys
    sealer: Sealer = NO_KEYS
    #: RFC 7.6: a sealed record gets an ``embed`` item only when the embedding provider runs in
    #: the process, or the settings let an external one read sealed records
    embed_sealed: bool = False
    #: RFC 7.6: a sealed episode gets an ``extract`` item only when the extractor runs in the process
    extract_sealed: bool = False
    #: RFC 5.7: how long a proposal waits for a decision before it expires
    review_ttl: timedelta = timedelta(days=30)
    #: RFC 5.7: the LLM extraction pool's facts are proposed
    review_extractions: bool = False

    def embeds(self, r: MemoryRecord) -> bool:
        """RFC 3.3, 7.6: whether writing ``r`` schedules its embedding."""
        return self.embed and (self.embed_sealed or not self.sealer.seals(r.sensitivity))


@dataclass(frozen=True)
class CaptureOutcome:
    """Ids one capture wrote or touched, primary first (RFC 3.3)."""

    record_ids: list[uuid.UUID]
    #: "created" | "reinforced" | "tombstoned" | "contested" | "known" | "corroborated" | None
    fact: str | None = None
    entities: dict[str, Any] | None = None  # RFC 3.5.3: mention counts and budget truncation
    #: RFC 5.7: the proposal the capture's records belong to, when they are proposed
    proposal_id: uuid.UUID | None = None


def first_decay(r: MemoryRecord, now: datetime) -> datetime:
    """RFC 6.1: a new record's first decay checkpoint, one half-life after ``now`` or at its
    maximum age when that comes first, so the decay batch hands it to prune (RFC 6.3)."""
    d = r.lifecycle.decay
    due = now + timedelta(seconds=d.half_life_seconds)
    if d.max_age_seconds is not None:
        due = min(due, r.created_at + timedelta(seconds=d.max_age_seconds))
    return due


def _schedule(batch: RowBatch, r: MemoryRecord, now: datetime, opts: WorkOptions) -> None:
    # RFC 9.3: work items are written in the capture's own transaction.
    if opts.embeds(r):
        batch.work.append((WorkKind.EMBED.value, r.id, now))
    batch.work.append((WorkKind.DECAY.value, r.id, first_decay(r, now)))
    if r.status is not RevisionStatus.PROPOSED:  # RFC 5.7: an episode feeds nothing until approved
        batch.work.extend(episode_work(r, now, opts))


def episode_work(r: MemoryRecord, now: datetime, opts: WorkOptions) -> list[tuple[str, uuid.UUID, datetime]]:
    """RFC 6.4, 9.3: the consolidation, extraction and compression items an episode gets when
    it is trusted: at capture, or when its proposal is approved (RFC 5.7)."""
    p = r.payload
    if not isinstance(p, EpisodicPayload):
        return []
    out: list[tuple[str, uuid.UUID, datetime]] = []
    # RFC 6.4.3: failed episodes with tool calls count against their tool signature.
    if p.outcome is OutcomeStatus.SUCCESS or (p.outcome is not None and p.tool_calls):
        out.append((WorkKind.CONSOLIDATE.value, r.id, now))
    extract = opts.extract and (opts.extract_sealed or not opts.sealer.seals(r.sensitivity))
    if extract and (p.text or p.tool_calls):
        out.append((WorkKind.EXTRACT.value, r.id, now))
    out.append((WorkKind.COMPRESS.value, r.id, now + opts.compress_after))
    return out


def write_captures(
    conn: psycopg.Connection, plans: Sequence[CapturePlan], *, now: datetime, opts: WorkOptions
) -> list[CaptureOutcome]:
    """RFC 3.3: write captures (records, audit entries, work items) in the caller's transaction.

    Derived facts (RFC 3.4) are created unless tombstoned; a live fact with the same
    key in the scope is reinforced instead of duplicated.
    """
    batch = RowBatch(sealer=opts.sealer)
    book = proposals.Book(now=now, ttl=opts.review_ttl)
    # RFC 5.7: each proposed capture's records make a proposal, unless its fact joins one
    proposal_of = {
        i: book.propose(p.primary.scope, p.primary.sensitivity, "capture", p.actor)
        for i, p in enumerate(plans)
        if p.proposed
    }
    for plan in plans:
        batch.add_record(plan.primary, actor=plan.actor, rationale="captured")
        _schedule(batch, plan.primary, now, opts)
    fact_results = _resolve_facts(conn, plans, batch, now, opts, book, proposal_of)
    resolved = resolve_mentions(
        conn, plans, batch, now=now, embed=opts.embed, policy=opts.policy, sealer=opts.sealer
    )
    out = []
    for i, plan in enumerate(plans):
        fact_id, state = fact_results.get(i, (None, None))
        ids = [plan.primary.id] + ([fact_id] if fact_id else [])
        pid = proposal_of.get(i)
        if pid is not None:
            own = [plan.primary.id, *resolved.proposed.get(i, [])]
            if plan.fact is not None and fact_id == plan.fact.record.id:  # its own fact
                own.append(fact_id)
            book.add(pid, own)
        out.append(CaptureOutcome(record_ids=ids, fact=state, entities=resolved.reports[i], proposal_id=pid))
    batch.flush(conn)
    resolved.flush(conn)
    book.flush(conn)
    return out


@dataclass(frozen=True)
class FactMatch:
    """What a candidate fact key meets in its scope (RFC 5.4)."""

    blocked: bool  #: tombstoned, or only retracted facts carry the key
    live_id: uuid.UUID | None  #: the live fact with the key, active before contested
    live_status: RevisionStatus | None


def lock_and_match_facts(
    conn: psycopg.Connection, keys: Sequence[FactKey], levels: Sequence[int | None] | None = None
) -> list[FactMatch]:
    """RFC 3.4, 5.4: serialise every writer of ``keys`` (advisory locks), then match each.

    The one rule every path that derives facts follows (capture, extraction,
    consolidation): a live active fact is reinforced, a live contested one is left for
    revision to settle, a blocked key is not re-created, anything else is created.
    ``levels`` (a sensitivity rank per key, or ``None`` for every level) confine a key to
    the facts and retractions of its level: a capture's (RFC 3.4).
    """
    if not keys:
        return []
    cols = {
        "scopes": [k[0] for k in keys],
        "subjects": [k[1] for k in keys],
        "predicates": [k[2] for k in keys],
        "objects": [k[3] for k in keys],
    }
    cur = conn.cursor()
    cur.execute(q("lock_fact_keys"), cols)
    cur.execute(
        q("match_facts"),
        {"idx": list(range(len(keys))), **cols, "levels": list(levels) if levels else [None] * len(keys)},
    )
    found = {
        i: FactMatch(blocked, live_id, RevisionStatus(status) if status else None)
        for i, blocked, live_id, status in cur.fetchall()
    }
    return [found[i] for i in range(len(keys))]


def record_fact_key(r: MemoryRecord, sealer: Sealer = NO_KEYS) -> FactKey:
    """RFC 3.4, 7.6: the key of a semantic record as it is stored at its level."""
    p = r.payload
    assert isinstance(p, SemanticPayload)
    return fact_key(r.scope, p.subject, p.predicate, p.object, sealer=sealer, rank=r.sensitivity.rank)


def _resolve_facts(
    conn: psycopg.Connection,
    plans: Sequence[CapturePlan],
    batch: RowBatch,
    now: datetime,
    opts: WorkOptions,
    book: proposals.Book,
    proposal_of: dict[int, uuid.UUID],
) -> dict[int, tuple[uuid.UUID | None, str]]:
    idx = [i for i, p in enumerate(plans) if p.fact is not None]
    if not idx:
        return {}
    keys = [record_fact_key(plans[i].fact.record, opts.sealer) for i in idx]  # type: ignore[union-attr]
    # RFC 3.4: a capture's fact meets only facts at its own level (polyinstantiation)
    levels = [plans[i].fact.record.sensitivity.rank for i in idx]  # type: ignore[union-attr]
    matches = lock_and_match_facts(conn, keys, levels)
    pending = proposals.pending_of(
        conn, [m.live_id for m in matches if m.live_id and m.live_status is RevisionStatus.PROPOSED]
    )
    results: dict[int, tuple[uuid.UUID | None, str]] = {}
    #: facts this batch created: id, and its proposal when proposed
    created: dict[tuple[FactKey, int], tuple[uuid.UUID, uuid.UUID | None]] = {}
    reinforce: list[tuple[uuid.UUID, uuid.UUID, int]] = []
    for i, key, level, match in zip(idx, keys, levels, matches, strict=True):
        plan = plans[i]
        assert plan.fact is not None
        live = match.live_id
        if live is not None and match.live_status is RevisionStatus.PROPOSED and live in pending:
            _corroborate(batch, book, plan, live, pending[live], proposal_of, i, now)
            results[i] = (live, "corroborated")
        elif live is not None and match.live_status is not RevisionStatus.ACTIVE:
            results[i] = (None, "contested")  # RFC 5.1: settled by revision, not by evidence
        elif live is not None and plan.proposed:
            results[i] = (live, "known")  # RFC 5.7: a proposed write reinforces nothing
        elif live is not None:
            reinforce.append((live, plan.primary.id, i))
            results[i] = (live, "reinforced")
        elif match.blocked:
            results[i] = (None, "tombstoned")
        elif (key, level) in created:
            fact_id, fact_proposal = created[(key, level)]
            if fact_proposal is not None:
                _corroborate(batch, book, plan, fact_id, fact_proposal, proposal_of, i, now)
                results[i] = (fact_id, "corroborated")
            elif plan.proposed:  # RFC 5.7: a trusted fact of the batch, as a live one: known
                results[i] = (fact_id, "known")
            else:
                batch.relations.append((fact_id, "derived_from", plan.primary.id, None, now))
                results[i] = (fact_id, "created")
        else:
            fact = plan.fact.record
            batch.add_record(fact, actor=plan.actor, rationale="derived from observation")
            batch.relations.append((fact.id, "derived_from", plan.primary.id, None, now))
            _schedule(batch, fact, now, opts)
            created[(key, level)] = (fact.id, proposal_of.get(i))
            results[i] = (fact.id, "created")
    if reinforce:
        _reinforce_from_sources(conn, batch, reinforce, plans, now)
    return results


def _corroborate(
    batch: RowBatch,
    book: proposals.Book,
    plan: CapturePlan,
    fact_id: uuid.UUID,
    proposal_id: uuid.UUID,
    proposal_of: dict[int, uuid.UUID],
    i: int,
    now: datetime,
) -> None:
    """RFC 5.7: a capture whose fact key a pending proposed fact carries adds its source as
    that fact's evidence and counts once for the proposal; a proposed capture's records join
    that proposal instead of making one of their own."""
    primary = plan.primary
    batch.relations.append((fact_id, "derived_from", primary.id, None, now))
    batch.provenance.extend(
        (fact_id, s.kind.value, s.ref, s.hash, s.created_by, s.timestamp, now) for s in primary.provenance
    )
    book.corroborate(proposal_id, plan.actor, primary.sensitivity.rank)
    own = proposal_of.get(i)
    if own is not None:  # the capture's own proposal is dropped; its records join this one
        book.drop(own)
        proposal_of[i] = proposal_id


def _reinforce_from_sources(
    conn: psycopg.Connection,
    batch: RowBatch,
    items: list[tuple[uuid.UUID, uuid.UUID, int]],
    plans: Sequence[CapturePlan],
    now: datetime,
) -> None:
    """RFC 6.2, 7.4: one reinforcement per new source; sensitivity rises to the sources' maximum."""
    counts: dict[uuid.UUID, int] = {}
    ranks: dict[uuid.UUID, int] = {}
    for target, _, i in items:
        counts[target] = counts.get(target, 0) + 1
        ranks[target] = max(ranks.get(target, 0), plans[i].primary.sensitivity.rank)
    cur = conn.cursor()
    cur.execute(
        q("reinforce_facts"),
        {
            "ids": list(counts),
            "counts": list(counts.values()),
            "ranks": [ranks[t] for t in counts],
            "now": now,
        },
    )
    labels = {rid: (scope, sens) for rid, scope, sens in cur.fetchall()}
    for target, source, i in items:
        scope, sens = labels[target]
        batch.relations.append((target, "derived_from", source, None, now))
        prov = plans[i].primary.provenance
        batch.provenance.extend(
            (target, s.kind.value, s.ref, s.hash, s.created_by, s.timestamp, now) for s in prov
        )
        batch.audit_entry(
            target,
            scope,
            sens,
            AuditAction.REINFORCE,
            plans[i].actor,
            now,
            "observed again",
            {"source_id": str(source)},
        )
    # RFC 6.1: the clock restarted; the decay batch recomputes the next checkpoint.
    batch.work.extend((WorkKind.DECAY.value, target, now) for target in counts)


def row_to_record(row: dict[str, Any]) -> MemoryRecord:
    """A hydrated, opened row as a validated record (RFC 2.1)."""
    validity = None
    if row["validity_mode"]:
        validity = {
            "mode": row["validity_mode"],
            "valid_from": row["valid_from"],
            "valid_to": row["valid_to"],
        }
    return MemoryRecord.model_validate(
        {
            "id": row["id"],
            "type": row["type"],
            "scope": row["scope"],
            "sensitivity": row["sensitivity"],
            "confidence": row["confidence"],
            "salience": row["salience"],
            "status": row["status"],
            "lifecycle": {
                "decay": {
                    "curve": row["decay_curve"],
                    "half_life_seconds": row["half_life_seconds"],
                    "min_salience": row["min_salience"],
                    "max_age_seconds": row["max_age_seconds"],
                    "reinforcement_gain": row["reinforcement_gain"],
                },
                "base_salience": row["base_salience"],
                "reinforced_at": row["reinforced_at"],
                "pinned": row["pinned"],
                "deletion_policy": row["deletion_policy"],
            },
            "payload": row["payload"],
            "summary": row["summary"],
            "tags": row["tags"],
            "metadata": row["metadata"],
            "provenance": row["provenance"],
            "relations": row["relations"],
            "validity": validity,
            "occurred_at": row["occurred_at"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "recorded_at": row["recorded_at"],
            "retracted_at": row["retracted_at"],
        }
    )


def hydrate_rows(
    conn: psycopg.Connection, ids: Iterable[uuid.UUID], *, as_of: datetime | None = None
) -> dict[uuid.UUID, dict[str, Any]]:
    """Records' rows by id (``record_fields``, sealed ones still sealed); with ``as_of``, only
    the relations made by then (RFC 5.6)."""
    id_list = list(ids)
    if not id_list:
        return {}
    cur = conn.cursor(row_factory=dict_row)
    cur.execute(q("hydrate_records"), {"ids": id_list, "as_of": as_of})
    return {row["id"]: row for row in cur.fetchall()}


def hydrate(
    conn: psycopg.Connection,
    ids: Iterable[uuid.UUID],
    *,
    as_of: datetime | None = None,
    sealer: Sealer = NO_KEYS,
) -> dict[uuid.UUID, MemoryRecord]:
    """Full records by id, sealed ones opened by ``sealer`` (RFC 7.6); missing ids are absent
    from the result. With ``as_of``, only the relations made by then (RFC 5.6)."""
    rows = hydrate_rows(conn, ids, as_of=as_of)
    return {rid: row_to_record(sealer.open_row(row)) for rid, row in rows.items()}


__all__ = [
    "CaptureOutcome",
    "FactKey",
    "RowBatch",
    "WorkOptions",
    "fact_key",
    "hydrate",
    "hydrate_rows",
    "norm_term",
    "projected_bytes",
    "record_fact_key",
    "row_to_record",
    "sealed_content",
    "search_text",
    "search_text_of",
    "stored_key",
    "write_captures",
]
