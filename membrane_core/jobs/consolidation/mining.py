"""What consolidation reads out of an episode: facts, tool signatures, plan graphs (RFC 6.4).

Pure functions over payloads; no I/O. Records are built here and written by
:mod:`membrane_core.consolidation.stages`.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from membrane_core.capture.plan import new_id
from membrane_core.enums import EdgeKind, MemoryType, ProvenanceKind, Sensitivity
from membrane_core.models import (
    CompetencePayload,
    EpisodicPayload,
    Lifecycle,
    MemoryRecord,
    PerformanceStats,
    PlanEdge,
    PlanGraphPayload,
    PlanMetrics,
    PlanNode,
    ProvenanceSource,
    RecipeStep,
    Relation,
    Trigger,
)
from membrane_core.policy import Policy

#: Bounds on what one episode may contribute.
MAX_FACTS_PER_EPISODE = 64
MAX_TERM = 512
#: RFC 6.4.3: a tool sequence of at least this many calls yields a plan graph.
PLAN_MIN_CALLS = 3
#: RFC 6.4.3: a signature seen in this many successful episodes yields a competence record.
COMPETENCE_MIN_SUCCESSES = 2

Triple = tuple[str, str, str]

_KIND_BY_SOURCE = {
    "event": ProvenanceKind.EVENT,
    "tool_output": ProvenanceKind.TOOL_CALL,
    "observation": ProvenanceKind.OBSERVATION,
    "outcome": ProvenanceKind.OUTCOME,
}


def _triple(value: Any) -> Triple | None:
    if not isinstance(value, dict):
        return None
    parts = [value.get("subject"), value.get("predicate"), value.get("object")]
    if not all(isinstance(p, (str, int, float)) and not isinstance(p, bool) for p in parts):
        return None
    s, p, o = (str(x).strip() for x in parts)
    if not (s and p and o) or max(len(s), len(p), len(o)) > MAX_TERM:
        return None
    return (s, p, o)


def _fact_items(value: Any) -> Iterable[Any]:
    """``value`` itself, the items of a list, and the items of a ``facts`` list inside it."""
    if isinstance(value, list):
        yield from value
        return
    yield value
    if isinstance(value, dict) and isinstance(value.get("facts"), list):
        yield from value["facts"]


def episode_facts(payload: EpisodicPayload) -> list[Triple]:
    """RFC 6.4.2: observation-like content: ``content.facts``, a top-level triple, tool results."""
    found: dict[tuple[str, str, str], Triple] = {}
    sources: list[Any] = [payload.data, *(c.result for c in payload.tool_calls)]
    for source in sources:
        for item in _fact_items(source):
            t = _triple(item)
            if t is not None:
                found.setdefault(tuple(x.casefold() for x in t), t)  # type: ignore[arg-type]
            if len(found) >= MAX_FACTS_PER_EPISODE:
                return list(found.values())
    return list(found.values())


def signature(payload: EpisodicPayload) -> list[str]:
    """RFC 6.4.3: the ordered tool names of an episode."""
    return [c.tool for c in payload.tool_calls]


def signature_key(sig: Sequence[str]) -> str:
    """A fixed-size key for a signature (tool names may be long)."""
    return hashlib.sha256("\x1f".join(sig).encode()).hexdigest()[:40]


def _leaves(value: Any, out: set[str], depth: int = 0) -> set[str]:
    if depth > 8:
        return out
    if isinstance(value, dict):
        for v in value.values():
            _leaves(v, out, depth + 1)
    elif isinstance(value, list):
        for v in value[:256]:
            _leaves(v, out, depth + 1)
    elif isinstance(value, str) and len(value.strip()) >= 3:
        out.add(value.strip())
    elif isinstance(value, (int, float)) and not isinstance(value, bool) and value not in (0, 1):
        out.add(repr(value))
    return out


def plan_graph(payload: EpisodicPayload, intent: str) -> PlanGraphPayload:
    """RFC 6.4.3: one node per tool call, control edges in order, data edges where a later
    call's arguments reuse a value of an earlier call's result."""
    calls = payload.tool_calls
    nodes = [PlanNode(id=f"step{i + 1}", op=c.tool, params=c.args) for i, c in enumerate(calls)]
    edges = [
        PlanEdge(source=nodes[i].id, target=nodes[i + 1].id, kind=EdgeKind.CONTROL)
        for i in range(len(nodes) - 1)
    ]
    results = [_leaves(c.result, set()) for c in calls]
    for j, later in enumerate(calls):
        used = _leaves(later.args, set())
        for i in range(j):
            if used & results[i]:
                edges.append(PlanEdge(source=nodes[i].id, target=nodes[j].id, kind=EdgeKind.DATA))
    return PlanGraphPayload(intent=intent[:MAX_TERM] or "tool sequence", nodes=nodes, edges=edges)


def competence(sig: Sequence[str], payload: EpisodicPayload, intent: str) -> CompetencePayload:
    """RFC 6.4.3: a competence record for a tool signature, its recipe from one episode."""
    name = " > ".join(sig)[:MAX_TERM]
    return CompetencePayload(
        skill_name=name,
        triggers=[Trigger(signal=(intent or name)[:MAX_TERM])],
        recipe=[
            RecipeStep(
                step=f"call {c.tool}",
                tool=c.tool,
                args_schema={k: type(v).__name__ for k, v in c.args.items()},
            )
            for c in payload.tool_calls
        ],
        required_tools=list(dict.fromkeys(sig))[:64],
        signature=list(sig),
    )


def intent_of(row: dict[str, Any], payload: EpisodicPayload) -> str:
    """A short statement of what an episode was for: its summary, else its text."""
    text = row.get("summary") or payload.text or ""
    return " ".join(str(text).split())[:200]


def provenance_kind(payload: EpisodicPayload) -> ProvenanceKind:
    """The provenance kind a record derived from ``payload`` cites."""
    return _KIND_BY_SOURCE.get(payload.source_kind, ProvenanceKind.EVENT)


def derived_record(
    *,
    memory_type: MemoryType,
    payload: Any,
    scope: str,
    sensitivity_rank: int,
    confidence: float,
    summary: str | None,
    sources: Sequence[tuple[uuid.UUID, ProvenanceKind]],
    linkable: set[uuid.UUID],
    policy: Policy,
    now: datetime,
    actor: str,
) -> MemoryRecord:
    """RFC 7.4: a record derived from ``sources``: their scope, the maximum of their sensitivities.

    ``derived_from`` relations point at the sources that still exist (``linkable``);
    provenance names every source.
    """
    return MemoryRecord(
        id=new_id(),
        type=memory_type,
        scope=scope,
        sensitivity=Sensitivity.from_rank(sensitivity_rank),
        confidence=confidence,
        salience=1.0,
        lifecycle=Lifecycle(
            decay=policy.decay_profile(memory_type),
            base_salience=1.0,
            reinforced_at=now,
            deletion_policy=policy.deletion[memory_type],
        ),
        payload=payload,
        summary=summary,
        provenance=[
            ProvenanceSource(kind=k, ref=f"record:{sid}", created_by=actor, timestamp=now)
            for sid, k in sources
        ][:256],
        relations=[
            Relation(predicate="derived_from", target_id=sid) for sid, _ in sources if sid in linkable
        ][:1024],
        created_at=now,
        updated_at=now,
        recorded_at=now,
    )


def performance(successes: int, failures: int, now: datetime) -> PerformanceStats:
    """Success statistics of a competence record (RFC 4.4)."""
    return PerformanceStats(success_count=successes, failure_count=failures, last_used_at=now)


def plan_metrics(successes: int, failures: int, now: datetime) -> PlanMetrics:
    """Execution statistics of a plan graph (RFC 4.4)."""
    total = successes + failures
    return PlanMetrics(
        execution_count=total, failure_rate=failures / total if total else 0.0, last_executed_at=now
    )
