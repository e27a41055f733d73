"""The full-text arm for given scopes reads the index of scoped lexemes (RFC 8.1.2)."""

from __future__ import annotations

import hashlib
import json
import math
from typing import Any

import psycopg
import pytest
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from membrane_core import Membrane
from membrane_core.enums import Sensitivity
from membrane_core.storage import retrieval
from membrane_core.storage.queries import shaped
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy
from tests.support.roots import INTS, load_corpus, roots_params
from tests.support.services import EMBEDDING_DIM

# Two scopes whose md5 starts with the same 8 hex digits: their scoped
# lexemes are spelled alike, so only the scope filter tells their records apart.
TWINS = ("tenant-116889", "tenant-123010")


@pytest.fixture(autouse=True)
def _full_text_alone(membrane: Membrane) -> None:
    """The full-text arm's candidates as they are: no adjacent episodes (RFC 8.2.1)."""
    membrane.retriever.adjacent = False


def _tag(scope: str) -> str:
    return hashlib.md5(scope.encode()).hexdigest()[:8]


def _capture(m: Membrane, scope: str, text: str) -> Any:
    return m.capture(
        {"source_kind": "event", "scope": scope, "sensitivity": "low", "content": {"text": text}}
    ).record_ids[0]


def test_scopes_sharing_a_tag_do_not_see_each_other(
    membrane: Membrane, database_url: str, clock: FakeClock
) -> None:
    assert _tag(TWINS[0]) == _tag(TWINS[1])  # the premise of this test
    mine = [
        _capture(membrane, TWINS[0], "zephyr lantern in the north tower"),
        _capture(membrane, TWINS[0], "a zephyr lantern again"),
    ]
    theirs = _capture(membrane, TWINS[1], "zephyr lantern in the south tower")
    caller = TrustPolicy(read_scopes=frozenset({TWINS[0]}), max_sensitivity=Sensitivity.LOW, actor="caller")
    res = membrane.retrieve({"query": "zephyr lantern", "limit": 10}, caller)
    ids = [r.id for r in res.records]
    assert set(mine) <= set(ids)  # positive control, found by the full-text arm
    assert res.diagnostics.arms.text == 2
    assert theirs not in ids and str(theirs) not in res.model_dump_json()
    # the fallback path (more matching rows than 2 x df_cap): candidates from the index
    # again, through the same scope filter (fts_cap leaves room for a leaked row)
    for scoped in (True, False):  # the index of scoped lexemes, and the scope lexemes
        rows = _roots(database_url, clock, TWINS[0], "zephyr lantern", scoped, df_cap=1)
        assert {r["id"] for r in rows} == set(mine) and rows[0]["n_text"] == 2, scoped


def _roots(
    url: str,
    clock: FakeClock,
    scope: str,
    query: str,
    scoped: bool,
    *,
    df_cap: int,
    max_rank: int = 4,
    arm_k: int = 50,
    setting: str | None = None,
) -> list[dict[str, Any]]:
    """The roots statement for one scope, run directly with small caps (RFC 8.1.2);
    ``setting``: a planner setting for the session, as ``enable_hashagg = off``."""
    params = {
        **roots_params([scope], [0.0] * EMBEDDING_DIM, clock),
        "qvec": None,
        "has_qvec": False,
        "query": query,
        "df_cap": df_cap,
        "fts_cap": 10,
        "scoped": scoped,
        "max_rank": max_rank,
        "arm_k": arm_k,
    }
    st = shaped("retrieval_roots", params, ints=INTS, relations=("embeddings",))
    assert ("scoped_lexemes(" in st.sql) is scoped
    with psycopg.connect(url) as conn:
        if setting is not None:
            conn.execute(f"SET {setting}")  # a constant of this file's tests
        return psycopg.RawCursor(conn, row_factory=dict_row).execute(st.sql, st.values).fetchall()


def test_fallback_frequencies_count_only_the_scopes_asked_for(
    membrane: Membrane, database_url: str, clock: FakeClock
) -> None:
    """Document frequencies counted on the fallback path see one scope of two sharing a tag:
    'quasar' is rare in mine (one record) and common in theirs; counted with theirs it
    would reach the cap, and every word would become a candidate word."""
    beacons = [_capture(membrane, TWINS[0], f"beacon number {i}") for i in range(3)]
    wanted = _capture(membrane, TWINS[0], "quasar beacon")
    for i in range(3):
        _capture(membrane, TWINS[1], f"quasar far away {i}")
    for scoped in (True, False):
        rows = _roots(database_url, clock, TWINS[0], "quasar beacon", scoped, df_cap=2)
        # only the informative word (quasar, frequency 1 under the cap of 2) proposes
        # candidates; beacon (4, capped) does not
        assert [r["id"] for r in rows] == [wanted] and rows[0]["n_text"] == 1, scoped
        assert not set(beacons) & {r["id"] for r in rows}


