"""Every shape of every shaped statement, byte for byte as its snapshot (RFC 8.1.5, 11.1).

A shaped statement is one the package's sources pass to ``queries.shaped("<name>", ...)``;
its shapes are the combinations of its ``/*?flag*/`` part flags (``queries.part_flags``),
2^n of them, less those of flags the caller never sets together (``NEVER_TOGETHER``).
Each shape is rendered with its flags written in and every other parameter
bound, except the relation names the code writes in (``embeddings``, as
``record_embeddings``), and kept as ``tests/snapshots/sql/<statement>/<flag>=<0|1>,....sql``
(``no_flags.sql`` for a statement without parts): a first line naming the parameter behind
each ``$n``, then the text exactly as Postgres receives it. The other values a caller
writes in (NULLs, booleans, integers) only take the place of a placeholder (and renumber
the ones after it), so these shapes hold every text the loader renders.

Nothing is normalised: the comparison is of bytes, whitespace included.

After a deliberate change to the SQL, regenerate the snapshots and review their diff::

    MEMBRANE_UPDATE_SNAPSHOTS=1 .venv/bin/python -m pytest -q tests/unit/test_sql_shapes.py
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from membrane_core.storage import queries

ROOT = Path(__file__).resolve().parents[2]
SNAPSHOTS = ROOT / "tests" / "snapshots" / "sql"
UPDATE = os.environ.get("MEMBRANE_UPDATE_SNAPSHOTS") == "1"

#: Relation names the code writes into a shape (RFC 13.2), and the value a snapshot shows.
RELATIONS = {"embeddings": "record_embeddings"}

_CALL = re.compile(r"""\bshaped\(\s*["'](\w+)["']""")

#: Flags a statement's caller never sets together, so their shapes are never rendered:
#: late interaction re-ranks the roots, so the statement makes no first hop from them
#: (RFC 8.2.3, 8.4; ``retrieval.RootsQuery`` refuses both, see the test below).
NEVER_TOGETHER: dict[str, tuple[frozenset[str], ...]] = {
    "retrieval_roots": (frozenset({"late", "hop"}),),
    # a page reads every scope, one listed scope or several: one of the three (RFC 10.7)
    "list_records": (
        frozenset({"every_scope", "one_scope"}),
        frozenset({"every_scope", "many_scopes"}),
        frozenset({"one_scope", "many_scopes"}),
    ),
}


def shaped_statements() -> list[str]:
    """The statements the package sources pass to ``shaped()``."""
    names: set[str] = set()
    for package in ("membrane_core", "membrane_cli", "api", "workers"):
        for path in (ROOT / package).rglob("*.py"):
            names.update(_CALL.findall(path.read_text(encoding="utf-8")))
    return sorted(names)


def shapes() -> Iterator[tuple[str, dict[str, bool]]]:
    """Every (statement, flags) the loader can render."""
    for name in shaped_statements():
        flags = queries.part_flags(name)
        for values in itertools.product((False, True), repeat=len(flags)):
            chosen = dict(zip(flags, values, strict=True))
            if not any(all(chosen[f] for f in group) for group in NEVER_TOGETHER.get(name, ())):
                yield name, chosen


def snapshot_path(name: str, flags: dict[str, bool]) -> Path:
    stem = ",".join(f"{k}={int(v)}" for k, v in flags.items()) or "no_flags"
    return SNAPSHOTS / name / f"{stem}.sql"


def render(name: str, flags: dict[str, bool]) -> str:
    """The shape's snapshot text: the parameter behind each ``$n``, then the SQL."""
    keys = queries._placeholders(name)
    params: dict[str, object] = {k: flags.get(k, RELATIONS.get(k, f"<{k}>")) for k in keys}
    st = queries.shaped(name, params, relations=[k for k in keys if k in RELATIONS])
    header = "-- " + (", ".join(f"${n} {k}" for n, k in enumerate(st.names, 1)) or "no parameters")
    return f"{header}\n{st.sql}\n"


ALL = list(shapes())


@pytest.mark.parametrize(
    ("name", "flags"), ALL, ids=[snapshot_path(n, f).relative_to(SNAPSHOTS).as_posix() for n, f in ALL]
)
def test_shape_matches_snapshot(name: str, flags: dict[str, bool]) -> None:
    path = snapshot_path(name, flags)
    text = render(name, flags)
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        with path.open("w", encoding="utf-8", newline="") as fh:
            fh.write(text)
    assert path.is_file(), f"no snapshot {path}: regenerate with MEMBRANE_UPDATE_SNAPSHOTS=1"
    with path.open(encoding="utf-8", newline="") as fh:
        want = fh.read()
    assert text == want, f"{name} {flags} differs from {path.relative_to(ROOT)}"


def test_every_shape_has_one_snapshot_and_no_snapshot_is_stale() -> None:
    """Positive control: the statements are found and render more than one shape, and the
    snapshot files are exactly the rendered shapes."""
    names = shaped_statements()
    assert "retrieval_roots" in names and "retrieval_graph_hop" in names
    assert len(queries.part_flags("retrieval_roots")) >= 3  # has_tags, hop, has_query, scoped
    rendered = {snapshot_path(n, f) for n, f in ALL}
    if UPDATE:
        for stale in set(SNAPSHOTS.rglob("*.sql")) - rendered:
            stale.unlink()
    files = set(SNAPSHOTS.rglob("*.sql"))
    assert len(ALL) > 1
    assert len(ALL) == len(rendered) == len(files), (len(ALL), len(files))
    assert rendered == files
    # shapes differ: every flag changes the text of retrieval_roots
    roots = {tuple(sorted(f.items())): render(n, f) for n, f in ALL if n == "retrieval_roots"}
    assert len(set(roots.values())) == len(roots)


def test_flags_never_rendered_together_are_refused_by_their_caller() -> None:
    """The shapes left out (``NEVER_TOGETHER``) are those the caller refuses; positive control:
    each flag of the pair alone is still rendered."""
    from membrane_core.storage import retrieval

    with pytest.raises(ValueError, match="no first hop"):
        retrieval.RootsQuery(
            filter=None,  # type: ignore[arg-type]  # refused before any statement
            query="q",
            qvec=None,
            terms=(),
            arm_k=10,
            vec_k=10,
            fanout=1,
            limit=10,
            max_bytes=1,
            rrf=False,
            weights={},
            rrf_k=60.0,
            sd_floor_salience=0.1,
            target_visible=lambda *_: True,
            first_hop=retrieval.FirstHop(max_edges=1, max_nodes=1),
            late=True,
        )
    roots = [f for n, f in ALL if n == "retrieval_roots"]
    assert any(f["late"] for f in roots) and any(f["hop"] for f in roots)
    assert not any(f["late"] and f["hop"] for f in roots)
    assert len(roots) == 3 * 2 ** (len(queries.part_flags("retrieval_roots")) - 2)


def test_fragment_arguments_are_written_in() -> None:
    """RFC 11.1: ``/*@name(argument)*/`` writes the argument in place of each ``/*=*/`` of the
    fragment; a fragment that takes one refuses to be included without it, any other refuses one."""
    blocks = {
        "grid": "round(/*=*/ * 8.0) / 8.0",
        "twice": "/*=*/ + /*=*/",
        "one": "1",
        "in": "(/*@grid(x)*/ = /*=*/)",
        "s": "SELECT /*@grid(ln(1.0 + (n - d)))*/ AS x, /*@twice(a.b)*/, /*@in((r.s || ''))*/",
        "bare": "SELECT /*@grid*/",
        "extra": "SELECT /*@one(2)*/",
    }
    assert queries._include(blocks, "s") == (
        "SELECT round(ln(1.0 + (n - d)) * 8.0) / 8.0 AS x, a.b + a.b, (round(x * 8.0) / 8.0 = (r.s || ''))"
    )
    assert queries._include(blocks, "grid") == blocks["grid"]  # loaded on its own: kept as written
    with pytest.raises(ValueError, match="fragment grid is included without an argument"):
        queries._include(blocks, "bare")
    with pytest.raises(ValueError, match="fragment one is included with an argument"):
        queries._include(blocks, "extra")
    # the store's own: the scope predicate, its planner-hint spellings, BM25 and the idf grid
    loaded = queries.load()
    assert loaded["scope_unindexed"] == "(%(all_scopes)s OR (r.scope || '') = ANY(%(scopes)s::text[]))"
    roots = loaded["retrieval_roots"]
    assert roots.count("4294967296.0) / 4294967296.0") == 2 and roots.count("* 2.2") == 2


def test_retrieval_parts_are_short_and_read_from_their_folder() -> None:
    """RFC 11.1: the retrieval statement is a short list of parts, one file per part, each
    file short; the folder's blocks load with the rest."""
    folder = ROOT / "membrane_core" / "storage" / "sql" / "queries" / "retrieval"
    files = sorted(folder.glob("*.sql"))
    assert len(files) >= 8
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert text.count("\n") <= 120, path.name
        assert set(queries.parse(text, path.name)) <= set(queries.load())
    reads = queries.parse((folder.parent / "retrieval.sql").read_text(encoding="utf-8"), "retrieval.sql")
    assert reads["retrieval_roots"].count("\n") < 40
    assert "/*@fulltext_frequencies*/" in reads["retrieval_roots"]


def test_benchmark_sql_is_not_the_stores() -> None:
    """RFC 14.1: the benchmarks' SQL loads from ``membrane_cli/bench/sql``, not with the store's."""
    from membrane_cli.bench import queries as bench_queries

    bench = bench_queries.load()
    assert {"bench_copy_records", "bench_bare_vector", "scratch_create", "scratch_copy"} <= set(bench)
    assert not set(bench) & set(queries.load())
    assert not [n for n in queries.load() if n.startswith(("bench_", "scratch_"))]
