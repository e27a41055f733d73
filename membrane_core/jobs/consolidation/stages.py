"""Consolidation stages over one claimed batch of episodes (RFC 6.4.2, 6.4.3).

Everything runs in the caller's transaction: the source episodes are re-read under a
share lock first (RFC 7.4), fact keys are serialised by advisory locks (RFC 3.4) and
signature counters by their row lock, so concurrent batches never double count. A
sealed episode (RFC 7.6) is opened to be read; its facts are keyed blind, so they meet only
sealed facts, and it feeds no competence record or plan graph.
"""

from __future__ import annotations

import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from membrane_core.enums import (
    AuditAction,
    MemoryType,
    OutcomeStatus,
    ProvenanceKind,
    RevisionStatus,
    WorkKind,
)
from membrane_core.jobs.consolidation import mining
from membrane_core.models import EpisodicPayload, ProvenanceRef, SemanticPayload
from membrane_core.policy import Policy
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage import jobs
from membrane_core.storage.db import Connection
from membrane_core.storage.records import RowBatch, fact_key

FactKey = tuple[str, str, str, str]


@dataclass(frozen=True)
class Context:
    """What the stages need besides the connection."""

    policy: Policy
    now: datetime
    embed: bool = False
    actor: str = "consolidation"
    #: RFC 7.6: opens sealed episodes and seals what it derives from them
    sealer: Sealer = NO_KEYS
    #: RFC 7.6: whether a sealed derived record gets an ``embed`` item
    embed_sealed: bool = False


@dataclass
class Episode:
    """A locked source episode."""

    id: uuid.UUID
    row: dict[str, Any]
    payload: EpisodicPayload

    @property
    def scope(self) -> str:
        return str(self.row["scope"])

    @property
    def rank(self) -> int:
        return int(self.row["sensitivity_rank"])

    @property
    def kind(self) -> ProvenanceKind:
        return mining.provenance_kind(self.payload)


@dataclass
class Writes:
    """New rows of one batch plus counters."""

    batch: RowBatch = field(default_factory=RowBatch)
    stats: Counter[str] = field(default_factory=Counter)


def load_episodes(
    conn: Connection, ids: list[uuid.UUID], sealer: Sealer = NO_KEYS
) -> dict[uuid.UUID, Episode]:
    """RFC 7.4: the batch's episodes re-read under lock, sealed ones opened (RFC 7.6); missing
    or non-episodic ids are dropped."""
    out = {}
    for rid, locked in jobs.lock_sources(conn, ids).items():
        # RFC 5.7: a proposed episode is no input until approved
        if locked["type"] != MemoryType.EPISODIC.value or locked["status"] in ("retracted", "proposed"):
            continue
        row = sealer.open_row(locked)
        try:
            out[rid] = Episode(rid, row, EpisodicPayload.model_validate(row["payload"]))
        except ValidationError:
            continue
    return out


def _new(w: Writes, ctx: Context, record: Any, rationale: str) -> None:
    w.batch.add_record(record, actor=ctx.actor, rationale=rationale)
    due = ctx.now + timedelta(seconds=record.lifecycle.decay.half_life_seconds)
    w.batch.work.append((WorkKind.DECAY.value, record.id, due))
    if ctx.embed and (ctx.embed_sealed or not ctx.sealer.seals(record.sensitivity)):
        w.batch.work.append((WorkKind.EMBED.value, record.id, ctx.now))


def _reinforce_from(
    conn: Connection, w: Writes, ctx: Context, pairs: list[tuple[uuid.UUID, Episode]], label: str
) -> set[uuid.UUID]:
    """RFC 6.2: reinforce each derived record once per source not yet linked to it."""
    by_id = {(rid, ep.id): ep for rid, ep in pairs}
    fresh = jobs.new_sources(conn, list(by_id))
    counts: dict[uuid.UUID, tuple[int, int]] = {}
    for rid, sid in fresh:
        n, rank = counts.get(rid, (0, 0))
        counts[rid] = (n + 1, max(rank, by_id[(rid, sid)].rank))
    updated = jobs.reinforce(conn, counts, now=ctx.now)
    linked = sorted(p for p in fresh if p[0] in updated)
    jobs.add_relations(conn, linked, now=ctx.now)
    for rid, sid in linked:
        scope, sensitivity = updated[rid]
        w.batch.provenance.append(
            (rid, by_id[(rid, sid)].kind.value, f"record:{sid}", None, ctx.actor, ctx.now, ctx.now)
        )
        w.batch.audit_entry(
            rid,
            scope,
            sensitivity,
            AuditAction.REINFORCE,
            ctx.actor,
            ctx.now,
            "reinforced by a new successful episode",
            {"source_id": str(sid), "stage": label},
        )
    # RFC 6.1: the clock restarted; the decay batch recomputes the next checkpoint.
    w.batch.work.extend((WorkKind.DECAY.value, rid, ctx.now) for rid in sorted(updated))
    w.stats[f"{label}_reinforced"] += len(updated)
    return set(updated)


