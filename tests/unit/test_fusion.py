from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

import pytest

from membrane_core.enums import MemoryType
from membrane_core.models import (
    CompetencePayload,
    DecayProfile,
    EpisodicPayload,
    Lifecycle,
    MemoryRecord,
    PerformanceStats,
    PlanGraphPayload,
    PlanMetrics,
    PlanNode,
)
from membrane_core.retrieval import fusion, selector
from membrane_core.retrieval.retriever import query_identifiers, query_terms

A, B, C, D = (uuid.UUID(int=i) for i in range(1, 5))


def test_rrf_rewards_agreement_between_arms() -> None:
    cands = [
        fusion.Features(A, vector=0.9, text=1.0),
        fusion.Features(B, vector=0.8, text=5.0),
        fusion.Features(C, vector=0.1, text=None),
    ]
    scores = fusion.rrf(cands)
    # B: rank 2 in vector, rank 1 in text; A: rank 1 and rank 2; C: rank 3 in vector only
    assert scores[A] == pytest.approx(scores[B])
    assert scores[C] < scores[A]
    assert scores[C] == pytest.approx(1 / (fusion.RRF_K + 3))


def test_rrf_ties_share_the_mean_rank() -> None:
    cands = [fusion.Features(x, entity=1.0) for x in (A, B, C)] + [fusion.Features(D, text=2.0)]
    scores = fusion.rrf(cands, {"entity": 1.0, "text": 1.0})
    assert scores[A] == scores[B] == scores[C] == pytest.approx(1 / (fusion.RRF_K + 2))
    assert scores[D] == pytest.approx(1 / (fusion.RRF_K + 1))


def test_zsum_fills_missing_features() -> None:
    cands = [
        fusion.Features(A, vector=0.9, text=3.0, salience=1.0),
        fusion.Features(B, vector=None, text=None, salience=1.0),
        fusion.Features(C, vector=0.5, text=1.0, salience=1.0),
    ]
    scores = fusion.zsum(cands)
    assert scores[A] > scores[C] > scores[B]
    # a constant feature (salience) contributes nothing
    only_salience = fusion.zsum(cands, {"salience": 1.0})
    assert set(only_salience.values()) == {0.0}


def test_weights_zero_disable_a_feature() -> None:
    cands = [fusion.Features(A, vector=0.9, text=1.0), fusion.Features(B, vector=0.1, text=9.0)]
    for method in fusion.METHODS:
        text_only = fusion.fuse(cands, method, {"text": 1.0})
        assert text_only[B] > text_only[A]
        vector_only = fusion.fuse(cands, method, {"vector": 1.0})
        assert vector_only[A] > vector_only[B]
    with pytest.raises(ValueError):
        fusion.fuse(cands, "sum")


def test_query_terms_are_normalised_ngrams() -> None:
    terms = query_terms("Where does  Ada   Lovelace's friend live?")
    assert "ada lovelace" in terms and "ada" in terms and "live" in terms
    assert all(t == t.casefold() for t in terms)
    assert query_terms(None) == [] and query_terms("   ") == []
    assert ("github", "octocat") in query_identifiers("who is github:octocat?")
    assert ("handle", "ada") in query_identifiers("ping @Ada")


NOW = datetime(2026, 1, 1, tzinfo=UTC)


def _record(payload: object, *, confidence: float = 0.5, age_days: float = 0) -> MemoryRecord:
    kind = payload.kind  # type: ignore[attr-defined]
    return MemoryRecord(
        id=uuid.uuid4(),
        type=MemoryType(kind),
        scope="s",
        confidence=confidence,
        salience=1.0,
        lifecycle=Lifecycle(
            decay=DecayProfile(half_life_seconds=86400), reinforced_at=NOW - timedelta(days=age_days)
        ),
        payload=payload,
        created_at=NOW,
        updated_at=NOW,
        recorded_at=NOW,
    )


def _skill(success: int, failure: int) -> CompetencePayload:
    return CompetencePayload(
        skill_name="deploy", performance=PerformanceStats(success_count=success, failure_count=failure)
    )


def test_selector_prefers_successful_recent_applicable() -> None:
    good = _record(_skill(9, 1), confidence=0.9)
    poor = _record(_skill(1, 9), confidence=0.9, age_days=60)
    episode = _record(EpisodicPayload(text="not selectable"))
    sel = selector.select([poor, good, episode], {}, NOW)
    assert sel is not None and sel.record_id == good.id
    assert sel.confidence > 0.3 and not sel.needs_more


def test_selector_uses_similarity_when_present_and_reports_close_calls() -> None:
    a = _record(_skill(5, 5), confidence=0.1)
    b = _record(_skill(5, 5), confidence=0.9)
    # without similarities the confidence decides
    assert selector.select([a, b], {}, NOW).record_id == b.id  # type: ignore[union-attr]
    # with similarities they decide instead
    sel = selector.select([a, b], {a.id: 0.95, b.id: 0.2}, NOW)
    assert sel is not None and sel.record_id == a.id
    close = selector.select([a, b], {a.id: 0.50, b.id: 0.49}, NOW)
    assert close is not None and close.needs_more and close.confidence < 0.1


def test_selector_plan_graph_failure_rate_and_empty() -> None:
    node = [PlanNode(id="n1", op="run")]
    reliable = _record(
        PlanGraphPayload(intent="ship", nodes=node, metrics=PlanMetrics(execution_count=10, failure_rate=0.0))
    )
    flaky = _record(
        PlanGraphPayload(intent="ship", nodes=node, metrics=PlanMetrics(execution_count=10, failure_rate=0.9))
    )
    sel = selector.select([flaky, reliable], {}, NOW)
    assert sel is not None and sel.record_id == reliable.id
    assert selector.success_rate(_record(PlanGraphPayload(intent="x", nodes=node))) == 0.5
    assert selector.select([_record(EpisodicPayload(text="x"))], {}, NOW) is None


def test_zsum_puts_a_fact_above_an_episode_with_the_same_evidence() -> None:
    """RFC 8.2: the semantic prior breaks a tie between a fact and the episode stating it."""
    episode, fact, other = uuid.uuid4(), uuid.uuid4(), uuid.uuid4()
    cands = [
        fusion.Features(episode, vector=0.8, text=2.0, entity=1.0, salience=1.0),
        fusion.Features(fact, vector=0.8, text=2.0, entity=1.0, salience=1.0, semantic=True),
        fusion.Features(other, vector=0.2, text=0.5, entity=0.0, salience=1.0, semantic=True),
    ]
    scores = fusion.fuse(cands, "zsum")
    assert scores[fact] - scores[episode] == pytest.approx(fusion.SEMANTIC_PRIOR)
    assert scores[episode] > scores[other]  # a prior never lifts a fact past better evidence
    assert fusion.fuse(cands, "rrf")[fact] == fusion.fuse(cands, "rrf")[episode]  # rrf: no prior
