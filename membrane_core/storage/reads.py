"""Bounded candidate queries for retrieval (RFC 8.1, 8.3)."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime

import psycopg

from membrane_core.storage.queries import q


@dataclass(frozen=True)
class CandidateFilter:
    """Trust, status and type predicates applied in SQL (RFC 8.1, 7.3)."""

    scopes: list[str] | None  # None: every scope
    max_rank: int
    types: list[str] | None
    include_retracted: bool
    include_contested: bool
    min_salience: float
    now: datetime


@dataclass(frozen=True)
class Candidate:
    """A candidate id with its ranking signals and running projected bytes."""

    id: uuid.UUID
    salience: float
    text_rank: float
    bytes: int
    running_bytes: int
    over_budget: bool


def candidates(
    conn: psycopg.Connection, f: CandidateFilter, *, query: str | None, limit: int, max_bytes: int
) -> list[Candidate]:
    """RFC 8.3: ranked candidates cut by ``limit`` rows, with running bytes computed in SQL."""
    cur = conn.cursor()
    cur.execute(q("retrieve_candidates"), {
        "all_scopes": f.scopes is None, "scopes": f.scopes or [], "max_rank": f.max_rank,
        "types": f.types, "include_retracted": f.include_retracted,
        "include_contested": f.include_contested, "min_salience": f.min_salience,
        "now": f.now, "query": query or None, "limit": limit, "max_bytes": max_bytes,
    })
    return [Candidate(*row) for row in cur.fetchall()]