# -- promotion of facts (RFC 6.4.2) ---------------------------------------------


def promote(conn: Connection, episodes: dict[uuid.UUID, Episode], ctx: Context, w: Writes) -> None:
    """RFC 6.4.2: facts of successful episodes become semantic records or reinforce live ones.

    A tombstoned key, or one whose only facts are retracted, is never re-created or
    reinforced; a contested fact is left for revision to settle.
    """
    found: dict[FactKey, tuple[mining.Triple, list[Episode]]] = {}
    for ep in episodes.values():
        if ep.payload.outcome is not OutcomeStatus.SUCCESS:
            continue
        for triple in mining.episode_facts(ep.payload):
            key = fact_key(ep.scope, *triple, sealer=ctx.sealer, rank=ep.rank)
            entry = found.setdefault(key, (triple, []))
            entry[1].append(ep)
    if not found:
        return
    keys = sorted(found)
    reinforce: list[tuple[uuid.UUID, Episode]] = []
    for key, match in zip(keys, jobs.lock_and_match_facts(conn, keys), strict=True):
        triple, sources = found[key]
        if match.live_id is not None:
            if match.live_status is RevisionStatus.ACTIVE:
                reinforce.extend((match.live_id, ep) for ep in sources)
            else:
                w.stats["facts_contested"] += 1
        elif match.blocked:
            w.stats["facts_blocked"] += 1
        else:
            _new(w, ctx, _fact(triple, key[0], sources, ctx), "promoted from successful episodes")
            w.stats["facts_created"] += 1
    if reinforce:
        _reinforce_from(conn, w, ctx, reinforce, "facts")


def _fact(triple: mining.Triple, scope: str, sources: list[Episode], ctx: Context) -> Any:
    s, p, o = triple
    payload = SemanticPayload(
        subject=s,
        predicate=p,
        object=o,
        evidence=[ProvenanceRef(kind=ep.kind, ref=str(ep.id)) for ep in sources][:256],
    )
    return mining.derived_record(
        memory_type=MemoryType.SEMANTIC,
        payload=payload,
        scope=scope,
        sensitivity_rank=max(ep.rank for ep in sources),
        confidence=max(float(ep.row["confidence"]) for ep in sources),
        summary=f"{s} {p} {o}",
        sources=[(ep.id, ep.kind) for ep in sources],
        linkable={ep.id for ep in sources},
        policy=ctx.policy,
        now=ctx.now,
        actor=ctx.actor,
    )


# -- competence records and plan graphs (RFC 6.4.3) -----------------------------


@dataclass
class SignatureGroup:
    """The episodes of one batch that share a scope and tool signature."""

    scope: str
    key: str
    signature: list[str]
    successes: list[Episode] = field(default_factory=list)
    failures: int = 0
    rank: int = 0


def _groups(episodes: dict[uuid.UUID, Episode], sealer: Sealer) -> dict[tuple[str, str], SignatureGroup]:
    groups: dict[tuple[str, str], SignatureGroup] = {}
    for ep in episodes.values():
        if not ep.payload.tool_calls or ep.payload.outcome is None:
            continue
        if sealer.seals(ep.rank):  # RFC 7.6: its tool names would be counted in plain text
            continue
        sig = mining.signature(ep.payload)
        key = mining.signature_key(sig)
        g = groups.setdefault((ep.scope, key), SignatureGroup(ep.scope, key, sig))
        g.rank = max(g.rank, ep.rank)
        if ep.payload.outcome is OutcomeStatus.SUCCESS:
            g.successes.append(ep)
        else:  # failure and partial count against the signature
            g.failures += 1
    return groups


