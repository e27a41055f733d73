"""Hybrid retrieval: arms, fusion, status, bitemporal reads, filters (RFC 8.1-8.3, 5.1, 5.6)."""

from __future__ import annotations

import random
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from membrane_cli.bench import load as benchload
from membrane_cli.bench import retrieve as bench
from membrane_core import Membrane, Settings, errors
from membrane_core.enums import Sensitivity
from membrane_core.requests import RetrieveRequest
from membrane_core.retrieval import fusion, retriever
from membrane_core.retrieval.retriever import Retriever
from membrane_core.storage import retrieval
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy
from tests.support.services import EMBEDDING_DIM

EVIDENCE = [{"kind": "observation", "ref": "user said so"}]


def ev(scope: str, text: str, **kw: object) -> dict[str, object]:
    return {"source_kind": "event", "scope": scope, "content": {"text": text}, **kw}


def obs(scope: str, s: str, p: str, o: str, **content: object) -> dict[str, object]:
    return {
        "source_kind": "observation",
        "scope": scope,
        "content": {"subject": s, "predicate": p, "object": o, **content},
    }


@pytest.fixture
def hashing(tmp_path: Path, database_url: str, db: Database, clock: FakeClock) -> Iterator[Membrane]:
    """A Membrane whose embedding provider is the offline hashing embedder."""
    s = Settings(
        database_url=database_url,
        data_dir=tmp_path,
        embedding_dim=EMBEDDING_DIM,
        embedding_provider="hashing",
    )
    yield Membrane(s, database=db, clock=clock)


def ids(result: object) -> list[object]:
    return [r.id for r in result.records]  # type: ignore[attr-defined]


def test_long_question_matches_any_informative_term(membrane: Membrane) -> None:
    membrane.retriever.adjacent = False  # the full-text arm alone, no adjacent episodes (8.2.1)
    hit = membrane.capture(ev("s", "Caroline joined the pottery workshop downtown"))
    miss = membrane.capture(ev("s", "the weather was sunny all week"))
    got = membrane.retrieve(
        {"query": "When exactly did Caroline start going to that pottery class?", "scopes": ["s"]}
    )
    assert hit.record_ids[0] in ids(got)
    assert miss.record_ids[0] not in ids(got)
    assert got.diagnostics.arms.text >= 1
    assert got.diagnostics.vector == "no_provider"


def test_rare_terms_outrank_common_ones(membrane: Membrane) -> None:
    common = [membrane.capture(ev("s", f"Melanie said hello number {i}")) for i in range(8)]
    rare = membrane.capture(ev("s", "Melanie painted a sunrise over the lake"))
    got = membrane.retrieve({"query": "When did Melanie paint a sunrise?", "scopes": ["s"]})
    assert ids(got)[0] == rare.record_ids[0]
    assert common[0].record_ids[0] in ids(got)  # the common term still matches


def test_vector_arm_finds_what_full_text_cannot(hashing: Membrane) -> None:
    # "to be or not to be" is all English stop words: no lexeme for full-text search
    quote = hashing.capture(ev("s", "to be or not to be"))
    other = hashing.capture(ev("s", "quarterly revenue grew in the north region"))
    assert hashing.embedding.run_batch()["embedded"] >= 2
    got = hashing.retrieve({"query": "to be or not to be", "scopes": ["s"], "limit": 1})
    assert ids(got) == [quote.record_ids[0]]
    assert got.diagnostics.vector == "used"
    assert got.diagnostics.arms.vector >= 2 and got.diagnostics.arms.text == 0
    assert other.record_ids[0] not in ids(got)


def test_a_query_asked_again_reuses_its_vector(hashing: Membrane) -> None:
    """RFC 8.1.1: recent query vectors are kept, so a repeated question costs no model call."""
    quote = hashing.capture(ev("s", "to be or not to be"))
    hashing.embedding.run_batch()
    provider = hashing.embedding.provider
    assert provider is not None
    calls: list[list[str]] = []
    real = provider.embed

    def counted(texts: list[str]) -> list[list[float]]:
        calls.append(list(texts))
        return real(texts)

    provider.embed = counted  # type: ignore[method-assign]
    first = hashing.retrieve({"query": "to be or not to be", "scopes": ["s"], "limit": 1})
    again = hashing.retrieve({"query": "to be or not to be", "scopes": ["s"], "limit": 1})
    other = hashing.retrieve({"query": "or not to be", "scopes": ["s"], "limit": 1})
    assert ids(first) == ids(again) == [quote.record_ids[0]]
    assert again.diagnostics.vector == "used"
    assert calls == [["to be or not to be"], ["or not to be"]]  # another question is embedded
    assert other.diagnostics.vector == "used"


