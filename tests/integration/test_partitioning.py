"""record_embeddings is partitioned by scope: a one-scope vector search reads one partition (RFC 13.2)."""

from __future__ import annotations

import json
import re
from typing import Any

import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector

from membrane_cli.bench import retrieve as bench
from membrane_core.storage import benchload
from membrane_core.storage.queries import q
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
        "tag_cap": 2000,
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


def _vec_arm_partitions(conn: psycopg.Connection, params: dict[str, Any]) -> set[str]:
    cur = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + q("retrieval_pool"), params)
    plan = cur.fetchone()[0]  # type: ignore[index]
    return _scanned(plan if isinstance(plan, list) else json.loads(plan))


def test_one_scope_vector_arm_scans_one_partition(database_url: str, clock: FakeClock) -> None:
    corpus = bench.Corpus(dim=EMBEDDING_DIM, clusters=4, scopes=20, seed=5)
    for chunk in bench._chunks(corpus, 2_000, 2_000, clock.now):
        benchload.copy_chunk(database_url, records=chunk["records"], payloads=chunk["payloads"],
                             embeddings=chunk["embeddings"], relations=chunk["relations"],
                             entity_terms=chunk["terms"])
    with psycopg.connect(database_url) as conn:
        register_vector(conn)
        conn.execute("ANALYZE")
        conn.execute(q("retrieval_scan_settings"), {"ef_search": 50, "max_scan_tuples": 20_000})
        qvec = corpus.centres[0].tolist()
        # positive control: without a scope filter the arm reads every partition holding rows
        assert len(_vec_arm_partitions(conn, _params(None, qvec, clock))) > 1
        assert len(_vec_arm_partitions(conn, _params(["scope-3"], qvec, clock))) == 1
        # the retrieval query runs prepared (psycopg prepares after 5 executions) and Postgres
        # may then keep a generic plan; the per-scope lateral search prunes under it too
        params = _params(["scope-3"], qvec, clock)
        conn.execute(q("retrieval_pool"), params, prepare=True)
        name = conn.execute("SELECT name FROM pg_prepared_statements"
                            " WHERE statement LIKE '%%qlex%%'").fetchone()[0]  # type: ignore[index]
        names = list(dict.fromkeys(re.findall(r"%\((\w+)\)s", q("retrieval_pool"))))
        args = psycopg.ClientCursor(conn).mogrify(", ".join(f"%({n})s" for n in names), params)
        conn.execute("SET plan_cache_mode = force_generic_plan")
        plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}({args})")
        got = _scanned(plan.fetchone()[0])  # type: ignore[index]
        assert got == _vec_arm_partitions(conn, params) and len(got) == 1, got
        # two scopes in two partitions: exactly those two
        two = ["scope-3", next(f"scope-{i}" for i in range(20)
                               if _vec_arm_partitions(conn, _params([f"scope-{i}"], qvec, clock))
                               != got)]
        plan = conn.execute(f"EXPLAIN (ANALYZE, FORMAT JSON) EXECUTE {name}("
                            + psycopg.ClientCursor(conn).mogrify(
                                ", ".join(f"%({n})s" for n in names), _params(two, qvec, clock))
                            + ")")
        assert len(_scanned(plan.fetchone()[0])) == 2  # type: ignore[index]
