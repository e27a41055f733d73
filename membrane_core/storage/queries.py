"""Named SQL blocks loaded once from ``sql/queries/`` (RFC 11.1).

Files: every ``*.sql`` file under ``sql/queries/``, subfolders included (``retrieval/``
holds the parts of the retrieval statement, one file per part), read in the order of
their paths. A folder only groups files: a block is named by its name alone, and names
are unique across all files.

Blocks: a block starts with ``-- name: <name>`` followed by a one-line
``-- <description>``; it runs to the next ``-- name:`` line. Its text is what follows the
description, stripped of surrounding whitespace and of a final ``;``.

Fragments: a block may include another, written ``/*@<name>*/``: the fragment's text
replaces the marker when the files are loaded, so a column list, a filter or a formula
shared by several statements is written once. Nothing is added around it: a fragment's
first line is written in where the marker stands and its later lines keep the
indentation they have in its file, so a fragment is written indented as it reads where
it is included. ``/*@<name>(<argument>)*/`` includes a fragment with an argument, one
line of SQL without comments that runs to the first ``)*/``: the fragment's text is
written in with the argument in place of each ``/*=*/`` it holds. A fragment that holds
``/*=*/`` is included only with an argument, any other only without. Fragments may
include fragments, three levels below the statement at most (statement, fragment,
fragment, fragment); a deeper include refuses, as does an unknown name. A fragment may
hold any run of text: each part of ``retrieval_roots`` is a run of CTEs whose last one
the statement closes, so that the statement shows where its parts meet (``retrieval.sql``).

Shape parts: a shaped statement (:func:`shaped`) may also hold parts that only some of
its shapes run, written ``/*?flag*/ ... /*?end*/`` (or ``/*?!flag*/`` for the opposite):
the part is kept in the text of a shape when the shape parameter ``flag`` is written in
as true (a non-zero integer counts as true), and left out otherwise. A part may include
fragments; parts do not nest, and every block (a fragment too) closes the parts it opens,
so a block's text with its fragments written in never holds an open part. The shapes of a
statement are the combinations of its flags (:func:`part_flags`) (RFC 8.1.5).
"""

from __future__ import annotations

import functools
import re
from collections.abc import Collection, Mapping
from dataclasses import dataclass
from importlib import resources
from importlib.resources.abc import Traversable
from typing import LiteralString

_NAME = re.compile(r"^-- name: (\w+)\s*$", re.MULTILINE)
_FRAGMENT = re.compile(r"/\*@(\w+)(?:\(((?:(?!\*/).)*?)\))?\*/")
_ARGUMENT = "/*=*/"
_PART = re.compile(r"/\*\?(!?)(?!end\*/)(\w+)\*/(.*?)/\*\?end\*/", re.DOTALL)


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
    out: dict[str, str] = {}
    for path, entry in _files(resources.files("membrane_core.storage") / "sql" / "queries"):
        for name, sql in parse(entry.read_text(encoding="utf-8"), path).items():
            if name in out:
                raise ValueError(f"{path}: query {name} already defined in another file")
            out[name] = sql
    loaded = {name: _include(out, name) for name in out}
    for name, sql in loaded.items():
        if "/*@" in sql:
            raise ValueError(f"query {name}: a /*@fragment*/ marker is misspelt")
        _check_parts(name, sql)
    return loaded  # type: ignore[return-value,unused-ignore]  # our own package files


def _files(folder: Traversable, prefix: str = "") -> list[tuple[str, Traversable]]:
    """The ``*.sql`` files under ``folder``, subfolders included, by path."""
    found: list[tuple[str, Traversable]] = []
    for entry in folder.iterdir():
        if entry.is_dir():
            found.extend(_files(entry, f"{prefix}{entry.name}/"))
        elif entry.name.endswith(".sql"):
            found.append((f"{prefix}{entry.name}", entry))
    return sorted(found, key=lambda f: f[0])


def _check_parts(name: str, sql: str) -> None:
    """Every ``/*?flag*/`` part is closed by ``/*?end*/`` before another opens, and no other
    comment starts with ``/*?``."""
    if "/*?" in _PART.sub("", sql) or any("/*?" in m.group(3) for m in _PART.finditer(sql)):
        raise ValueError(f"query {name}: a /*?flag*/ part is unclosed, nested or misspelt")


def _include(blocks: Mapping[str, str], name: str, depth: int = 0, argument: str | None = None) -> str:
    """Query ``name`` with each ``/*@fragment*/`` marker replaced by that block's text, and,
    included with an argument, the argument in place of each ``/*=*/``."""
    if depth > 3:
        raise ValueError(f"fragments nest too deep at {name}")

    def sub(m: re.Match[str]) -> str:
        if m.group(1) not in blocks:
            raise ValueError(f"query {name} includes unknown fragment {m.group(1)}")
        return _include(blocks, m.group(1), depth + 1, m.group(2))

    text = _FRAGMENT.sub(sub, blocks[name])
    if depth and (argument is None) == (_ARGUMENT in text):
        raise ValueError(
            f"fragment {name} is included {'without' if argument is None else 'with'} an argument"
        )
    return text if argument is None else text.replace(_ARGUMENT, argument)