def test_filtered_vector_scan_does_not_starve(db: Database, database_url: str, clock: FakeClock) -> None:
    # 20,000 records, half in the caller's scope: large enough that the planner walks the
    # HNSW index; the scan must keep going (iterative scan) until the window is full
    # instead of filtering one ef_search batch down to about half of it
    corpus = bench.Corpus(dim=EMBEDDING_DIM, clusters=20, scopes=2, seed=3)
    benchload.drop_indexes(database_url)
    for chunk in bench._chunks(corpus, 20_000, 10_000, clock.now):
        benchload.copy_chunk(
            database_url,
            records=chunk["records"],
            payloads=chunk["payloads"],
            embeddings=chunk["embeddings"],
            relations=chunk["relations"],
            entity_terms=chunk["terms"],
        )
    benchload.build_indexes(database_url)
    embedder = bench.FixedEmbedder(EMBEDDING_DIM)
    embedder.vectors["to be or not"] = corpus.centres[0].tolist()
    retriever = Retriever(db, clock=clock, embedder=embedder)
    req = RetrieveRequest(query="to be or not", scopes=["scope-1"], limit=200, max_bytes=16 * 1024 * 1024)
    got = retriever.retrieve(req, DEVELOPMENT_POLICY)
    assert got.diagnostics.arms.vector == 200
    assert len(got.records) == 200 and {r.scope for r in got.records} == {"scope-1"}


def test_tag_filter_ranks_few_tagged_records_exactly(hashing: Membrane) -> None:
    """RFC 8.1.1: with few tagged records the vector arm ranks exactly those, in scope only."""
    near = [hashing.capture(ev("s", "to be or not to be")) for _ in range(30)]  # untagged
    tagged = hashing.capture(ev("s", "to be or not to be, that is it", tags=["ops"]))
    far_tagged = hashing.capture(ev("s", "quarterly revenue north region", tags=["ops"]))
    elsewhere = hashing.capture(ev("other", "to be or not to be", tags=["ops"]))
    assert hashing.embedding.run_batch()["embedded"] >= 33
    got = hashing.retrieve({"query": "to be or not to be", "scopes": ["s"], "tags": ["ops"], "limit": 5})
    assert got.diagnostics.vector == "used" and got.diagnostics.arms.vector == 2
    assert ids(got)[0] == tagged.record_ids[0]  # positive control: the nearest tagged record
    assert far_tagged.record_ids[0] in ids(got)
    assert elsewhere.record_ids[0] not in ids(got)  # tagged, but in a scope not asked for
    assert not {n.record_ids[0] for n in near} & set(ids(got))  # nearer, but untagged


def test_entity_arm_links_mentions(membrane: Membrane) -> None:
    membrane.retriever.adjacent = False  # the entity arm alone, no adjacent episodes (8.2.1)
    linked = membrane.capture(
        {
            "source_kind": "event",
            "scope": "s",
            "content": {"text": "met her at the conference", "entities": ["Ada Lovelace"]},
        }
    )
    unrelated = membrane.capture(ev("s", "conference coffee was cold"))
    got = membrane.retrieve({"query": "what do we know about ada lovelace", "scopes": ["s"]})
    assert got.diagnostics.arms.entity >= 2  # the entity and the record mentioning it
    assert linked.record_ids[0] in ids(got)
    assert any(r.type.value == "entity" for r in got.records)
    assert unrelated.record_ids[0] not in ids(got)


