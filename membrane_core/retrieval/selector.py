"""Choosing among competence and plan_graph candidates (RFC 8.5); pure, no I/O."""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from membrane_core.enums import MemoryType
from membrane_core.models import CompetencePayload, MemoryRecord, PlanGraphPayload
from membrane_core.results import Selection

#: Half-life of the recency signal (RFC 8.5).
RECENCY_HALF_LIFE_SECONDS = 30 * 86400
#: Below this gap between the best two scores the selection ``needs_more`` (RFC 8.5).
DEFAULT_THRESHOLD = 0.1
SELECTABLE = frozenset({MemoryType.COMPETENCE, MemoryType.PLAN_GRAPH})


@dataclass(frozen=True)
class Scored:
    """One candidate's three signals and their equally weighted mean (RFC 8.5)."""

    record_id: uuid.UUID
    applicability: float
    success: float
    recency: float

    @property
    def score(self) -> float:
        """The mean of the three signals, in [0, 1]."""
        return (self.applicability + self.success + self.recency) / 3.0


def success_rate(record: MemoryRecord) -> float:
    """RFC 8.5: observed success, Laplace-smoothed so an unused record scores 0.5."""
    p = record.payload
    if isinstance(p, CompetencePayload):
        s, f = p.performance.success_count, p.performance.failure_count
        return (s + 1) / (s + f + 2)
    if isinstance(p, PlanGraphPayload):
        n = p.metrics.execution_count
        if n == 0:
            return 0.5
        failures = p.metrics.failure_rate * n
        return (n - failures + 1) / (n + 2)
    return 0.0


def recency(record: MemoryRecord, now: datetime) -> float:
    """RFC 8.5: ``2^(-(now - reinforced_at) / 30 days)``."""
    elapsed = max(0.0, (now - record.lifecycle.reinforced_at).total_seconds())
    return math.pow(2.0, -elapsed / RECENCY_HALF_LIFE_SECONDS)


def score(
    records: Sequence[MemoryRecord], similarity: Mapping[uuid.UUID, float | None], now: datetime
) -> list[Scored]:
    """RFC 8.5: applicability (cosine similarity, else confidence), success rate and recency."""
    out = []
    for r in records:
        if r.type not in SELECTABLE:
            continue
        sim = similarity.get(r.id)
        applicability = r.confidence if sim is None else min(1.0, max(0.0, sim))
        out.append(Scored(r.id, applicability, success_rate(r), recency(r, now)))
    return sorted(out, key=lambda s: (-s.score, str(s.record_id)))


def select(
    records: Sequence[MemoryRecord],
    similarity: Mapping[uuid.UUID, float | None],
    now: datetime,
    *,
    threshold: float = DEFAULT_THRESHOLD,
) -> Selection | None:
    """RFC 8.5: the best candidate; ``confidence`` is its lead over the runner-up (scores in
    [0, 1], a lone candidate leads by its own score) and ``needs_more`` is set when the
    lead is under ``threshold``. ``None`` when there is no candidate."""
    ranked = score(records, similarity, now)
    if not ranked:
        return None
    best = ranked[0].score
    second = ranked[1].score if len(ranked) > 1 else 0.0
    gap = round(max(0.0, best - second), 6)
    return Selection(record_id=ranked[0].record_id, confidence=gap, needs_more=gap < threshold)