def procedural(conn: Connection, episodes: dict[uuid.UUID, Episode], ctx: Context, w: Writes) -> None:
    """RFC 6.4.3: count signatures; mine competence records and plan graphs; update statistics."""
    groups = _groups(episodes, ctx.sealer)
    if not groups:
        return
    rows = jobs.upsert_signatures(
        conn,
        [
            {
                "scope": g.scope,
                "key": g.key,
                "signature": g.signature,
                "successes": len(g.successes),
                "failures": g.failures,
                "rank": g.rank,
                "sources": [str(ep.id) for ep in g.successes],
            }
            for g in groups.values()
        ],
        now=ctx.now,
    )
    pending = {sid for r in rows if r["competence_id"] is None for sid in r["pending_sources"]}
    older = load_episodes(conn, sorted(pending - set(episodes)), ctx.sealer)
    known = {**older, **episodes}
    links: list[tuple[str, str, uuid.UUID | None, uuid.UUID | None]] = []
    stats: dict[uuid.UUID, tuple[int, int]] = {}
    reinforce: list[tuple[uuid.UUID, Episode]] = []
    for row in rows:
        g = groups[(row["scope"], row["signature_key"])]
        counts = (int(row["success_count"]), int(row["failure_count"]))
        comp, plan = row["competence_id"], row["plan_id"]
        new_comp = new_plan = None
        if comp is None and counts[0] >= mining.COMPETENCE_MIN_SUCCESSES:
            sources = [known[s] for s in row["pending_sources"] if s in known] or g.successes
            if sources:
                new_comp = _competence(g, sources, row, counts, ctx, w)
        if plan is None and len(g.signature) >= mining.PLAN_MIN_CALLS and g.successes:
            new_plan = _plan(g, row, counts, ctx, w)
        for existing in (comp, plan):
            if existing is not None:
                stats[existing] = counts
                reinforce.extend((existing, ep) for ep in g.successes)
        if new_comp or new_plan:
            links.append((g.scope, g.key, new_comp, new_plan))
    jobs.update_procedural(conn, stats, now=ctx.now)
    if reinforce:
        _reinforce_from(conn, w, ctx, reinforce, "procedures")
    jobs.link_signatures(conn, links)


def _competence(
    g: SignatureGroup,
    sources: list[Episode],
    row: dict[str, Any],
    counts: tuple[int, int],
    ctx: Context,
    w: Writes,
) -> uuid.UUID:
    template = (g.successes or sources)[0]
    intent = mining.intent_of(template.row, template.payload)
    payload = mining.competence(g.signature, template.payload, intent).model_copy(
        update={"performance": mining.performance(*counts, ctx.now)}
    )
    all_sources = list({ep.id: ep for ep in [*sources, *g.successes]}.values())
    record = mining.derived_record(
        memory_type=MemoryType.COMPETENCE,
        payload=payload,
        scope=g.scope,
        sensitivity_rank=max([int(row["sensitivity_rank"])] + [ep.rank for ep in all_sources]),
        confidence=round(counts[0] / max(1, sum(counts)), 6),
        summary=f"competence: {payload.skill_name}",
        sources=[(ep.id, ep.kind) for ep in all_sources],
        linkable={ep.id for ep in all_sources},
        policy=ctx.policy,
        now=ctx.now,
        actor=ctx.actor,
    )
    _new(w, ctx, record, "mined from repeated successful tool signature")
    w.stats["competence_created"] += 1
    return record.id


def _plan(
    g: SignatureGroup, row: dict[str, Any], counts: tuple[int, int], ctx: Context, w: Writes
) -> uuid.UUID:
    template = g.successes[0]
    intent = mining.intent_of(template.row, template.payload) or " > ".join(g.signature)
    payload = mining.plan_graph(template.payload, intent).model_copy(
        update={"metrics": mining.plan_metrics(*counts, ctx.now)}
    )
    record = mining.derived_record(
        memory_type=MemoryType.PLAN_GRAPH,
        payload=payload,
        scope=g.scope,
        sensitivity_rank=max([int(row["sensitivity_rank"])] + [ep.rank for ep in g.successes]),
        confidence=float(template.row["confidence"]),
        summary=f"plan: {payload.intent}",
        sources=[(ep.id, ep.kind) for ep in g.successes],
        linkable={ep.id for ep in g.successes},
        policy=ctx.policy,
        now=ctx.now,
        actor=ctx.actor,
    )
    _new(w, ctx, record, "mined from a multi-step successful episode")
    w.stats["plans_created"] += 1
    return record.id


def consolidate(conn: Connection, episode_ids: list[uuid.UUID], ctx: Context) -> dict[str, int]:
    """RFC 6.4: promotion, competence and plan-graph stages over one batch of episodes."""
    episodes = load_episodes(conn, episode_ids, ctx.sealer)
    w = Writes(batch=RowBatch(sealer=ctx.sealer))
    w.stats["episodes"] = len(episodes)
    promote(conn, episodes, ctx, w)
    procedural(conn, episodes, ctx, w)
    work, w.batch.work = w.batch.work, []
    w.batch.flush(conn)
    jobs.schedule(conn, work)
    return dict(w.stats)