def test_contested_ranked_below_active_retracted_excluded(membrane: Membrane) -> None:
    strong = membrane.capture(obs("s", "deploy target", "is", "kubernetes cluster kubernetes"))
    weak = membrane.capture(obs("s", "backup target", "is", "kubernetes"))
    fact_strong, fact_weak = strong.record_ids[1], weak.record_ids[1]
    membrane.revisions.contest(fact_strong, {"rationale": "disputed"}, DEVELOPMENT_POLICY)
    got = membrane.retrieve({"query": "kubernetes", "scopes": ["s"], "memory_types": ["semantic"]})
    assert ids(got) == [fact_weak, fact_strong]
    assert [r.status.value for r in got.records] == ["active", "contested"]
    no_contested = membrane.retrieve(
        {"query": "kubernetes", "scopes": ["s"], "memory_types": ["semantic"], "include_contested": False}
    )
    assert ids(no_contested) == [fact_weak]
    membrane.revisions.retract(fact_weak, {"rationale": "wrong"}, DEVELOPMENT_POLICY)
    default = membrane.retrieve({"query": "kubernetes", "scopes": ["s"], "memory_types": ["semantic"]})
    assert ids(default) == [fact_strong]
    with_retracted = membrane.retrieve(
        {"query": "kubernetes", "scopes": ["s"], "memory_types": ["semantic"], "include_retracted": True}
    )
    assert {r.id: r.status.value for r in with_retracted.records} == {
        fact_strong: "contested",
        fact_weak: "retracted",
    }


def test_as_of_reads_what_was_believed(membrane: Membrane, clock: FakeClock) -> None:
    t0 = clock.now
    old = membrane.capture(obs("s", "office", "is in", "berlin")).record_ids[1]
    t1 = clock.advance(days=1)
    membrane.revisions.contest(old, {"rationale": "moved?"}, DEVELOPMENT_POLICY)
    clock.advance(days=1)
    membrane.revisions.retract(old, {"rationale": "moved"}, DEVELOPMENT_POLICY)
    t2 = clock.advance(days=1)
    new = membrane.capture(obs("s", "office", "is in", "berlin mitte")).record_ids[1]
    q = {"query": "office berlin", "scopes": ["s"], "memory_types": ["semantic"]}
    assert ids(membrane.retrieve(q)) == [new]
    before = membrane.retrieve({**q, "as_of": (t0 + (t1 - t0) / 2).isoformat()})
    assert ids(before) == [old] and before.records[0].status.value == "active"
    contested = membrane.retrieve({**q, "as_of": (t1 + (t2 - t1) / 4).isoformat()})
    assert ids(contested) == [old] and contested.records[0].status.value == "contested"
    gap = (t2 - (t1 - t0) / 2).isoformat()  # after the retraction, before the new fact
    after = membrane.retrieve({**q, "as_of": gap})
    assert ids(after) == []
    asked = membrane.retrieve({**q, "as_of": gap, "include_retracted": True})
    assert ids(asked) == [old] and asked.records[0].status.value == "retracted"


def test_valid_at_reads_what_was_true(membrane: Membrane) -> None:
    boxed = membrane.capture(
        obs("s", "ceo", "is", "alice", valid_from="2020-01-01T00:00:00Z", valid_to="2023-01-01T00:00:00Z")
    ).record_ids[1]
    always = membrane.capture(obs("s", "ceo office", "is", "tower")).record_ids[1]
    q = {"query": "ceo", "scopes": ["s"], "memory_types": ["semantic"]}
    inside = membrane.retrieve({**q, "valid_at": "2021-06-01T00:00:00Z"})
    assert set(ids(inside)) == {boxed, always}
    outside = membrane.retrieve({**q, "valid_at": "2023-01-01T00:00:00Z"})
    assert ids(outside) == [always]


def test_no_query_ranks_by_current_salience(membrane: Membrane, clock: FakeClock) -> None:
    older = membrane.capture(ev("s", "first"))
    clock.advance(hours=3)
    newer = membrane.capture(ev("s", "second"))
    got = membrane.retrieve({"scopes": ["s"]})
    assert ids(got) == [newer.record_ids[0], older.record_ids[0]]
    assert got.records[1].salience == pytest.approx(0.125)  # three episodic half-lives
    assert got.diagnostics.arms.salience == 2
    floor = membrane.retrieve({"scopes": ["s"], "min_salience": 0.5})
    assert ids(floor) == [newer.record_ids[0]]


