"""record_embeddings is partitioned by scope: a one-scope vector search reads one partition (RFC 13.2)."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector

from membrane_cli.bench import load as benchload
from membrane_cli.bench import retrieve as bench
from membrane_core.storage import reads
from membrane_core.storage.queries import shaped
from tests.conftest import EMBEDDING_DIM, FakeClock

PARTITION = re.compile(r"record_embeddings_p\d+")


def _params(scopes: list[str] | None, qvec: list[float], clock: FakeClock) -> dict[str, Any]:
    return {
        "all_scopes": scopes is None, "scopes": scopes or [], "max_rank": 4, "types": None,
        "tags": None, "include_retracted": False, "include_contested": False,
        "min_salience": 0.0, "salience_floor": False, "now": clock.now, "as_of": None,
        "valid_at": None, "has_query": True, "has_qvec": True,
        "query": "to be or not", "qvec": Vector(qvec), "terms": [], "id_namespaces": [],
        "id_values": [], "arm_k": 50, "vec_k": 50, "fanout": 8, "df_cap": 1000, "fts_cap": 5000,
        "tag_cap": 2000, "link_scan": 1000, "limit": 10, "max_bytes": 65536, "rrf": False, "rrf_k": 60.0,
        "sd_floor_salience": 0.1, "w_vector": 1.0, "w_text": 1.0, "w_entity": 1.0,
        "w_salience": 0.25, "embeddings": "record_embeddings", "has_tags": False, "hop": False,
        "scoped": scopes is not None and 1 <= len(scopes) <= reads.SCOPED_MAX,
        "hop_rows": 0, "hop_edges": 0,
        "hop_new": 0,
    }


def _scanned(plan: Any) -> set[str]:
    """Partitions of record_embeddings that the (executed) plan actually scanned."""
    out: set[str] = set()

    def walk(node: dict[str, Any]) -> None:
        rel = node.get("Relation Name") or ""
        if PARTITION.fullmatch(rel) and node.get("Actual Loops", 1) > 0:
            out.add(rel)
        for child in node.get("Plans", []):
            walk(child)

    walk(plan[0]["Plan"])
    return out


INTS = ("max_rank", "arm_k", "vec_k", "fanout", "df_cap", "fts_cap", "tag_cap", "link_scan",
        "hop_rows")


def _vec_arm_partitions(conn: psycopg.Connection, params: dict[str, Any]) -> set[str]:
    st = shaped("retrieval_roots", params, ints=INTS, relations=("embeddings",))
    cur = psycopg.RawCursor(conn).execute("EXPLAIN (ANALYZE, FORMAT JSON) " + st.sql, st.values)
    plan = cur.fetchone()[0]  # type: ignore[index]
    return _scanned(plan if isinstance(plan, list) else json.loads(plan))


def _execute_generic(conn: psycopg.Connection, params: dict[str, Any]) -> set[str]:
    """Partitions scanned by the prepared statement of this shape under its generic plan."""
    st = shaped("retrieval_roots", params, ints=INTS, relations=("embeddings",))
    conn.execute("DEALLOCATE ALL")
    conn.execute("PREPARE pool AS " + st.sql)
    args = psycopg.ClientCursor(conn).mogrify(", ".join(["%s"] * len(st.values)), st.values)
    conn.execute("SET plan_cache_mode = force_generic_plan")
    try:
        plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE pool({args})")
        return _scanned(plan.fetchone()[0])  # type: ignore[index]
    finally:
        conn.execute("RESET plan_cache_mode")


def load_corpus(database_url: str, clock: FakeClock) -> bench.Corpus:
    """2,000 synthetic records over 20 scopes (the benchmark's generator), analysed."""
    corpus = bench.Corpus(dim=EMBEDDING_DIM, clusters=4, scopes=20, seed=5)
    for chunk in bench._chunks(corpus, 2_000, 2_000, clock.now):
        benchload.copy_chunk(database_url, records=chunk["records"], payloads=chunk["payloads"],
                             embeddings=chunk["embeddings"], relations=chunk["relations"],
                             entity_terms=chunk["terms"])
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    return corpus


def test_one_scope_vector_arm_scans_one_partition(database_url: str, clock: FakeClock) -> None:
    corpus = load_corpus(database_url, clock)
    with psycopg.connect(database_url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        qvec = corpus.centres[0].tolist()
        # positive control: without a scope filter the arm reads every partition holding rows
        assert len(_vec_arm_partitions(conn, _params(None, qvec, clock))) > 1
        assert len(_vec_arm_partitions(conn, _params(["scope-3"], qvec, clock))) == 1
        # the statement runs prepared with its generic plan (RFC 8.1.5); the per-scope
        # lateral search prunes under it too
        got = _execute_generic(conn, _params(["scope-3"], qvec, clock))
        assert got == _vec_arm_partitions(conn, _params(["scope-3"], qvec, clock)), got
        assert len(got) == 1, got
        # two scopes in two partitions: exactly those two; every scope: more than one
        two = ["scope-3", next(f"scope-{i}" for i in range(20)
                               if _vec_arm_partitions(conn, _params([f"scope-{i}"], qvec, clock))
                               != got)]
        assert len(_execute_generic(conn, _params(two, qvec, clock))) == 2
        assert len(_execute_generic(conn, _params(None, qvec, clock))) > 2
        # a one-scope retrieval names the scope's partition itself (RFC 13.2): the one
        # holding the scope's rows, the only one its plan reads
        part = reads.embeddings_relation(conn, ["scope-3"])
        held = conn.execute("SELECT DISTINCT tableoid::regclass::text FROM record_embeddings "
                            "WHERE scope = 'scope-3'").fetchall()
        assert held == [(part,)] and {part} == got
        assert reads.embeddings_relation(conn, ["scope-3", "scope-4"]) == "record_embeddings"
        assert reads.embeddings_relation(conn, None) == "record_embeddings"
        direct = {**_params(["scope-3"], qvec, clock), "embeddings": part}
        assert _execute_generic(conn, direct) == {part}
        st = shaped("retrieval_roots", direct, ints=INTS, relations=("embeddings",))
        # the vector arm and the features (the tagged branch, a part, only with a tag filter)
        assert st.sql.count(part) == 2 and " record_embeddings e" not in st.sql
        tagged = shaped("retrieval_roots", {**direct, "has_tags": True, "tags": ["t"]}, ints=INTS,
                        relations=("embeddings",))
        assert tagged.sql.count(part) == 3 and " record_embeddings e" not in tagged.sql
