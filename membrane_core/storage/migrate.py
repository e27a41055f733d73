"""Applying numbered migrations (RFC 11.1)."""

from __future__ import annotations

import logging
import re
from importlib import resources
from typing import LiteralString

import psycopg

from membrane_core import errors

log = logging.getLogger(__name__)

_MIGRATION = re.compile(r"^(\d{4})_(\w+)\.sql$")
_DIM = "__EMBEDDING_DIM__"


def render(text: str, embedding_dim: int) -> LiteralString:
    """Substitute the embedding dimension, the one parameter of the DDL."""
    if not 1 <= int(embedding_dim) <= 16000:
        raise ValueError(f"embedding_dim must be in 1..16000, got {embedding_dim}")
    rendered: LiteralString = text.replace(_DIM, str(int(embedding_dim)))  # type: ignore[assignment,unused-ignore]
    return rendered


def migrations() -> list[tuple[int, str, str]]:
    """``(version, name, sql)`` of every migration file, in order."""
    root = resources.files("membrane_core.storage") / "sql" / "migrations"
    found = []
    for entry in root.iterdir():
        m = _MIGRATION.match(entry.name)
        if m:
            found.append((int(m.group(1)), m.group(2), entry.read_text(encoding="utf-8")))
    found.sort()
    versions = [v for v, _, _ in found]
    if versions != list(range(1, len(versions) + 1)):
        raise RuntimeError(f"migration versions are not contiguous from 1: {versions}")
    return found


def schema_sql(embedding_dim: int) -> LiteralString:
    """``schema.sql`` rendered for ``embedding_dim``: the truth the migrations must equal."""
    text = (resources.files("membrane_core.storage") / "sql" / "schema.sql").read_text("utf-8")
    return render(text, embedding_dim)


def applied_versions(conn: psycopg.Connection) -> set[int]:
    """Versions already applied; empty on a fresh database."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return set()
    return {int(r[0]) for r in conn.execute("SELECT version FROM schema_migrations")}


def migrate(conninfo: str, embedding_dim: int) -> list[int]:
    """Apply every pending migration, each in its own transaction; returns what was applied.

    A session advisory lock serialises concurrent migrators (API and workers starting
    at once).
    """
    applied: list[int] = []
    with psycopg.connect(conninfo, autocommit=True) as conn:
        conn.execute("SELECT pg_advisory_lock(7214001)")
        try:
            done = applied_versions(conn)
            for version, name, sql in migrations():
                if version in done:
                    continue
                with conn.transaction():
                    conn.execute(render(sql, embedding_dim))
                    conn.execute(
                        "INSERT INTO schema_migrations (version, name) VALUES (%s, %s)",
                        (version, name),
                    )
                applied.append(version)
                log.info("applied migration", extra={"version": version, "migration": name})
        finally:
            conn.execute("SELECT pg_advisory_unlock(7214001)")
    return applied


def pending(conninfo: str) -> list[int]:
    """Versions not yet applied to the database at ``conninfo``, in order."""
    with psycopg.connect(conninfo, autocommit=True) as conn:
        done = applied_versions(conn)
    return [version for version, _, _ in migrations() if version not in done]


def require_current(conninfo: str) -> None:
    """RFC 11.1: ``Unavailable`` naming what is missing unless every migration is applied.

    What a process that does not migrate (a worker) checks at start, so that it fails
    with the remedy instead of on the first statement that needs the new schema.
    """
    try:
        missing = pending(conninfo)
    except psycopg.OperationalError as exc:
        raise errors.Unavailable(f"the database is unavailable: {exc}") from exc
    if missing:
        raise errors.Unavailable(
            f"the database schema is missing migrations {', '.join(map(str, missing))}: "
            "run `membrane migrate` (or start the stack with `membrane run`)"
        )