def test_tags_filter_and_type_filter(membrane: Membrane) -> None:
    tagged = membrane.capture(ev("s", "alpha note", tags=["ops"]))
    plain = membrane.capture(ev("s", "alpha memo"))
    got = membrane.retrieve({"query": "alpha", "scopes": ["s"], "tags": ["ops"]})
    assert ids(got) == [tagged.record_ids[0]]
    both = membrane.retrieve({"query": "alpha", "scopes": ["s"]})
    assert set(ids(both)) == {tagged.record_ids[0], plain.record_ids[0]}


def test_row_cap_and_diagnostics(membrane: Membrane) -> None:
    membrane.capture_many([ev("s", f"delta item {i}") for i in range(12)])
    got = membrane.retrieve({"query": "delta", "scopes": ["s"], "limit": 4})
    assert len(got.records) == 4
    d = got.diagnostics
    assert d.row_limit_applied is True and d.byte_limit_applied is False
    assert d.candidates == 12 and d.returned == 4 and d.fusion in ("rrf", "zsum")
    assert d.bytes == sum(len(r.model_dump_json()) for r in got.records)
    assert [r.score for r in got.records] == sorted((r.score for r in got.records), reverse=True)


def test_byte_budget_never_returns_a_partial_over_budget(membrane: Membrane) -> None:
    membrane.capture_many([ev("s", f"omega {i} " + "w" * 1500) for i in range(6)])
    got = membrane.retrieve({"query": "omega", "scopes": ["s"], "max_bytes": 5000})
    assert 1 <= len(got.records) < 6
    assert got.diagnostics.byte_limit_applied is True
    assert got.diagnostics.bytes <= 5000
    with pytest.raises(errors.RecordTooLarge):
        membrane.retrieve({"query": "omega", "scopes": ["s"], "max_bytes": 1024})


def _within(at: datetime | None, window: tuple[datetime, datetime]) -> bool:
    return at is not None and window[0] <= at < window[1]


