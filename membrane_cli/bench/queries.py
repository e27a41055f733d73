"""Named SQL blocks of the benchmarks, loaded once from ``bench/sql/*.sql`` (RFC 14.1).

The files are written and split as the store's own (``membrane_core.storage.queries``,
RFC 11.1): ``-- name:`` blocks, each with a one-line description, names unique across
the files. They are no part of the store's queries: only ``membrane bench`` and the tests
that load a benchmark corpus run them, so they hold no fragments and no shape parts.
"""

from __future__ import annotations

import functools
from importlib import resources
from typing import LiteralString

from membrane_core.storage.queries import parse


@functools.cache
def load() -> dict[str, LiteralString]:
    """Every named block of the benchmarks, loaded once."""
    out: dict[str, str] = {}
    folder = resources.files("membrane_cli.bench") / "sql"
    for entry in sorted(folder.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        origin = f"bench/sql/{entry.name}"
        for name, sql in parse(entry.read_text(encoding="utf-8"), origin).items():
            if name in out:
                raise ValueError(f"{origin}: query {name} already defined in another file")
            if "/*@" in sql or "/*?" in sql:
                raise ValueError(f"{origin}: query {name} holds a fragment or a part")
            out[name] = sql
    return out  # type: ignore[return-value,unused-ignore]  # our own package files


def q(name: str) -> LiteralString:
    """The SQL of benchmark query ``name``."""
    return load()[name]
