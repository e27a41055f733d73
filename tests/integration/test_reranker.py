"""The cross-encoder reranker (RFC 8.2.4) on the real store: it orders the fused pool's best
rows by its own scores, a corrected record stays out, and a reranker that cannot be loaded
leaves the fused order and says so."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from membrane_core import Membrane, Settings
from membrane_core.providers.deterministic import HashingEmbeddingProvider
from membrane_core.providers.rerank_local import LocalCrossEncoder
from membrane_core.results import RetrieveDiagnostics
from membrane_core.storage import rowbatch
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from membrane_core.trust import TrustPolicy

pytest.importorskip("transformers", reason="the local extra (membrane[local]) brings the model's code")

from tests.support.crossencoder import tiny_cross_encoder
from tests.support.records import KITE_QUESTION, superseded_kite

CALLER = TrustPolicy(read_scopes=frozenset({"s"}), actor="caller")
TURNS = (
    "a red kite drifted over the harbour wall",
    "the kite string snapped in the wind",
    "we flew the big kite at the beach on sunday",
    "kite festival tickets are sold out",
    "my brother fixed the broken kite frame",
    "the red paint on the kite faded",
    "groceries on thursday, then the kite shop",
    "a kite tangled in the old oak tree",
)
QUERY = "what happened to the red kite"


@pytest.fixture(scope="module")
def model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tiny_cross_encoder(tmp_path_factory.mktemp("reranker") / "tiny")


def store(settings: Settings, db: Database, clock: FakeClock, **extra: Any) -> Membrane:
    update = {"embedding_provider": "hashing", "late_interaction": False, **extra}
    return Membrane(settings.model_copy(update=update), database=db, clock=clock)


def fill(m: Membrane, clock: FakeClock) -> dict[str, uuid.UUID]:
    ids = {}
    for text in TURNS:
        clock.advance(seconds=60)
        body = {"source_kind": "event", "scope": "s", "content": {"text": text}}
        ids[text] = m.capture(body, CALLER).record_ids[0]
    m.embedding.run_batch()
    return ids


def ask(m: Membrane, query: str = QUERY, limit: int = 5) -> tuple[list[str], RetrieveDiagnostics]:
    got = m.retrieve({"query": query, "scopes": ["s"], "limit": limit, "memory_types": ["episodic"]}, CALLER)
    return [r.payload["text"] for r in got.records if r.payload], got.diagnostics


def indexed(m: Membrane, ids: dict[str, uuid.UUID]) -> dict[str, str]:
    """Each turn's indexed text (RFC 8.1), what the reranker reads of it, by its text."""
    out = {}
    for text, rid in ids.items():
        v = m.get(rid, CALLER)
        out[text] = rowbatch.search_text_of(rowbatch.PAYLOAD.validate_python(v.payload), v.summary, v.tags)
    return out


def test_the_reranker_orders_the_pool_by_its_scores(
    settings: Settings, db: Database, clock: FakeClock, model: Path, tmp_path: Path
) -> None:
    m = store(settings, db, clock, reranker_path=model, reranker_weight=100.0)
    texts = indexed(m, fill(m, clock))
    got, diag = ask(m)
    assert diag.reranker == "used"
    scores = LocalCrossEncoder(model, cache_dir=tmp_path / "own").score(QUERY, list(texts.values()))
    by_model = [t for _, t in sorted(zip(scores, texts, strict=True), reverse=True)]
    assert got == by_model[:5]  # every turn is in the pool of 20; the model's best five lead

    plain = store(settings, db, clock)  # control: the same store without a reranker
    fused, diag_off = ask(plain)
    assert diag_off.reranker == "off"
    assert len(fused) == 5
    assert fused != got


def test_a_corrected_fact_is_not_brought_back_by_the_reranker(
    settings: Settings, db: Database, clock: FakeClock, model: Path
) -> None:
    m = store(settings, db, clock, reranker_path=model, reranker_weight=100.0)
    old, new = superseded_kite(m, CALLER)
    got = m.retrieve(KITE_QUESTION, CALLER)
    assert got.diagnostics.reranker == "used"
    found = [r.id for r in got.records]
    assert new in found  # control: the current fact is found and re-ranked
    assert old not in found


def test_a_reranker_that_cannot_load_keeps_the_fused_order(
    settings: Settings, db: Database, clock: FakeClock, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    plain = store(settings, db, clock)
    fill(plain, clock)
    fused, _ = ask(plain)
    broken = store(settings, db, clock, reranker_path=tmp_path / "no-such-model")
    got, diag = ask(broken)
    assert diag.reranker == "provider_error"
    assert len(fused) == 5  # control: the question finds turns
    assert got == fused
    again, diag = ask(broken)
    assert diag.reranker == "provider_error" and again == fused
    said = [r for r in caplog.records if "reranker cannot be loaded" in r.getMessage()]
    assert len(said) == 1  # one attempt to load it, said once


def test_a_retrieve_without_a_question_does_not_load_it(
    settings: Settings, db: Database, clock: FakeClock, tmp_path: Path
) -> None:
    m = store(settings, db, clock, reranker_path=tmp_path / "no-such-model")
    fill(m, clock)
    got = m.retrieve({"scopes": ["s"], "limit": 3}, CALLER)
    assert got.diagnostics.reranker == "off"
    assert len(got.records) == 3
    assert m.retriever._reranker_factory is not None, "not built yet"


def test_late_interaction_and_the_reranker_both_order_the_pool(
    settings: Settings, db: Database, clock: FakeClock, model: Path
) -> None:
    m = store(settings, db, clock, reranker_path=model, reranker_weight=100.0, late_interaction=True)
    provider = m.embedding.provider
    assert isinstance(provider, HashingEmbeddingProvider)
    provider.tokens = True  # the hashing embedder gives each word a token (RFC 8.2.3)
    texts = indexed(m, fill(m, clock))
    got, diag = ask(m)
    assert diag.late_interaction == "used"
    assert diag.reranker == "used"
    scores = m.retriever.reranker()[0].score(QUERY, list(texts.values()))  # type: ignore[union-attr]
    by_model = [t for _, t in sorted(zip(scores, texts, strict=True), reverse=True)]
    assert got == by_model[:5]


def test_an_expansion_after_the_reranker_finds_the_neighbours(
    settings: Settings, db: Database, clock: FakeClock, model: Path
) -> None:
    m = store(settings, db, clock, reranker_path=model)
    for text in ("Ana flew the red kite", "Ana lost the kite string", "Bo bought a kite for Ana"):
        clock.advance(seconds=60)
        m.capture({"source_kind": "event", "scope": "s", "content": {"text": text}}, CALLER)
    m.embedding.run_batch()
    body = {"query": "Ana kite", "scopes": ["s"], "limit": 3, "expand": {"hops": 1}}
    got = m.retrieve({**body, "memory_types": ["episodic"]}, CALLER)
    assert got.diagnostics.reranker == "used"
    assert len(got.records) == 3
    # read in a transaction of its own, after the model ran (RFC 8.2.4, 8.4)
    assert [n.payload["canonical_name"] for n in got.neighbors if n.payload] == ["Ana"]