@pytest.mark.parametrize("method", fusion.METHODS)
def test_fusion_in_sql_matches_the_reference(hashing: Membrane, clock: FakeClock, method: str) -> None:
    """RFC 8.2: the statement's fused scores and order are those of membrane_core.retrieval.fusion."""
    texts = [
        "Ada Lovelace wrote notes on the analytical engine",
        "the engine needed cards",
        "notes about cards and looms",
        "Ada met Babbage at a party",
        "weather was cold",
        "looms weave patterns",
    ]
    for i in range(18):
        hashing.capture(
            {
                "source_kind": "event",
                "scope": "s",
                "content": {
                    "text": f"{texts[i % 6]} {i}",
                    "entities": ["Ada Lovelace"] if i % 4 == 0 else [],
                },
            }
        )
        clock.advance(seconds=3600 * i)
    # a fact among the episodes: its score carries the semantic prior (RFC 8.2)
    hashing.capture(
        {
            "source_kind": "observation",
            "scope": "s",
            "content": {"subject": "Ada Lovelace", "predicate": "wrote_about", "object": "the engine"},
        }
    )
    assert hashing.embedding.run_batch()["embedded"] >= 18
    query = "what did Ada Lovelace write about the engine and cards"
    req = RetrieveRequest(query=query, scopes=["s"])
    r = hashing.retriever
    policy = DEVELOPMENT_POLICY.narrow(req.scopes, None)
    f = retriever.read_filter(req, policy, clock())
    qvec = r.embedder.embed([query])[0]  # type: ignore[union-attr]
    with r.db.reader() as conn:
        # a window of time the query names (RFC 8.2.2): a day holding some of the episodes
        (day,) = conn.execute(
            "SELECT occurred_at FROM memory_records WHERE type = 'episodic'"
            " ORDER BY occurred_at OFFSET 12 LIMIT 1"
        ).fetchone()
        window = (day, day + timedelta(days=1))
        retrieval.configure_scan(conn, ef_search=40, max_scan_tuples=20_000)
        found = retrieval.roots(
            conn,
            retrieval.RootsQuery(
                filter=f,
                query=query,
                qvec=qvec,
                terms=retriever.query_terms(query),
                arm_k=50,
                vec_k=50,
                fanout=25,
                limit=400,
                max_bytes=1 << 24,
                rrf=method == "rrf",
                weights=fusion.DEFAULT_WEIGHTS,
                rrf_k=fusion.RRF_K,
                sd_floor_salience=fusion.SD_FLOOR["salience"],
                target_visible=lambda scope, sens: True,
                semantic_prior=fusion.SEMANTIC_PRIOR,
                when=[window],
                when_prior=fusion.WHEN_PRIOR,
            ),
        )
    ranked = found.ranked
    # every arm contributed, and every candidate came back hydrated (limit and budget are wide)
    assert found.arms["vector"] > 0 and found.arms["text"] > 0 and found.arms["entity"] > 0
    assert len(ranked) == found.candidates > 10 and all(x.record is not None for x in ranked)
    recs = {x.ord: x.record for x in ranked}
    assert any(recs[x.ord].row["type"] == "semantic" for x in ranked)  # type: ignore[union-attr]
    inside = [_within(recs[x.ord].row["occurred_at"], window) for x in ranked]  # type: ignore[union-attr]
    assert any(inside) and not all(inside)
    expected = fusion.fuse(
        [
            fusion.Features(
                recs[x.ord].id,
                vector=x.vector_score,  # type: ignore[union-attr]
                text=x.text_score,
                entity=x.entity_score,
                salience=x.salience,
                semantic=recs[x.ord].row["type"] == "semantic",  # type: ignore[union-attr]
                in_when=_within(recs[x.ord].row["occurred_at"], window),  # type: ignore[union-attr]
            )
            for x in ranked
        ],
        method,
    )
    for x in ranked:
        assert x.score == pytest.approx(expected[recs[x.ord].id], rel=1e-9, abs=1e-12)  # type: ignore[union-attr]
    order = sorted(
        ranked,
        key=lambda x: (
            x.status != "active",
            -expected[recs[x.ord].id],  # type: ignore[union-attr]
            -x.salience,
            -recs[x.ord].row["created_at"].timestamp(),  # type: ignore[union-attr]
            str(recs[x.ord].id),
        ),
    )  # type: ignore[union-attr]
    assert [x.ord for x in order] == sorted(x.ord for x in ranked)
    assert len({round(x.score, 9) for x in ranked}) > len(ranked) // 2  # the scores differ


BRUTE_SALIENCE = """
SELECT r.id FROM memory_records r
 WHERE r.scope = ANY(%(scopes)s) AND r.status <> 'retracted'
   AND (%(types)s::text[] IS NULL OR r.type = ANY(%(types)s))
   AND current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                        r.pinned, %(now)s) >= %(floor)s
 ORDER BY current_salience(r.base_salience, r.reinforced_at, r.half_life_seconds, r.min_salience,
                           r.pinned, %(now)s) DESC, r.created_at DESC, r.id
 LIMIT %(k)s
"""


