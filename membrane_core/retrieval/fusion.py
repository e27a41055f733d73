"""Fusing the retrieval arms into one ranking (RFC 8.2); pure, no I/O.

Every candidate of the pool carries up to four features: vector similarity, full-text rank,
the number of query entities it is linked to, and current salience. Two fusions are offered:
reciprocal rank fusion (``rrf``) and the weighted sum of per-feature z-scores (``zsum``).
"""

from __future__ import annotations

import math
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

#: Fusion methods (RFC 8.2).
METHODS = ("rrf", "zsum")
#: Default fusion (RFC 8.2); chosen by measurement, see docs/benchmarks.md.
DEFAULT_METHOD = "zsum"
#: RRF damping constant (RFC 8.2).
RRF_K = 60.0
#: Default weight of each feature (RFC 8.2); salience breaks near-ties, it does not lead.
DEFAULT_WEIGHTS: Mapping[str, float] = {"vector": 1.0, "text": 1.0, "entity": 1.0, "salience": 0.25}
FEATURES = ("vector", "text", "entity", "salience")
#: Smallest standard deviation a feature is scaled by in ``zsum`` (RFC 8.2): salience lives in
#: [0, 1], and a pool captured within minutes differs by a hair that must not become a z of 1.
SD_FLOOR: Mapping[str, float] = {"salience": 0.1}
#: Added to a semantic record's ``zsum`` score (RFC 8.2): a fact, the store's current belief,
#: outranks the episodes that state it when the evidence for both is the same; as salience's
#: weight, it breaks near-ties and does not lead.
SEMANTIC_PRIOR = 0.25
#: Added to the ``zsum`` score of a record that occurred on a day or in a month the query
#: names (RFC 8.2.2, ``retrieval.when``): about two features' worth, so that a question about
#: a date prefers what happened then over a closer match from another day. Chosen on LoCoMo
#: (of 0.5, 1 and 2), reported on REALTALK (docs/design/dates-in-questions.md).
WHEN_PRIOR = 2.0
#: Adjacent episodes (RFC 8.2.1): the best ``ADJACENT_SOURCES`` active episodes of the pool
#: lift the ``ADJACENT_REACH`` visible episodes before and after them in time (one the arms
#: missed enters), the k-th by ``ADJACENT_DECAY ** k`` of its source's score, never past its
#: source or a fact above it. Chosen on LoCoMo, reported on REALTALK
#: (docs/design/adjacent-episodes.md).
ADJACENT_SOURCES = 10
ADJACENT_REACH = 2
ADJACENT_DECAY = 0.5


@dataclass(frozen=True)
class Features:
    """The ranking signals of one candidate; ``None`` means the arm did not score it."""

    id: uuid.UUID
    vector: float | None = None
    text: float | None = None
    entity: float | None = None
    salience: float | None = None
    semantic: bool = False  #: a semantic record (``SEMANTIC_PRIOR``)
    in_when: bool = False  #: it occurred in a window the query names (``WHEN_PRIOR``)

    def get(self, name: str) -> float | None:
        """The value of feature ``name``."""
        value: float | None = getattr(self, name)
        return value


def _ranks(values: Sequence[tuple[uuid.UUID, float]]) -> dict[uuid.UUID, float]:
    """Fractional ranks, 1 = best; tied values share the mean of the ranks they span."""
    ordered = sorted(values, key=lambda x: -x[1])
    ranks: dict[uuid.UUID, float] = {}
    i = 0
    while i < len(ordered):
        j = i
        while j + 1 < len(ordered) and ordered[j + 1][1] == ordered[i][1]:
            j += 1
        for cid, _ in ordered[i : j + 1]:
            ranks[cid] = (i + j) / 2 + 1
        i = j + 1
    return ranks


def rrf(
    cands: Sequence[Features], weights: Mapping[str, float] = DEFAULT_WEIGHTS, k: float = RRF_K
) -> dict[uuid.UUID, float]:
    """RFC 8.2: ``sum_f w_f / (k + rank_f)`` over the features that scored the candidate."""
    scores = {c.id: 0.0 for c in cands}
    for name in FEATURES:
        w = weights.get(name, 0.0)
        present = [(c.id, v) for c in cands if (v := c.get(name)) is not None and v > 0]
        if w == 0 or not present:
            continue
        for cid, rank in _ranks(present).items():
            scores[cid] += w / (k + rank)
    return scores


def zsum(
    cands: Sequence[Features],
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
    semantic_prior: float = SEMANTIC_PRIOR,
    when_prior: float = WHEN_PRIOR,
) -> dict[uuid.UUID, float]:
    """RFC 8.2: ``sum_f w_f * z_f`` with z-scores over the pool, plus ``semantic_prior`` for a
    semantic record and ``when_prior`` for one in a window the query names (RFC 8.2.2).

    A missing text or entity score counts as 0 (no match); a missing vector similarity
    (no embedding yet) as the pool's lowest similarity. A constant feature contributes 0;
    the spread is floored per feature (``SD_FLOOR``) so noise is not magnified.
    """
    scores = {c.id: 0.0 for c in cands}
    for name in FEATURES:
        w = weights.get(name, 0.0)
        raw = [c.get(name) for c in cands]
        present = [v for v in raw if v is not None]
        if w == 0 or not present:
            continue
        fill = min(present) if name == "vector" else 0.0
        values = [fill if v is None else v for v in raw]
        mean = sum(values) / len(values)
        sd = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        sd = max(sd, SD_FLOOR.get(name, 0.0))
        if sd <= 1e-12:
            continue
        for c, v in zip(cands, values, strict=True):
            scores[c.id] += w * (v - mean) / sd
    for c in cands:
        if c.semantic:
            scores[c.id] += semantic_prior
        if c.in_when:
            scores[c.id] += when_prior
    return scores


def fuse(
    cands: Sequence[Features],
    method: str = DEFAULT_METHOD,
    weights: Mapping[str, float] = DEFAULT_WEIGHTS,
) -> dict[uuid.UUID, float]:
    """RFC 8.2: one fused score per candidate, higher is better."""
    if method == "rrf":
        return rrf(cands, weights)
    if method == "zsum":
        return zsum(cands, weights)
    raise ValueError(f"unknown fusion {method!r}; expected one of {', '.join(METHODS)}")
