"""The full-text arm for given scopes reads the index of scoped lexemes (RFC 8.1.2)."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg.rows import dict_row

from membrane_core import Membrane
from membrane_core.enums import Sensitivity
from membrane_core.storage import reads
from membrane_core.storage.queries import shaped
from membrane_core.trust import TrustPolicy
from tests.conftest import EMBEDDING_DIM, FakeClock
from tests.integration.test_partitioning import INTS, _params, load_corpus

# Two scopes whose md5 starts with the same 8 hex digits (found by search): their scoped
# lexemes are spelled alike, so only the scope filter tells their records apart.
TWINS = ("tenant-116889", "tenant-123010")


def _tag(scope: str) -> str:
    return hashlib.md5(scope.encode()).hexdigest()[:8]


def _capture(m: Membrane, scope: str, text: str) -> Any:
    return m.capture({"source_kind": "event", "scope": scope, "sensitivity": "low",
                      "content": {"text": text}}).record_ids[0]


def test_scopes_sharing_a_tag_do_not_see_each_other(membrane: Membrane, database_url: str,
                                                    clock: FakeClock) -> None:
    assert _tag(TWINS[0]) == _tag(TWINS[1])  # the premise of this test
    mine = [_capture(membrane, TWINS[0], "zephyr lantern in the north tower"),
            _capture(membrane, TWINS[0], "a zephyr lantern again")]
    theirs = _capture(membrane, TWINS[1], "zephyr lantern in the south tower")
    caller = TrustPolicy(read_scopes=frozenset({TWINS[0]}), max_sensitivity=Sensitivity.LOW,
                         actor="caller")
    res = membrane.retrieve({"query": "zephyr lantern", "limit": 10}, caller)
    ids = [r.id for r in res.records]
    assert set(mine) <= set(ids)  # positive control, found by the full-text arm
    assert res.diagnostics["arms"]["text"] == 2
    assert theirs not in ids and str(theirs) not in res.model_dump_json()
    # the fallback path (more matching rows than 2 x df_cap): candidates from the index
    # again, through the same scope filter (fts_cap leaves room for a leaked row)
    for scoped in (True, False):  # the index of scoped lexemes, and the scope lexemes
        rows = _roots(database_url, clock, TWINS[0], "zephyr lantern", scoped, df_cap=1)
        assert {r["id"] for r in rows} == set(mine) and rows[0]["n_text"] == 2, scoped


def _roots(url: str, clock: FakeClock, scope: str, query: str, scoped: bool, *,
           df_cap: int) -> list[dict[str, Any]]:
    """The roots statement for one scope, run directly with small caps (RFC 8.1.2)."""
    params = {**_params([scope], [0.0] * EMBEDDING_DIM, clock), "qvec": None, "has_qvec": False,
              "query": query, "df_cap": df_cap, "fts_cap": 10, "scoped": scoped}
    st = shaped("retrieval_roots", params, ints=INTS, relations=("embeddings",))
    assert ("scoped_lexemes(" in st.sql) is scoped
    with psycopg.connect(url) as conn:
        return psycopg.RawCursor(conn, row_factory=dict_row).execute(st.sql, st.values).fetchall()


def test_fallback_frequencies_count_only_the_scopes_asked_for(membrane: Membrane,
                                                              database_url: str,
                                                              clock: FakeClock) -> None:
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


def test_many_scopes_read_the_scope_lexemes(membrane: Membrane) -> None:
    """More than SCOPED_MAX scopes: one query per scope and word would grow with both, so the
    words are matched with the scope lexemes instead (RFC 8.1.2)."""
    scopes = [f"many-{i}" for i in range(reads.SCOPED_MAX + 1)]
    rid = _capture(membrane, scopes[-1], "a quiet harbour at dawn")
    _capture(membrane, "elsewhere", "a quiet harbour at dusk")
    res = membrane.retrieve({"query": "quiet harbour", "scopes": scopes, "limit": 5})
    assert [r.id for r in res.records] == [rid] and res.diagnostics["arms"]["text"] == 1


def test_long_words_are_left_out_of_the_scoped_lexemes(membrane: Membrane,
                                                       database_url: str) -> None:
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
    assert [r.id for r in res.records] == [kept] and res.diagnostics["arms"]["text"] == 1
    with psycopg.connect(database_url) as conn:
        got = conn.execute("SELECT tsvector_to_array(scoped_lexemes('long', search_tsv)) "
                           "FROM memory_records WHERE id = %s", (rid,)).fetchone()
        assert got is not None and sorted(got[0]) == sorted(
            f"{_tag('long')} {w}" for w in ("ordinari", "marmalad"))
        got = conn.execute("SELECT scoped_tsquery(ARRAY[%s, 'plain'], ARRAY['long'])::text",
                           (word,)).fetchone()
        assert got == (f"'{_tag('long')} plain'",)
        # why the guard: past 2,047 bytes array_to_tsvector keeps a lexeme's length modulo
        # 2,048 without an error (here 2,049 bytes became 1), a corrupt lexeme in the index
        kept = conn.execute("SELECT octet_length((tsvector_to_array(array_to_tsvector(ARRAY[%s])))[1])",
                            (f"{_tag('long')} {word}",)).fetchone()
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


def test_full_text_arm_reads_the_scoped_index_for_given_scopes(database_url: str,
                                                               clock: FakeClock) -> None:
    corpus = load_corpus(database_url, clock)
    with psycopg.connect(database_url, autocommit=True) as conn:
        register_vector(conn)
        qvec = corpus.centres[0].tolist()
        words = " ".join(corpus.topics[0][:2])

        def used(scopes: list[str] | None) -> set[str]:
            st = shaped("retrieval_roots", {**_params(scopes, qvec, clock), "query": words},
                        ints=INTS, relations=("embeddings",))
            cur = psycopg.RawCursor(conn).execute("EXPLAIN (FORMAT JSON) " + st.sql, st.values)
            plan = cur.fetchone()[0]  # type: ignore[index]
            return _indexes(plan if isinstance(plan, list) else json.loads(plan))

        one, two = used(["scope-3"]), used(["scope-3", "scope-4"])
        assert "memory_records_scoped_tsv" in one and "memory_records_tsv" not in one
        assert "memory_records_scoped_tsv" in two and "memory_records_tsv" not in two
        # a caller that reads every scope matches the record's own lexemes (their index)
        every = shaped("retrieval_roots", {**_params(None, qvec, clock), "query": words},
                       ints=INTS, relations=("embeddings",)).sql
        assert "scoped_lexemes(" not in every and "r.search_tsv @@ anyq.q" in every
        # more scopes than SCOPED_MAX: the scope lexemes, through the same index
        many = [f"scope-{i}" for i in range(reads.SCOPED_MAX + 1)]
        wide = shaped("retrieval_roots", {**_params(many, qvec, clock), "query": words},
                      ints=INTS, relations=("embeddings",)).sql
        assert "scoped_lexemes(" not in wide and "scopes_tsquery(" in wide
