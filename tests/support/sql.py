"""One-statement SQL helpers for assertions against a test database."""

from __future__ import annotations

from typing import Any

import psycopg

from membrane_core.storage.queries import q

#: A record ``r``'s stored salience as every read gives it: its decay checkpoint while that holds,
#: else the record's column (RFC 6.1).
STORED_SALIENCE = q("stored_salience").replace("/*=*/", "r")


def rows(url: str, sql: str, *args: Any) -> list[tuple[Any, ...]]:
    """Every row of ``sql`` run with ``args``."""
    with psycopg.connect(url) as conn:
        return [tuple(r) for r in conn.execute(sql, args).fetchall()]  # type: ignore[arg-type]


def row(url: str, sql: str, *args: Any) -> tuple[Any, ...]:
    """The one row ``sql`` must return."""
    found = rows(url, sql, *args)
    assert found, f"no row for {sql!r}"
    return found[0]


def execute(url: str, sql: str, *args: Any) -> None:
    """Run one statement and commit."""
    with psycopg.connect(url) as conn:
        conn.execute(sql, args)  # type: ignore[arg-type]


def scalar(url: str, sql: str, *args: Any) -> int:
    """The one integer ``sql`` must return."""
    with psycopg.connect(url) as conn:
        found = conn.execute(sql, args).fetchone()  # type: ignore[arg-type,unused-ignore]
        assert found is not None, f"no row for {sql!r}"
        return int(found[0])
