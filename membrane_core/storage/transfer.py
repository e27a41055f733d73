"""The store's side of moving memories (RFC 15): lines out by COPY, lines in through staging."""

from __future__ import annotations

from typing import Any, LiteralString

from membrane_core.storage.db import Connection
from membrane_core.storage.queries import q


def copy_out(conn: Connection, name: str, params: dict[str, Any]) -> bytes:
    """RFC 15.1: the JSON lines the ``COPY ... TO STDOUT`` statement ``name`` writes. Its text
    format doubles each backslash and escapes nothing else a JSON text holds (Postgres writes
    every control character of a JSON string escaped), so undoubling them gives the lines."""
    out = bytearray()
    with conn.cursor().copy(q(name), params) as copy:
        for block in copy:
            out += block
    return bytes(out).replace(b"\\\\", b"\\")


def lines_of(conn: Connection, name: str, params: dict[str, Any]) -> bytes:
    """RFC 15.1: the JSON lines of statement ``name``, which aggregates them into one value:
    read whole, where ``COPY`` hands them over one message a row."""
    row = conn.execute(q(name), params, binary=True).fetchone()
    return bytes(row[0]) if row and row[0] is not None else b""


def share_snapshot(conn: Connection) -> str:
    """RFC 15.1: the id of the snapshot ``conn``'s transaction reads, for a second connection
    to read the same (a standby exports its snapshots too)."""
    row = conn.execute("SELECT pg_export_snapshot()").fetchone()
    if row is None:
        raise RuntimeError("pg_export_snapshot returned no row")
    return str(row[0])


def stage(conn: Connection, kind: LiteralString, data: bytes) -> None:
    """RFC 15.2: a file's JSON lines into ``import_<kind>``, in order (``COPY ... FROM STDIN``
    in its text format: each backslash doubled, and a JSON line holds no other character it
    escapes)."""
    with conn.cursor().copy("COPY import_" + kind + " (doc) FROM STDIN") as copy:
        copy.write(data.replace(b"\\", b"\\\\"))


def one(conn: Connection, name: str, params: dict[str, Any] | None = None) -> tuple[Any, ...]:
    """The one row of statement ``name`` (an aggregate)."""
    row = conn.execute(q(name), params or {}).fetchone()
    if row is None:
        raise RuntimeError(f"{name} returned no row")
    return tuple(row)


def rows(conn: Connection, name: str, params: dict[str, Any] | None = None) -> list[tuple[Any, ...]]:
    """Every row of statement ``name``."""
    return [tuple(r) for r in conn.execute(q(name), params or {}).fetchall()]


def run(conn: Connection, name: str, params: dict[str, Any] | None = None) -> None:
    """Run statement ``name``."""
    conn.execute(q(name), params or {})
