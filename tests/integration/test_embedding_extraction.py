"""Embedding and extraction batches against real Postgres (RFC 12.1, 12.2, 5.4, 7.4)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest

from membrane_core import Membrane, Settings
from membrane_core.jobs.embed import EmbeddingService
from membrane_core.jobs.extract import ExtractionService
from membrane_core.providers import DeterministicExtractor, HashingEmbeddingProvider
from membrane_core.providers.base import TransientProviderError
from membrane_core.storage.db import Database
from membrane_core.storage.records import WorkOptions
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.services import EMBEDDING_DIM
from tests.support.sql import rows


@pytest.fixture
def m(settings: Settings, db: Database, clock: FakeClock) -> Membrane:
    return Membrane(settings, database=db, clock=clock, work=WorkOptions(embed=True, extract=True))


def extraction(m: Membrane, extractor: object | None = None) -> ExtractionService:
    return ExtractionService(
        m.db,
        lambda: extractor,
        policy=m.policy,
        clock=m.clock,  # type: ignore[arg-type,return-value]
        work=m.work,
        owner=lambda: "test-worker",
    )


def episode(text: str, sensitivity: str = "low", scope: str = "team") -> dict[str, object]:
    return {"source_kind": "event", "scope": scope, "sensitivity": sensitivity, "content": {"text": text}}


FACTS = (
    "SELECT fact_subject, fact_predicate, fact_object, status, sensitivity FROM memory_records "
    "WHERE type = 'semantic' ORDER BY 1, 2, 3"
)


def test_extraction_honours_tombstones_and_creates_the_rest(m: Membrane, database_url: str):
    obs = {
        "source_kind": "observation",
        "scope": "team",
        "content": {"subject": "Ann", "predicate": "lives_in", "object": "Oslo"},
    }
    fact = m.capture(obs).record_ids[1]
    m.revisions.apply("retract", fact, {"rationale": "she moved"}, DEVELOPMENT_POLICY)
    assert rows(database_url, "SELECT count(*) FROM fact_tombstones")[0][0] == 1
    source = m.capture(episode("Ann lives in Oslo and works at Acme.")).record_ids[0]
    out = extraction(m, DeterministicExtractor()).run_batch()
    assert out["claimed"] == 1 and out["created"] == 1 and out["tombstoned"] == 1
    assert rows(database_url, FACTS) == [
        ("ann", "lives_in", "oslo", "retracted", "low"),  # not revived
        ("ann", "works_at", "acme", "active", "low"),  # positive control
    ]
    created = rows(
        database_url,
        "SELECT r.scope, l.target_id FROM memory_records r "
        "JOIN relations l ON l.source_id = r.id AND l.predicate = 'derived_from' "
        "WHERE r.fact_predicate = 'works_at'",
    )
    assert created == [("team", source)]
    audit = rows(
        database_url,
        "SELECT a.actor, a.action FROM audit_log a JOIN memory_records r "
        "ON r.id = a.record_id WHERE r.fact_predicate = 'works_at'",
    )
    assert audit == [("extractor:deterministic", "create")]
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE kind = 'extract'")[0][0] == 0


def test_extraction_reinforces_live_fact_and_takes_max_sensitivity(
    m: Membrane, database_url: str, clock: FakeClock
):
    obs = {
        "source_kind": "observation",
        "scope": "team",
        "content": {"subject": "Bob", "predicate": "prefers", "object": "tea"},
    }
    fact = m.capture(obs).record_ids[1]
    clock.advance(seconds=10)
    m.capture(episode("Bob prefers tea.", sensitivity="high"))
    m.capture(episode("Bob prefers tea. Cy uses Vim.", sensitivity="low"))
    m.capture(episode("Cy uses Vim.", sensitivity="medium"))
    svc = extraction(m, DeterministicExtractor())
    out = svc.run_batch()
    assert out["created"] == 1 and out["reinforced"] == 1
    facts = rows(database_url, FACTS)
    assert facts == [
        ("bob", "prefers", "tea", "active", "high"),  # raised to its new source
        ("cy", "uses", "vim", "active", "medium"),
    ]  # max of its two sources
    sources = rows(
        database_url,
        "SELECT count(*) FROM relations WHERE source_id = %s AND predicate = 'derived_from'",
        fact,
    )
    assert sources[0][0] == 3  # the observation and both episodes, each once
    assert (
        rows(
            database_url, "SELECT count(*) FROM audit_log WHERE record_id = %s AND action = 'reinforce'", fact
        )[0][0]
        == 2
    )
    # running again finds nothing due and changes nothing
    assert svc.run_batch()["claimed"] == 0
    assert rows(database_url, FACTS) == facts


def test_extraction_without_provider_skips_and_completes(m: Membrane, database_url: str):
    m.capture(episode("Ann lives in Oslo."))
    out = extraction(m, None).run_batch()
    assert out == {
        "job": "extract",
        "claimed": 1,
        "provider": "none",
        "skipped": 1,
        "reason": "no LLM provider configured",
    }
    assert rows(database_url, FACTS) == []
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE kind = 'extract'")[0][0] == 0
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE kind = 'embed'")[0][0] >= 1


class Flaky:
    name, model, dim = "flaky", "flaky-1", EMBEDDING_DIM

    def __init__(self) -> None:
        self.calls = 0

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        self.calls += 1
        if self.calls == 1:
            raise TransientProviderError("HTTP 503")
        return HashingEmbeddingProvider(self.dim).embed(texts)


def test_embedding_batch_writes_vectors_and_retries_transient_errors(
    m: Membrane, database_url: str, clock: FakeClock
):
    ids = [r for i in range(5) for r in m.capture(episode(f"note {i}")).record_ids]
    flaky = Flaky()
    svc = EmbeddingService(m.db, lambda: flaky, clock=clock, owner=lambda: "w")
    failed = svc.run_batch()
    assert failed["rescheduled"] == 5 and "HTTP 503" in failed["error"]
    assert svc.run_batch()["claimed"] == 0  # backing off
    clock.advance(seconds=10)
    ok = svc.run_batch()
    assert ok["claimed"] == 5 and ok["embedded"] == 5
    got = rows(
        database_url,
        "SELECT record_id, model, vector_dims(embedding) FROM record_embeddings ORDER BY record_id",
    )
    assert got == sorted((i, "flaky:flaky-1", EMBEDDING_DIM) for i in ids)
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE kind = 'embed'")[0][0] == 0


def test_lost_lease_writes_nothing(m: Membrane, database_url: str, clock: FakeClock):
    m.capture(episode("note"))
    svc = EmbeddingService(
        m.db,
        lambda: HashingEmbeddingProvider(EMBEDDING_DIM),
        clock=clock,
        owner=lambda: "slow",
        lease_seconds=5,
    )
    from membrane_core.enums import WorkKind
    from membrane_core.storage import workqueue

    with m.db.transaction() as conn:
        items = workqueue.claim(conn, WorkKind.EMBED, owner="slow", limit=10, now=clock(), lease_seconds=5)
    clock.advance(seconds=6)
    other = EmbeddingService(
        m.db, lambda: HashingEmbeddingProvider(EMBEDDING_DIM), clock=clock, owner=lambda: "fast"
    )
    assert other.run_batch()["embedded"] == 1  # took the expired claim over
    with m.db.transaction() as conn:
        assert workqueue.hold(conn, [it.id for it in items], owner="slow") == {}  # nothing for slow
    assert svc.run_batch()["claimed"] == 0
    assert rows(database_url, "SELECT count(*) FROM record_embeddings")[0][0] == 1


class Degenerate:
    """Answers some texts with vectors that cannot be compared: zero, NaN, infinite."""

    name, model, dim = "odd", "odd-1", EMBEDDING_DIM

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        good = HashingEmbeddingProvider(self.dim).embed(texts)
        bad = {
            "zero": [0.0] * self.dim,
            "nan": [float("nan")] + [0.1] * (self.dim - 1),
            "inf": [float("inf")] + [0.0] * (self.dim - 1),
            # beyond float32 as given, stored at length 1: not degenerate
            "huge": [1e39, 1e39] + [0.0] * (self.dim - 2),
            "tiny": [1e-46, 3e-46] + [0.0] * (self.dim - 2),
        }
        return [
            next((v for k, v in bad.items() if k in t.split()), g) for t, g in zip(texts, good, strict=True)
        ]


def test_degenerate_vectors_are_not_stored_and_do_not_fail_the_batch(m: Membrane, database_url: str):
    ids = {
        w: m.capture(episode(f"walrus note {w}")).record_ids[0]
        for w in ("zero", "nan", "inf", "huge", "tiny", "plain")
    }
    svc = EmbeddingService(m.db, Degenerate, clock=m.clock, owner=lambda: "w")
    out = svc.run_batch()
    # before: pgvector refused the NaN (and the float32 overflow) and the statement failed
    # for the whole batch; the tiny vector was stored as zeros
    assert out["claimed"] == 6 and out["embedded"] == 3 and out["degenerate"] == 3
    got = dict(rows(database_url, "SELECT record_id, vector_norm(embedding) FROM record_embeddings"))
    assert set(got) == {ids["huge"], ids["tiny"], ids["plain"]}
    assert all(abs(n - 1.0) < 1e-6 for n in got.values())
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE kind = 'embed'")[0][0] == 0
    # the records without a vector are still found through their text
    found = {r.id for r in m.retrieve({"query": "walrus", "scopes": ["team"]}).records}
    assert found == set(ids.values())
