"""The ``retrieval_roots`` statement run directly: its parameters and a corpus to run it on."""

from __future__ import annotations

from typing import Any

import psycopg
from pgvector import Vector

from membrane_cli.bench import load as benchload
from membrane_cli.bench import retrieve as bench
from membrane_core.storage import retrieval
from membrane_core.testing import FakeClock
from tests.support.services import EMBEDDING_DIM

#: The parameters of ``retrieval_roots`` written into its text as integers.
INTS = ("max_rank", "arm_k", "vec_k", "fanout", "df_cap", "fts_cap", "tag_cap", "link_scan", "hop_rows")


def roots_params(scopes: list[str] | None, qvec: list[float], clock: FakeClock) -> dict[str, Any]:
    """Every parameter of ``retrieval_roots`` for a text and vector query over ``scopes``."""
    return {
        "all_scopes": scopes is None,
        "scopes": scopes or [],
        "max_rank": 4,
        "types": None,
        "tags": None,
        "include_retracted": False,
        "include_contested": False,
        "include_proposed": False,
        "min_salience": 0.0,
        "salience_floor": False,
        "now": clock.now,
        "as_of": None,
        "valid_at": None,
        "has_query": True,
        "has_qvec": True,
        "query": "to be or not",
        "qvec": Vector(qvec),
        "terms": [],
        "id_namespaces": [],
        "id_values": [],
        "arm_k": 50,
        "vec_k": 50,
        "fanout": 8,
        "df_cap": 1000,
        "fts_cap": 5000,
        "tag_cap": 2000,
        "link_scan": 1000,
        "limit": 10,
        "max_bytes": 65536,
        "rrf": False,
        "rrf_k": 60.0,
        "sd_floor_salience": 0.1,
        "semantic_prior": 0.25,
        "when_from": [],
        "when_to": [],
        "when_prior": 2.0,
        "w_vector": 1.0,
        "w_text": 1.0,
        "w_entity": 1.0,
        "w_salience": 0.25,
        "embeddings": "record_embeddings",
        "has_tags": False,
        "hop": False,
        "scoped": scopes is not None and 1 <= len(scopes) <= retrieval.SCOPED_MAX,
        "hop_rows": 0,
        "hop_edges": 0,
        "hop_new": 0,
        "adjacent": False,
        "adjacent_sources": 0,
        "adjacent_reach": 0,
        "adjacent_decay": 0.0,
        "late": False,
    }


def load_corpus(database_url: str, clock: FakeClock) -> bench.Corpus:
    """2,000 synthetic records over 20 scopes (the benchmark's generator), analysed."""
    corpus = bench.Corpus(dim=EMBEDDING_DIM, clusters=4, scopes=20, seed=5)
    for chunk in bench._chunks(corpus, 2_000, 2_000, clock.now):
        benchload.copy_chunk(
            database_url,
            records=chunk["records"],
            payloads=chunk["payloads"],
            embeddings=chunk["embeddings"],
            relations=chunk["relations"],
            entity_terms=chunk["terms"],
        )
    with psycopg.connect(database_url, autocommit=True) as conn:
        conn.execute("ANALYZE")
    return corpus