def test_text_scores_are_bm25_over_what_the_caller_may_see(
    membrane: Membrane, database_url: str, clock: FakeClock
) -> None:
    """RFC 8.1.2: on the path where every matching row was seen, a root's text score is BM25
    (term frequency 1, k1 = 1.2, b = 0.1) with document frequencies counted over what the
    caller may see. A retracted fact, a record two levels above the caller's sensitivity and
    one in another scope hold the query's words and count for nothing; a record one level
    above (shown redacted) counts. Under a cap of 4 only 'orbit' is informative, so records
    holding only the common words are no candidates, yet those words still score the rest."""
    scope, words = "bm25", ("comet", "nebula", "orbit")
    common = [
        _capture(membrane, scope, "comet only here tonight"),
        _capture(membrane, scope, "comet nebula"),
        _capture(membrane, scope, "nebula far away from the comet"),
    ]
    _capture(membrane, scope, "comet nebula orbit")
    membrane.capture(
        {"source_kind": "event", "scope": scope, "sensitivity": "medium", "content": {"text": "orbit decay"}}
    )
    hidden = membrane.capture(
        {
            "source_kind": "event",
            "scope": scope,
            "sensitivity": "high",
            "content": {"text": "nebula orbit comet"},
        }
    ).record_ids[0]
    fact = membrane.capture(
        {
            "source_kind": "observation",
            "scope": scope,
            "content": {"subject": "nebula", "predicate": "has", "object": "orbit comet"},
        }
    ).record_ids[1]
    membrane.revisions.retract(fact, {"rationale": "wrong"}, DEVELOPMENT_POLICY)
    elsewhere = _capture(membrane, "bm25-other", "nebula orbit comet")
    df_cap, max_rank = 4, 1  # the caller reads low; medium comes back redacted
    with psycopg.connect(database_url) as conn:
        stored = conn.execute(
            "SELECT id, sensitivity_rank, status, tsvector_to_array(search_tsv), "
            "length(search_tsv) - 1 FROM memory_records WHERE scope = %s",
            [scope],
        ).fetchall()
        reltuples = conn.execute(
            "SELECT reltuples FROM pg_class WHERE oid = 'memory_records'::regclass"
        ).fetchone()[0]  # type: ignore[index]
    # what the statement sees: the caller's scope, at most one level above its sensitivity
    seen = [
        (rid, status, set(lex) & set(words), dl)
        for rid, rank, status, lex, dl in stored
        if rank <= max_rank + 1 and set(lex) & set(words)
    ]
    assert len(seen) < 2 * df_cap  # the premise: the path where every matching row is seen
    df = {w: sum(1 for _, status, held, _ in seen if w in held and status != "retracted") for w in words}
    # the observation's episode holds all three words; hidden and retracted count for nothing
    assert df == {"comet": 5, "nebula": 4, "orbit": 3}
    # a frequency counts up to the cap (comet: 4); the corpus is at least twice the cap
    n = max(2.0 * df_cap, reltuples)
    idf = {w: math.log(1.0 + (n - min(d, df_cap) + 0.5) / (min(d, df_cap) + 0.5)) for w, d in df.items()}
    # candidates: the rows passing the filters (not retracted) that hold an informative word
    cands = [(rid, held, dl) for rid, status, held, dl in seen if status != "retracted" and "orbit" in held]
    avgdl = sum(dl for _, _, dl in cands) / len(cands)
    want = {
        rid: sum(idf[w] for w in held) * 2.2 / (1.0 + 1.2 * (0.9 + 0.1 * dl / max(avgdl, 1.0)))
        for rid, held, dl in cands
    }
    assert len(want) == 3  # "comet nebula orbit", the redacted record, the observation's episode
    for scoped in (True, False):
        rows = _roots(database_url, clock, scope, " ".join(words), scoped, df_cap=df_cap, max_rank=max_rank)
        got = {r["id"]: r["text_score"] for r in rows if r["text_score"] is not None}
        assert set(got) == set(want), scoped  # every positive control is here
        for rid, score in want.items():
            assert got[rid] == pytest.approx(score, rel=1e-9), scoped
        assert not {hidden, fact, elsewhere, *common} & {r["id"] for r in rows}
        assert rows[0]["n_text"] == 3


def test_equal_text_scores_tie_whatever_the_plan(
    membrane: Membrane, database_url: str, clock: FakeClock
) -> None:
    """RFC 8.1.2: rows holding the same query words with the same length score the same to
    the last bit however the plan adds their words' idf (hashed or sorted grouping), so the
    arm's cut among them falls by id and is the same under either plan (idf is on its grid,
    so sorted grouping cannot pick other roots)."""
    words = ["comet", "nebula", "orbit", "pulsar", "quasar"]
    tied = [_capture(membrane, "ties", " ".join(words) + f" filler{i}") for i in range(25)]
    for w, k in zip(words, (1, 3, 7, 13, 17), strict=True):  # five different frequencies
        for j in range(k):
            _capture(membrane, "ties", f"{w} extra{j} more{j}")
    runs = [
        _roots(database_url, clock, "ties", " ".join(words), True, df_cap=1000, arm_k=2, setting=setting)
        for setting in (None, "enable_hashagg = off", "enable_hashjoin = off")
    ]
    for rows in runs:
        scores = {r["id"]: r["text_score"] for r in rows}
        assert len(rows) == 2 and set(scores) <= set(tied)  # two of the tied rows are the roots
        assert len(set(scores.values())) == 1
        assert [r["id"] for r in rows] == [r["id"] for r in runs[0]]
    assert [r["id"] for r in runs[0]] == sorted(tied)[:2]  # the tie falls by id