def test_salience_arm_in_index_order_is_exact(
    membrane: Membrane, database_url: str, clock: FakeClock
) -> None:
    """RFC 8.1.4: without a query, the records of highest current salience, read through
    the decay-key, floor and pinned indexes, are exactly those a full computation finds:
    mixed half-lives, floors that dominate, pinned records, reinforcement in the future,
    ties, filters."""
    rng = random.Random(7)
    made = [membrane.capture(ev(rng.choice(["a", "b"]), f"note {i}")).record_ids[0] for i in range(160)]
    now = clock.now
    with psycopg.connect(database_url) as conn:
        for i, rid in enumerate(made):
            kind = i % 8
            conn.execute(
                "UPDATE memory_records SET base_salience = %s, reinforced_at = %s,"
                " half_life_seconds = %s, min_salience = %s, pinned = %s, status = %s"
                " WHERE id = %s",
                (
                    0.0 if kind == 7 else round(rng.random(), 2 if kind == 6 else 6),
                    now + timedelta(hours=rng.choice([1, 30]))
                    if kind == 5
                    else now - timedelta(hours=rng.uniform(0, 400)),
                    rng.choice([3600, 86400, 30 * 86400]),
                    rng.choice([0.0, 0.0, 0.5, 0.9]) if kind in (1, 2) else 0.0,
                    kind == 3,
                    "retracted" if i % 23 == 0 else "active",
                    rid,
                ),
            )
        conn.commit()
    # a scope decayed to its floors: 60 records tie at 0.2, more than the arm's window
    floored = []
    for i in range(60):
        floored.append(membrane.capture(ev("c", f"old {i}")).record_ids[0])
        clock.advance(seconds=1 + i % 3)
    clock.now = now
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE memory_records SET min_salience = 0.2, half_life_seconds = 3600,"
            " reinforced_at = %s WHERE id = ANY(%s)",
            (now - timedelta(days=30), floored),
        )
        conn.commit()
    cases = [
        ({"scopes": ["a"], "limit": 10}, None, 0.0),
        ({"scopes": ["a", "b"], "limit": 25}, None, 0.0),
        ({"scopes": ["b"], "limit": 5, "min_salience": 0.3}, None, 0.3),
        ({"scopes": ["c"], "limit": 10}, None, 0.0),
    ]
    for hours in (0, 5, 200, 5000):
        at = now + timedelta(hours=hours)
        clock.now = at
        for body, types, floor in cases:
            got = membrane.retrieve(body)
            with psycopg.connect(database_url) as conn:
                want = [
                    row[0]
                    for row in conn.execute(
                        BRUTE_SALIENCE,
                        {
                            "scopes": body["scopes"],
                            "types": types,
                            "now": at,
                            "floor": floor,
                            "k": body["limit"],
                        },
                    ).fetchall()
                ]
            assert len(want) == body["limit"]  # positive control: enough records qualify
            assert ids(got) == want, (hours, body)
            # the arm's whole window, not only the top of it: every candidate it may hold
            with psycopg.connect(database_url) as conn:
                window = conn.execute(
                    BRUTE_SALIENCE,
                    {
                        "scopes": body["scopes"],
                        "types": types,
                        "now": at,
                        "floor": floor,
                        "k": retriever.arm_window(body["limit"]),
                    },
                ).fetchall()
            assert got.diagnostics.candidates == len(window), (hours, body)
    clock.now = now


def test_retrieved_views_equal_views_by_id(membrane: Membrane) -> None:
    # RFC 8.3: retrieval builds each view from its hydrated row, without a full record; the
    # view must be the one a read by id builds from the validated record: payload,
    # provenance (timestamps), validity, tags, metadata, relations, status, redaction
    got_ids = []
    got_ids += membrane.capture(
        {
            **ev("v", "deploy alpha started on host nine"),
            "tags": ["ops", "b"],
            "summary": "deploy alpha",
            "metadata": {"n": 1.5, "k": [1, "x"]},
            "occurred_at": "2026-01-02T03:04:05.123456+00:00",
        }
    ).record_ids
    got_ids += membrane.capture(obs("v", "alpha", "runs on", "host nine")).record_ids
    got_ids += membrane.capture(
        {"source_kind": "tool_output", "scope": "v", "content": {"tool": "grep", "output": "alpha found"}}
    ).record_ids
    got_ids += membrane.capture(
        {
            "source_kind": "working_state",
            "scope": "v",
            "content": {"thread_id": "t1", "task_state": "planning", "context_summary": "alpha deploy"},
        }
    ).record_ids
    got_ids += membrane.capture({**ev("v", "alpha secret rotation"), "sensitivity": "medium"}).record_ids
    fact = next(r for r in got_ids if membrane.get(r).type.value == "semantic")
    fork = membrane.revisions.fork(
        fact,
        {
            "record": {"object": "host ten"},
            "condition": "region = eu",
            "rationale": "eu differs",
            "evidence": EVIDENCE,
        },
        TrustPolicy(actor="ops"),
    )
    new = membrane.revisions.supersede(
        fact,
        {
            "record": {
                "object": "host eleven",
                "provenance": [
                    {"kind": "artifact", "ref": "doc://1", "timestamp": "2026-02-03T04:05:06.5+00:00"}
                ],
            },
            "rationale": "moved",
        },
        TrustPolicy(),
    )
    low = TrustPolicy(read_scopes=frozenset({"v"}), max_sensitivity=Sensitivity.LOW)
    for trust in (TrustPolicy(), low):
        for body in (
            {"scopes": ["v"], "include_retracted": True, "limit": 50},
            {"query": "alpha host", "scopes": ["v"], "include_retracted": True, "limit": 50},
            {
                "query": "host eleven",
                "scopes": ["v"],
                "include_retracted": True,
                "memory_types": ["semantic"],
                "limit": 1,
                "expand": {"hops": 2},
            },
        ):
            res = membrane.retrieve(body, trust)
            seen = {v.id: v for v in res.records + res.neighbors}
            # positive controls: the fork (conditional validity), the successor (provenance
            # with a timestamp), the retracted original and the redacted medium record
            assert {fork, new, fact} <= set(seen)
            assert seen[new].provenance and seen[fork].validity is not None
            if "expand" in body:  # the original and the fork are neighbours: views from hop rows
                assert [v.id for v in res.records] == [new]
                assert {fact, fork} <= {v.id for v in res.neighbors}
            else:
                assert any(v.redacted for v in seen.values()) == (trust is low)
            for rid, v in seen.items():
                by_id = membrane.get(rid, trust)
                assert v.model_dump_json(exclude={"score"}) == by_id.model_dump_json(exclude={"score"}), rid


