"""Late interaction (RFC 8.2.3): the embedding job keeps each record's token signs beside its
vector, retrieval re-ranks the fused pool by them, and neither a sealed record's signs nor a
corrected record ever come out of it."""

from __future__ import annotations

import base64
import json
import os
import uuid
from typing import Any

import pytest
from pydantic import SecretStr

from membrane_core import Membrane, Settings
from membrane_core.enums import Sensitivity
from membrane_core.jobs.maintenance import Job
from membrane_core.providers.deterministic import HashingEmbeddingProvider
from membrane_core.results import RetrieveDiagnostics
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from membrane_core.trust import TrustPolicy
from tests.support.records import KITE_QUESTION, superseded_kite
from tests.support.services import EMBEDDING_DIM

HYPER = TrustPolicy(max_sensitivity=Sensitivity.HYPER, actor="tester")
CALLER = TrustPolicy(read_scopes=frozenset({"s"}), max_sensitivity=Sensitivity.LOW, actor="caller")
ROW = (EMBEDDING_DIM + 7) // 8  # bytes a stored piece


def with_tokens(m: Membrane) -> Membrane:
    """``m`` with its hashing embedder giving each word a token (RFC 8.2.3, 12.3)."""
    provider = m.embedding.provider
    assert isinstance(provider, HashingEmbeddingProvider)
    provider.tokens = True
    return m


@pytest.fixture
def hashing(settings: Settings, db: Database, clock: FakeClock) -> Membrane:
    """A Membrane whose provider is the hashing embedder, giving tokens."""
    return with_tokens(
        Membrane(settings.model_copy(update={"embedding_provider": "hashing"}), database=db, clock=clock)
    )


def turn(m: Membrane, clock: FakeClock, text: str, policy: TrustPolicy = CALLER, **fields: Any) -> uuid.UUID:
    clock.advance(seconds=60)
    body = {"source_kind": "event", "scope": "s", "content": {"text": text}, **fields}
    return m.capture(body, policy).record_ids[0]


def signs(db: Database, record_id: uuid.UUID) -> bytes | None:
    with db.transaction() as conn:
        row = conn.execute(
            "SELECT token_signs FROM record_embeddings WHERE record_id = %s", (record_id,)
        ).fetchone()
    assert row is not None, "the record has a vector"
    return None if row[0] is None else bytes(row[0])


def ranked(m: Membrane, query: str, limit: int = 3) -> tuple[list[uuid.UUID], RetrieveDiagnostics]:
    got = m.retrieve({"query": query, "scopes": ["s"], "limit": limit, "memory_types": ["episodic"]}, CALLER)
    return [r.id for r in got.records], got.diagnostics


def test_the_embedding_job_stores_a_row_of_signs_for_every_word(
    hashing: Membrane, clock: FakeClock, db: Database
) -> None:
    rid = turn(hashing, clock, "the red kite over the hill")
    assert hashing.embedding.run_batch()["embedded"] >= 1
    stored = signs(db, rid)
    assert stored is not None and len(stored) == 6 * ROW  # six words, no markers


def test_the_pool_is_reranked_by_the_words_a_record_holds(hashing: Membrane, clock: FakeClock) -> None:
    # the fused order puts the repeated word first (full text and vector both favour it);
    # only the second turn holds every word of the question
    kites = turn(hashing, clock, "kite kite kite kite kite kite")
    both = turn(hashing, clock, "a red kite drifted slowly over the long grey harbour wall today")
    other = turn(hashing, clock, "groceries on thursday")
    hashing.embedding.run_batch()
    hashing.retriever.late_interaction = False
    off, diag_off = ranked(hashing, "red kite")
    assert diag_off.late_interaction == "off"
    assert off[:2] == [kites, both]  # control: without it the repeated word leads
    hashing.retriever.late_interaction = True
    hashing.retriever._recent.clear()  # the cached query has no tokens
    on, diag_on = ranked(hashing, "red kite")
    assert diag_on.late_interaction == "used"
    assert on[:2] == [both, kites]
    assert other not in on[:2]
    scores = [r.score for r in hashing.retrieve({"query": "red kite", "scopes": ["s"]}, CALLER).records]
    assert scores == sorted(scores, reverse=True)  # the returned scores order the records


def test_records_without_signs_rank_as_fused(hashing: Membrane, clock: FakeClock, db: Database) -> None:
    turn(hashing, clock, "kite kite kite kite kite kite")
    turn(hashing, clock, "a red kite drifted slowly over the long grey harbour wall today")
    hashing.embedding.run_batch()
    hashing.retriever.late_interaction = False
    off = hashing.retrieve({"query": "red kite", "scopes": ["s"]}, CALLER).records
    hashing.retriever.late_interaction = True
    hashing.retriever._recent.clear()
    with db.transaction() as conn:
        conn.execute("UPDATE record_embeddings SET token_signs = NULL")
    got = hashing.retrieve({"query": "red kite", "scopes": ["s"]}, CALLER)
    assert got.diagnostics.late_interaction == "no_tokens"
    assert len(off) == 2  # control: both turns are found
    assert [(r.id, r.score) for r in got.records] == [(r.id, r.score) for r in off]


def test_a_superseded_fact_is_not_brought_back_by_its_words(hashing: Membrane, clock: FakeClock) -> None:
    old, new = superseded_kite(hashing, CALLER)
    got = hashing.retrieve(KITE_QUESTION, CALLER)
    assert got.diagnostics.late_interaction == "used"
    found = [r.id for r in got.records]
    assert new in found  # control: the current fact is found
    assert old not in found


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


