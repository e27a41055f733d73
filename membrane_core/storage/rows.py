"""Typed rows: statements answer frozen dataclasses built from their columns by name.

A row class whose fields are enums or bytes gives a ``from_row`` classmethod that turns
the driver's values into them; :func:`rows_of` uses it when present. Column names in
the SQL are the field names (aliases where they differ).
"""

from __future__ import annotations

from typing import Any, TypeVar

import psycopg
from psycopg.rows import RowFactory, kwargs_row

T = TypeVar("T")


def rows_of(cls: type[T]) -> RowFactory[T]:
    """A row factory building ``cls`` (through ``cls.from_row`` if it has one) by column name."""
    build = getattr(cls, "from_row", cls)
    return kwargs_row(build)


def fetch_all(conn: psycopg.Connection, cls: type[T], sql: Any, params: Any = None) -> list[T]:
    """Every row of ``sql`` as a ``cls``."""
    return conn.cursor(row_factory=rows_of(cls)).execute(sql, params).fetchall()


def fetch_one(conn: psycopg.Connection, cls: type[T], sql: Any, params: Any = None) -> T | None:
    """The first row of ``sql`` as a ``cls``, or None."""
    return conn.cursor(row_factory=rows_of(cls)).execute(sql, params).fetchone()
