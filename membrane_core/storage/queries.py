"""Named SQL blocks loaded once from ``sql/queries/*.sql`` (RFC 11.1).

A block starts with ``-- name: <name>`` followed by a one-line ``-- <description>``;
it runs to the next ``-- name:`` line. Names are unique across all files.
"""

from __future__ import annotations

import functools
import re
from importlib import resources
from typing import LiteralString

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)


def parse(text: str, origin: str) -> dict[str, str]:
    """Split one file into ``{name: sql}``; refuses duplicates and blocks without a description."""
    out: dict[str, str] = {}
    parts = _NAME.split(text)
    for name, body in zip(parts[1::2], parts[2::2], strict=True):
        lines = body.strip("\n").splitlines()
        if not lines or not lines[0].startswith("-- "):
            raise ValueError(f"{origin}: query {name} has no one-line description")
        sql = "\n".join(lines[1:]).strip().rstrip(";")
        if name in out:
            raise ValueError(f"{origin}: query {name} defined twice")
        out[name] = sql
    return out


@functools.cache
def load() -> dict[str, LiteralString]:
    """Every named query of the package, loaded once."""
    root = resources.files("membrane_core.storage") / "sql" / "queries"
    out: dict[str, str] = {}
    for entry in sorted(root.iterdir(), key=lambda e: e.name):
        if not entry.name.endswith(".sql"):
            continue
        for name, sql in parse(entry.read_text(encoding="utf-8"), entry.name).items():
            if name in out:
                raise ValueError(f"{entry.name}: query {name} already defined in another file")
            out[name] = sql
    return out  # type: ignore[return-value,unused-ignore]  # our own package files


def q(name: str) -> LiteralString:
    """The SQL of query ``name``."""
    return load()[name]
