"""record_embeddings is partitioned by scope: a one-scope vector search reads one partition (RFC 13.2)."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
from pgvector.psycopg import register_vector

from membrane_core.storage import retrieval
from membrane_core.storage.queries import shaped
from membrane_core.testing import FakeClock
from tests.support.roots import INTS, load_corpus, roots_params

PARTITION = re.compile(r"record_embeddings_p\d+")


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


def test_one_scope_vector_arm_scans_one_partition(database_url: str, clock: FakeClock) -> None:
    corpus = load_corpus(database_url, clock)
    with psycopg.connect(database_url, autocommit=True) as conn:
        register_vector(conn)
        conn.execute("SET hnsw.iterative_scan = relaxed_order")
        qvec = corpus.centres[0].tolist()
        # positive control: without a scope filter the arm reads every partition holding rows
        assert len(_vec_arm_partitions(conn, roots_params(None, qvec, clock))) > 1
        assert len(_vec_arm_partitions(conn, roots_params(["scope-3"], qvec, clock))) == 1
        # the statement runs prepared with its generic plan (RFC 8.1.5); the per-scope
        # lateral search prunes under it too
        got = _execute_generic(conn, roots_params(["scope-3"], qvec, clock))
        assert got == _vec_arm_partitions(conn, roots_params(["scope-3"], qvec, clock)), got
        assert len(got) == 1, got
        # two scopes in two partitions: exactly those two; every scope: more than one
        two = [
            "scope-3",
            next(
                f"scope-{i}"
                for i in range(20)
                if _vec_arm_partitions(conn, roots_params([f"scope-{i}"], qvec, clock)) != got
            ),
        ]
        assert len(_execute_generic(conn, roots_params(two, qvec, clock))) == 2
        assert len(_execute_generic(conn, roots_params(None, qvec, clock))) > 2
        # a one-scope retrieval names the scope's partition itself (RFC 13.2): the one
        # holding the scope's rows, the only one its plan reads
        part = retrieval.embeddings_relation(conn, ["scope-3"])
        held = conn.execute(
            "SELECT DISTINCT tableoid::regclass::text FROM record_embeddings WHERE scope = 'scope-3'"
        ).fetchall()
        assert held == [(part,)] and {part} == got
        assert retrieval.embeddings_relation(conn, ["scope-3", "scope-4"]) == "record_embeddings"
        assert retrieval.embeddings_relation(conn, None) == "record_embeddings"
        direct = {**roots_params(["scope-3"], qvec, clock), "embeddings": part}
        assert _execute_generic(conn, direct) == {part}
        st = shaped("retrieval_roots", direct, ints=INTS, relations=("embeddings",))
        # the vector arm and the features (the tagged branch, a part, only with a tag filter)
        assert st.sql.count(part) == 2 and " record_embeddings e" not in st.sql
        tagged = shaped(
            "retrieval_roots",
            {**direct, "has_tags": True, "tags": ["t"]},
            ints=INTS,
            relations=("embeddings",),
        )
        assert tagged.sql.count(part) == 3 and " record_embeddings e" not in tagged.sql
