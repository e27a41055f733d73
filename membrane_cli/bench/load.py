"""Bulk loading and the bare vector baseline of ``membrane bench retrieve`` (RFC 14.1).

Only for a dedicated benchmark database: the load drops and re-creates the search
indexes around one COPY per table, which is how a large store is restored, not how
captures are written.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

import psycopg
from pgvector import Vector
from pgvector.psycopg import register_vector
from psycopg import sql

from membrane_cli.bench.queries import q
from membrane_core.storage import retrieval


def loaded(dsn: str) -> int:
    """Number of records already in the benchmark database."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(q("bench_count")).fetchone()
        return int(row[0]) if row else 0


def drop_indexes(dsn: str) -> None:
    """Drop the HNSW and GIN indexes before a bulk load."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(q("bench_drop_search_indexes"))


def copy_chunk(
    dsn: str,
    *,
    records: Iterable[tuple[Any, ...]],
    payloads: Iterable[tuple[Any, ...]],
    embeddings: Iterable[tuple[uuid.UUID, str, str, Any]],
    relations: Iterable[tuple[Any, ...]],
    entity_terms: Iterable[tuple[Any, ...]],
    tags: Iterable[tuple[Any, ...]] = (),
    provenance: Iterable[tuple[Any, ...]] = (),
) -> None:
    """One transaction, one COPY per table (embeddings as binary COPY: id, scope, model, vector)."""
    with psycopg.connect(dsn) as conn:
        register_vector(conn)
        cur = conn.cursor()
        for name, rows in (("bench_copy_records", records), ("bench_copy_payloads", payloads)):
            with cur.copy(q(name)) as copy:
                for row in rows:
                    copy.write_row(row)
        with cur.copy(q("bench_copy_embeddings")) as copy:
            copy.set_types(["uuid", "text", "text", "vector"])
            for rid, scope, model, vec in embeddings:
                copy.write_row((rid, scope, model, Vector(vec)))
        for name, rows in (
            ("bench_copy_relations", relations),
            ("bench_copy_entity_terms", entity_terms),
            ("bench_copy_tags", tags),
            ("bench_copy_provenance", provenance),
        ):
            with cur.copy(q(name)) as copy:
                for row in rows:
                    copy.write_row(row)
        conn.commit()


def build_indexes(dsn: str) -> dict[str, float]:
    """Re-create the GIN and HNSW indexes and ANALYZE; seconds per step."""
    out: dict[str, float] = {}
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(q("bench_build_settings"))
        for step in ("bench_create_gin", "bench_create_scoped_gin", "bench_create_hnsw", "bench_analyze"):
            t = time.perf_counter()
            conn.execute(q(step))
            out[step.removeprefix("bench_")] = time.perf_counter() - t
    return out


def bare_vector(
    conn: psycopg.Connection, scope: str, qvec: Sequence[float], *, k: int = 10, ef_search: int = 40
) -> list[uuid.UUID]:
    """The baseline: ``ORDER BY embedding <=> q LIMIT k`` under a scope filter, iterative scan."""
    retrieval.configure_scan(conn, ef_search=ef_search, max_scan_tuples=20_000)
    cur = conn.execute(q("bench_bare_vector"), {"scope": scope, "qvec": Vector(list(qvec)), "k": k})
    return [row[0] for row in cur.fetchall()]


def create_database(admin_dsn: str, name: str, *, drop: bool, template: str | None = None) -> str:
    """Create database ``name`` on the server of ``admin_dsn`` (dropping it first if asked),
    empty or, with ``template``, as a copy of that database (which nobody may be connected to)."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        exists = conn.execute(q("bench_database_exists"), {"name": name}).fetchone()
        if exists and drop:
            conn.execute(sql.SQL("DROP DATABASE {} WITH (FORCE)").format(sql.Identifier(name)))
            exists = None
        if not exists and template:
            conn.execute(
                sql.SQL(q("bench_create_copy")).format(
                    name=sql.Identifier(name), template=sql.Identifier(template)
                )
            )
        elif not exists:
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    info = psycopg.conninfo.conninfo_to_dict(admin_dsn)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo("", **info)


def shared_buffers(admin_dsn: str, *, enlarge: str | None = None) -> str:
    """The server's ``shared_buffers``; with ``enlarge`` (``"4GB"``), ask for it at the next restart."""
    with psycopg.connect(admin_dsn, autocommit=True) as conn:
        if enlarge:
            if not re.fullmatch(r"\d+[MG]B", enlarge):
                raise ValueError(f"shared_buffers must look like 1GB or 512MB, got {enlarge!r}")
            conn.execute(sql.SQL(q("bench_shared_buffers")).format(size=sql.Literal(enlarge)))
        row = conn.execute(q("bench_show_shared_buffers")).fetchone()
        return str(row[0]) if row else "?"


def warm_os_cache(dsn: str) -> int:
    """Read every file of the database once, so the OS page cache holds it (a server that
    has been serving). Returns the bytes read; 0 when the files are not on this machine."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(q("bench_database_files")).fetchone()
    folder = Path(row[0]) if row else None
    if folder is None or not folder.is_dir():
        return 0
    total = 0
    for path in sorted(folder.iterdir()):
        if path.is_file():
            with path.open("rb") as fh:
                while chunk := fh.read(1 << 20):
                    total += len(chunk)
    return total
