"""A raw COPY into a scratch table: the physical write limit benchmarks compare with (RFC 14.1)."""

from __future__ import annotations

import uuid
from collections.abc import Iterable

import psycopg

from membrane_cli.bench.queries import q
from membrane_core import errors


def copy_rows(dsn: str, rows: Iterable[tuple[uuid.UUID, str, str, str]]) -> int:
    """COPY ``(id, kind, scope, request_json)`` rows into a temporary table and commit.

    RFC 14.1: the same database, one transaction, one COPY; the table vanishes with the
    session, so nothing of the benchmark stays behind. Returns the number of rows.
    """
    n = 0
    try:
        with psycopg.connect(dsn) as conn:
            conn.execute(q("scratch_create"))
            with conn.cursor() as cur, cur.copy(q("scratch_copy")) as copy:
                for row in rows:
                    copy.write_row(row)
                    n += 1
            conn.commit()
    except psycopg.OperationalError as exc:
        raise errors.Unavailable(f"Postgres is unavailable: {exc}") from exc
    return n