def sealing(settings: Settings, db: Database, clock: FakeClock) -> Membrane:
    """A Membrane with the hashing embedder giving tokens and a key ring: hyper is sealed."""
    sealed_settings = settings.model_copy(
        update={
            "embedding_provider": "hashing",
            "encryption_keys": SecretStr(json.dumps({"k1": _key()})),
            "encryption_index_key": SecretStr(_key()),
        }
    )
    return with_tokens(Membrane(sealed_settings, database=db, clock=clock))


def test_a_sealed_record_keeps_no_signs(settings: Settings, db: Database, clock: FakeClock) -> None:
    m = sealing(settings, db, clock)
    hyper = turn(m, clock, "the red kite code word", HYPER, sensitivity="hyper")
    low = turn(m, clock, "the red kite plain word", HYPER, sensitivity="low")
    assert m.embedding.run_batch()["embedded"] == 2
    assert signs(db, low) is not None  # control: a plain record keeps its signs
    assert signs(db, hyper) is None  # sealed at capture: a vector, no signs


def test_sealing_a_record_clears_its_signs(settings: Settings, db: Database, clock: FakeClock) -> None:
    plain = with_tokens(
        Membrane(settings.model_copy(update={"embedding_provider": "hashing"}), database=db, clock=clock)
    )
    hyper = turn(plain, clock, "the red kite code word", HYPER, sensitivity="hyper")
    low = turn(plain, clock, "the red kite plain word", HYPER, sensitivity="low")
    plain.embedding.run_batch()
    assert signs(db, hyper) is not None  # written before encryption was enabled
    keyed = plain.settings.model_copy(
        update={
            "encryption_keys": SecretStr(json.dumps({"k1": _key()})),
            "encryption_index_key": SecretStr(_key()),
        }
    )
    m = Membrane(keyed, database=db, clock=clock)
    assert m.sealing.enqueue() >= 1
    m.maintenance.drain(Job.SEAL)
    assert m.sealing.done()
    assert signs(db, hyper) is None
    assert signs(db, low) is not None  # control: the plain record keeps them


def test_a_provider_without_tokens_stores_none_and_ranks_as_fused(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    plain = Membrane(settings.model_copy(update={"embedding_provider": "hashing"}), database=db, clock=clock)
    rid = turn(plain, clock, "a red kite drifted over the harbour")
    turn(plain, clock, "kite kite kite")
    assert plain.embedding.run_batch()["embedded"] == 2
    assert signs(db, rid) is None
    got, diag = ranked(plain, "red kite")
    assert diag.late_interaction == "off"
    assert rid in got  # control: the vector arm and full text still find it
    assert diag.vector == "used"


@pytest.mark.parametrize("limit", [3, 25])
def test_an_expansion_runs_from_the_reranked_roots(hashing: Membrane, clock: FakeClock, limit: int) -> None:
    # at a limit of 25 the pool is the limit itself; at 3 it is wider: both expand
    kites = turn(hashing, clock, "kite kite kite kite kite kite")
    both = turn(hashing, clock, "a red kite drifted over the harbour wall with Ana")
    hashing.embedding.run_batch()
    got = hashing.retrieve(
        {"query": "red kite", "scopes": ["s"], "limit": limit, "expand": {"hops": 1}}, CALLER
    )
    assert got.diagnostics.late_interaction == "used"
    assert [r.id for r in got.records][:2] == [both, kites]
    assert got.diagnostics.expansion is not None


def test_every_partition_keeps_vectors_in_the_row_and_signs_out_of_it(db: Database) -> None:
    """RFC 8.2.3: past Postgres's 2 KB TOAST threshold the toaster moves the largest movable
    value out of line; the signs are movable and the vector is not, so a distance never
    reads TOAST. (The tests' 32 dimensions cannot pass the threshold; the catalog says it.)"""
    with db.transaction() as conn:
        rows = conn.execute(
            "SELECT c.relname, a.attname, a.attstorage FROM pg_attribute a"
            " JOIN pg_class c ON c.oid = a.attrelid"
            " WHERE (c.relname = 'record_embeddings' OR c.relname LIKE 'record_embeddings\\_p%%')"
            " AND c.relkind IN ('r', 'p') AND a.attname IN ('embedding', 'token_signs')"
        ).fetchall()
    tables = {t for t, _, _ in rows}
    assert len(tables) == 17  # the parent and its 16 partitions
    assert {(col, storage) for _, col, storage in rows} == {("embedding", "m"), ("token_signs", "e")}


def test_embedding_again_leaves_a_sealed_record_without_signs(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    """RFC 12.5: a sealed record keeps no signs by design, so it is not stale for lacking them."""
    m = sealing(settings, db, clock)
    hyper = turn(m, clock, "the red kite code word", HYPER, sensitivity="hyper")
    low = turn(m, clock, "the red kite plain word", HYPER, sensitivity="low")
    assert m.embedding.run_batch()["embedded"] == 2
    with db.transaction() as conn:
        conn.execute("UPDATE record_embeddings SET token_signs = NULL WHERE record_id = %s", (low,))
    assert m.embedding.progress()["without_signs"] == 1
    assert m.embedding.enqueue_stale() == 1  # the plain one, whose signs are gone
    with db.transaction() as conn:
        queued = {
            r for (r,) in conn.execute("SELECT target_id FROM work_items WHERE kind = 'embed'").fetchall()
        }
    assert low in queued and hyper not in queued
    assert m.embedding.run_batch()["embedded"] == 1
    assert signs(db, low) is not None and signs(db, hyper) is None