def test_many_scopes_read_the_scope_lexemes(membrane: Membrane) -> None:
    """More than SCOPED_MAX scopes: one query per scope and word would grow with both, so the
    words are matched with the scope lexemes instead (RFC 8.1.2)."""
    scopes = [f"many-{i}" for i in range(retrieval.SCOPED_MAX + 1)]
    rid = _capture(membrane, scopes[-1], "a quiet harbour at dawn")
    _capture(membrane, "elsewhere", "a quiet harbour at dusk")
    res = membrane.retrieve({"query": "quiet harbour", "scopes": scopes, "limit": 5})
    assert [r.id for r in res.records] == [rid] and res.diagnostics.arms.text == 1


def test_long_words_are_left_out_of_the_scoped_lexemes(membrane: Membrane, database_url: str) -> None:
    """A lexeme of over 2,037 bytes is not in the index of scoped lexemes nor in its queries
    (with the tag it would pass Postgres' limits): a capture or a query holding one works
    and its other words are found; a word of 2,037 bytes is found itself."""
    word, longest = "q" * 2040, "z" * 2037
    rid = _capture(membrane, "long", f"{word} ordinary marmalade")
    kept = _capture(membrane, "long", f"{longest} plain")
    for query in ("marmalade", f"{word} marmalade"):
        res = membrane.retrieve({"query": query, "scopes": ["long"], "limit": 5})
        assert [r.id for r in res.records] == [rid], query
    res = membrane.retrieve({"query": longest, "scopes": ["long"], "limit": 5})
    assert [r.id for r in res.records] == [kept] and res.diagnostics.arms.text == 1
    with psycopg.connect(database_url) as conn:
        got = conn.execute(
            "SELECT tsvector_to_array(scoped_lexemes('long', search_tsv)) FROM memory_records WHERE id = %s",
            (rid,),
        ).fetchone()
        assert got is not None and sorted(got[0]) == sorted(
            f"{_tag('long')} {w}" for w in ("ordinari", "marmalad")
        )
        got = conn.execute(
            "SELECT scoped_tsquery(ARRAY[%s, 'plain'], ARRAY['long'])::text", (word,)
        ).fetchone()
        assert got == (f"'{_tag('long')} plain'",)
        # why the guard: past 2,047 bytes array_to_tsvector keeps a lexeme's length modulo
        # 2,048 without an error (here 2,049 bytes became 1), a corrupt lexeme in the index
        kept = conn.execute(
            "SELECT octet_length((tsvector_to_array(array_to_tsvector(ARRAY[%s])))[1])",
            (f"{_tag('long')} {word}",),
        ).fetchone()
        assert kept == (1,)


def _indexes(plan: Any) -> set[str]:
    out: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        if node.get("Index Name"):
            out.add(node["Index Name"])
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return out


def test_full_text_arm_reads_the_scoped_index_for_given_scopes(database_url: str, clock: FakeClock) -> None:
    corpus = load_corpus(database_url, clock)
    with psycopg.connect(database_url, autocommit=True) as conn:
        register_vector(conn)
        qvec = corpus.centres[0].tolist()
        words = " ".join(corpus.topics[0][:2])

        def used(scopes: list[str] | None) -> set[str]:
            st = shaped(
                "retrieval_roots",
                {**roots_params(scopes, qvec, clock), "query": words},
                ints=INTS,
                relations=("embeddings",),
            )
            cur = psycopg.RawCursor(conn).execute("EXPLAIN (FORMAT JSON) " + st.sql, st.values)
            plan = cur.fetchone()[0]  # type: ignore[index]
            return _indexes(plan if isinstance(plan, list) else json.loads(plan))

        one, two = used(["scope-3"]), used(["scope-3", "scope-4"])
        assert "memory_records_scoped_tsv" in one and "memory_records_tsv" not in one
        assert "memory_records_scoped_tsv" in two and "memory_records_tsv" not in two
        # a caller that reads every scope matches the record's own lexemes (their index)
        every = shaped(
            "retrieval_roots",
            {**roots_params(None, qvec, clock), "query": words},
            ints=INTS,
            relations=("embeddings",),
        ).sql
        assert "scoped_lexemes(" not in every and "r.search_tsv @@ anyq.q" in every
        # more scopes than SCOPED_MAX: the scope lexemes, through the same index
        many = [f"scope-{i}" for i in range(retrieval.SCOPED_MAX + 1)]
        wide = shaped(
            "retrieval_roots",
            {**roots_params(many, qvec, clock), "query": words},
            ints=INTS,
            relations=("embeddings",),
        ).sql
        assert "scoped_lexemes(" not in wide and "scopes_tsquery(" in wide