def q(name: str) -> LiteralString:
    """The SQL of query ``name``."""
    return load()[name]


def part_flags(name: str) -> tuple[str, ...]:
    """The flags of the ``/*?flag*/`` parts of query ``name``, sorted: its shapes are their
    combinations (RFC 8.1.5)."""
    return tuple(sorted({m.group(2) for m in _PART.finditer(q(name))}))


_PARAM = re.compile(r"%\((\w+)\)s")


def _literal(value: object, *, as_int: bool) -> str | None:
    """SQL text of a shape value; ``None`` for a value that stays a bound parameter."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if as_int and isinstance(value, int):
        return str(int(value))
    return None


@dataclass(frozen=True)
class Shaped:
    """One shape of a named query: its text with ``$n`` placeholders, and the bound values.

    Run it with a ``psycopg.RawCursor``, which sends the text as it is: psycopg parses a
    ``%(name)s`` query on every execution once it is longer than 4,096 characters, and
    the retrieval statement is several times that (RFC 8.1.5).
    """

    sql: str
    names: tuple[str, ...]  # the parameter behind each $n
    values: list[object]

    def bound(self) -> dict[str, object]:
        """The bound values by parameter name."""
        return dict(zip(self.names, self.values, strict=True))


def shaped(
    name: str, params: Mapping[str, object], *, ints: Collection[str] = (), relations: Collection[str] = ()
) -> Shaped:
    """Query ``name`` with its shape parameters written in as literals (RFC 8.1.5).

    NULLs and booleans decide which filters apply and which arm runs; the integers named
    in ``ints`` (windows, the caller's sensitivity rank) take a handful of values. Written
    into the text they let Postgres fold every ``$flag OR ...`` guard away, so the
    statement's generic plan is as good as a custom one and, prepared, no execution pays
    for planning; each shape is its own prepared statement. Everything else (strings,
    floats, timestamps, arrays, vectors, free integers such as byte budgets) stays a bound
    parameter. Only NULL, true, false and ``str(int)`` are ever written in, so no value a
    caller controls reaches the SQL text. The parameters named in ``relations`` are table
    names the code picked itself (a partition, RFC 13.2); they are written in as they are
    and must be plain lowercase identifiers. The text of each shape is rendered once.
    """
    keys = _placeholders(name)
    shape = tuple(
        _relation(params[k]) if k in relations else _literal(params[k], as_int=k in ints) for k in keys
    )
    sql, names = _render(name, keys, shape)
    return Shaped(sql, names, [params[k] for k in names])


_IDENT = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def _relation(value: object) -> str:
    """A table name written into a shape: a plain lowercase identifier, nothing else."""
    if not isinstance(value, str) or not _IDENT.fullmatch(value):
        raise ValueError(f"not a plain relation name: {value!r}")
    return value


@functools.cache
def _placeholders(name: str) -> tuple[str, ...]:
    """The distinct parameter names of query ``name`` (and the flags of its parts), in order
    of first use."""
    sql = q(name)
    return tuple(dict.fromkeys([*_PARAM.findall(sql), *(m.group(2) for m in _PART.finditer(sql))]))


def _parts(sql: str, lits: Mapping[str, str | None]) -> str:
    """``sql`` with each ``/*?flag*/`` part kept or left out by its written-in flag."""

    def keep(m: re.Match[str]) -> str:
        lit = lits[m.group(2)]
        if lit is None or lit == "NULL":
            raise ValueError(f"part flag {m.group(2)} is not a written-in boolean or integer")
        on = lit not in ("false", "0")
        return m.group(3) if on != bool(m.group(1)) else ""

    return _PART.sub(keep, sql)


@functools.lru_cache(maxsize=512)
def _render(name: str, keys: tuple[str, ...], shape: tuple[str | None, ...]) -> tuple[str, tuple[str, ...]]:
    """The text of one shape of query ``name`` with ``$n`` placeholders, and their names."""
    lits = dict(zip(keys, shape, strict=True))
    text = _parts(q(name), lits)
    names = tuple(k for k in dict.fromkeys(_PARAM.findall(text)) if lits[k] is None)
    number = {k: f"${n}" for n, k in enumerate(names, 1)}

    def sub(m: re.Match[str]) -> str:
        lit = lits[m.group(1)]
        return number[m.group(1)] if lit is None else lit

    return _PARAM.sub(sub, text).replace("%%", "%"), names