class ZeroQuery:
    """Embeds every query as the zero vector."""

    name, model, dim = "zero", "zero-1", EMBEDDING_DIM

    def embed(self, texts: list[str]) -> list[list[float]]:
        return [[0.0] * self.dim for _ in texts]


def test_a_zero_query_vector_skips_the_vector_arm(hashing: Membrane, clock: FakeClock) -> None:
    # a zero vector's cosine distance to every record is NaN: Postgres sorts NaN above every
    # number and every fused score became NaN, so the ranking was arbitrary (seen: the
    # record holding the rarest term was not first)
    hit = hashing.capture(ev("s", "the walrus migrated north in spring")).record_ids[0]
    for i in range(12):
        hashing.capture(ev("s", f"unrelated note {i} about the weather"))
    assert hashing.embedding.run_batch()["embedded"] >= 13
    zero = Retriever(hashing.db, clock=clock, embedder=ZeroQuery())  # type: ignore[arg-type]
    req = RetrieveRequest(query="walrus weather", scopes=["s"], limit=5)
    got = zero.retrieve(req, DEVELOPMENT_POLICY)
    assert got.diagnostics.vector == "degenerate_vector"
    assert got.diagnostics.arms.vector == 0 and got.diagnostics.arms.text >= 2
    assert ids(got)[0] == hit  # the rarest term's record first
    assert all(v.score is not None and v.score == v.score for v in got.records)  # no NaN
    # positive control: the same request with a real query vector uses the arm
    real = hashing.retrieve({"query": "walrus weather", "scopes": ["s"], "limit": 5})
    assert real.diagnostics.vector == "used" and ids(real)[0] == hit


def test_a_stored_zero_vector_does_not_poison_fusion(hashing: Membrane, database_url: str) -> None:
    # vectors without a direction are no longer stored (RFC 12.1), but an older store may
    # hold one: its exact distance is NaN, which made every fused score NaN
    hit = hashing.capture(ev("s", "the walrus migrated north in spring")).record_ids[0]
    odd = hashing.capture(ev("s", "walrus sightings logged by the weather station")).record_ids[0]
    for i in range(12):
        hashing.capture(ev("s", f"unrelated note {i} about the weather"))
    assert hashing.embedding.run_batch()["embedded"] >= 14
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute(
            "UPDATE record_embeddings SET embedding = array_fill(0, ARRAY[%s])::vector WHERE record_id = %s",
            (EMBEDDING_DIM, odd),
        )
    got = hashing.retrieve({"query": "walrus migrated", "scopes": ["s"], "limit": 5})
    assert got.diagnostics.vector == "used"
    assert all(v.score is not None and v.score == v.score for v in got.records)  # no NaN
    assert ids(got)[0] == hit and odd in ids(got)  # both walrus records; the zero one ranked
