"""The figures of ``membrane bench scale``: tables, the growth table, the projection (RFC 14.1)."""

from __future__ import annotations

import math
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.table import Table

from membrane_cli import bench
from membrane_cli.bench.scale_store import Disk

#: RFC 14.1: retrieval and the sweeps within 1.5x from the first size to the last.
TARGET_GROWTH = 1.5
MARK_START, MARK_END = "<!-- bench-scale:start -->", "<!-- bench-scale:end -->"
#: One large primary (RFC 14.1 projection): RAM for the indexes, local disk for everything.
PRIMARY_RAM, PRIMARY_DISK = 1 << 40, 30 * 10**12
PROJECTED = (100_000_000, 1_000_000_000)
#: Tables and indexes under this share of the store are left out of the tables by bytes.
MIN_SHARE = 0.005
#: The rows of the growth table, in order; ``True`` where the growth has the target.
LABELS = {
    "records": ("records (rows of memory_records)", False),
    "copy": ("COPY load, records/s", False),
    "build": ("search indexes rebuilt (GIN, scoped GIN, HNSW), s", False),
    "ingest": ("captures committed/s (inbox submit + process_captures)", False),
    "one50": ("hybrid retrieve, one scope, p50", True),
    "one99": ("hybrid retrieve, one scope, p99", True),
    "ten50": ("hybrid retrieve, ten scopes, p50", True),
    "ten99": ("hybrid retrieve, ten scopes, p99", True),
    "page50": ("list page (largest scope, first 50), p50", False),
    "page99": ("list page (largest scope, first 50), p99", False),
    "decay": ("decay sweep, 1,000 due", True),
    "prune": ("prune sweep, 1,000 due", True),
    "read_queries": ("read from disk during the queries, MB", False),
    "read_sweeps": ("read from disk during the sweeps, MB", False),
    "bytes": ("disk, bytes per record (tables and indexes)", False),
    "settle": ("autovacuum catching up after the growth, s", False),
    "dead": ("dead rows (all tables) / autovacuum runs so far", False),
}


class Sweep(NamedTuple):
    """A job's batches until nothing of its kind was due: seconds, batches, items."""

    seconds: float
    batches: int
    items: int


@dataclass
class Point:
    """The figures at one size."""

    size: int
    copy_s: float = 0.0
    copied: int = 0
    build: dict[str, float] = field(default_factory=dict)
    captures: int = 0
    ingest_s: float = 0.0
    one: list[float] = field(default_factory=list)
    ten: list[float] = field(default_factory=list)
    page: list[float] = field(default_factory=list)
    page_scope: str = ""
    page_scope_records: int = 0
    sweeps: dict[str, Sweep] = field(default_factory=dict)
    disk: Disk | None = None
    #: seconds autovacuum took to catch up after the growth, and the tables it vacuumed
    settle_s: float = 0.0
    settled: list[str] = field(default_factory=list)
    loadavg: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    #: bytes the machine's disks read during the queries and during the sweeps (what the
    #: page cache did not hold: RFC 14.1)
    reads: dict[str, int] = field(default_factory=dict)

    def values(self) -> dict[str, float]:
        """Each figure of the growth table as a number (ms for latencies)."""
        d = self.disk
        total = sum(t.heap + t.indexes for t in d.tables) if d else 0
        return {
            "records": float(d.records if d else 0),
            "copy": self.copied / self.copy_s if self.copy_s else 0.0,
            "build": sum(v for k, v in self.build.items() if k.startswith("create")),
            "ingest": self.captures / self.ingest_s if self.ingest_s else 0.0,
            "one50": bench.percentile(self.one, 50),
            "one99": bench.percentile(self.one, 99),
            "ten50": bench.percentile(self.ten, 50),
            "ten99": bench.percentile(self.ten, 99),
            "page50": bench.percentile(self.page, 50),
            "page99": bench.percentile(self.page, 99),
            "decay": self.sweeps["decay"].seconds * 1000 if "decay" in self.sweeps else 0.0,
            "prune": self.sweeps["prune"].seconds * 1000 if "prune" in self.sweeps else 0.0,
            "read_queries": self.reads.get("queries", 0) / 1e6,
            "read_sweeps": self.reads.get("sweeps", 0) / 1e6,
            "bytes": total / d.records if d and d.records else 0.0,
            "settle": self.settle_s,
            "dead": float(sum(v.dead for v in d.vacuum)) if d else 0.0,
        }


@dataclass
class Figures:
    """One run: its parameters in words, the vectors written, and the figures at each size."""

    argv: str
    scopes: int
    vector_share: float
    vectors: int = 0
    points: list[Point] = field(default_factory=list)
    started: float = field(default_factory=time.time)
    shared_buffers: str = "?"


def _cell(key: str, p: Point) -> str:
    v = p.values()[key]
    if key in ("records", "copy", "ingest", "bytes", "read_queries", "read_sweeps"):
        return f"{v:,.0f}"
    if key in ("build", "settle"):
        return f"{v:,.1f}"
    if key == "dead":
        runs = sum(x.autovacuums for x in p.disk.vacuum) if p.disk else 0
        return f"{v:,.0f} / {runs}"
    return f"{v:,.2f} ms" if v < 100 else f"{v:,.0f} ms"


def growth_rows(f: Figures) -> list[list[str]]:
    """The growth table: each figure at each size, its ratio last to first, the target."""
    first, last = f.points[0], f.points[-1]
    rows = []
    for key, (label, targeted) in LABELS.items():
        a, b = first.values()[key], last.values()[key]
        ratio = f"{b / a:.2f}x" if a and len(f.points) > 1 else ""
        target = f"≤ {TARGET_GROWTH:g}x" if targeted else ""
        if targeted and ratio:
            target += " (met)" if b / a <= TARGET_GROWTH else " (not met)"
        rows.append([label, *(_cell(key, p) for p in f.points), ratio, target])
    return rows


def table_rows(p: Point) -> list[list[str]]:
    """Bytes per record of each table at one size: heap, indexes, total."""
    d = p.disk
    if not d or not d.records:
        return []
    return [
        [
            t.name,
            f"{t.heap / d.records:,.0f}",
            f"{t.indexes / d.records:,.0f}",
            f"{(t.heap + t.indexes) / 2**20:,.0f}",
        ]
        for t in d.tables
        if t.heap + t.indexes >= 1 << 20
    ]


def index_rows(p: Point) -> list[list[str]]:
    """Bytes per record of each index of at least a MiB at one size."""
    d = p.disk
    if not d or not d.records:
        return []
    return [[i.name, i.table, f"{i.bytes / d.records:,.1f}"] for i in d.indexes if i.bytes >= 1 << 20]


def vacuum_rows(p: Point) -> list[list[str]]:
    """Autovacuum's work on each table with rows at one size."""
    d = p.disk
    if not d:
        return []
    return [
        [
            v.name,
            f"{v.live:,}",
            f"{v.dead:,}",
            str(v.autovacuums),
            str(v.autoanalyzes),
            v.last.strftime("%H:%M:%S") if v.last else "never",
        ]
        for v in d.vacuum
        if v.live or v.dead
    ]


class Projection(NamedTuple):
    """What a store of ``records`` would take, from the last size's bytes per record."""

    records: int
    disk: float
    disk_all_vectors: float
    indexes_all_vectors: float


def projection(f: Figures) -> list[Projection]:
    """RFC 14.1: disk and index bytes at 100M and 1B records, as measured (the vector share
    of the run) and with every episode embedded (the vector table's bytes per vector)."""
    p = f.points[-1]
    d = p.disk
    if not d or not d.records:
        return []
    total = sum(t.heap + t.indexes for t in d.tables) / d.records
    indexes = sum(t.indexes for t in d.tables) / d.records
    vec = next((t for t in d.tables if t.name == "record_embeddings"), None)
    per_vector = (vec.heap + vec.indexes) / f.vectors if vec and f.vectors else 0.0
    per_vector_index = vec.indexes / f.vectors if vec and f.vectors else 0.0
    share = f.vectors / d.records if d.records else 0.0
    extra = (1 - share) * per_vector
    extra_index = (1 - share) * per_vector_index
    return [Projection(n, n * total, n * (total + extra), n * (indexes + extra_index)) for n in PROJECTED]


def _size(b: float) -> str:
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if b >= scale:
            return f"{b / scale:,.1f} {unit}"
    return f"{b:,.0f} B"


def projection_lines(f: Figures) -> list[str]:
    """The projection as a markdown table, with where one primary stops being enough."""
    rows = projection(f)
    if not rows:
        return []
    lines = [
        "| records | disk, as measured | disk, every episode embedded | indexes, every episode embedded "
        "(the hot set) | one primary (1 TiB RAM, 30 TB disk) |",
        "| --- | --- | --- | --- | --- |",
    ]
    for r in rows:
        fits = []
        fits.append("indexes fit in RAM" if r.indexes_all_vectors <= PRIMARY_RAM else "indexes exceed RAM")
        fits.append("disk fits" if r.disk_all_vectors <= PRIMARY_DISK else "disk exceeds one host")
        lines.append(
            f"| {r.records:,} | {_size(r.disk)} | {_size(r.disk_all_vectors)} | "
            f"{_size(r.indexes_all_vectors)} | {', '.join(fits)} |"
        )
    per = rows[0].indexes_all_vectors / rows[0].records
    lines.append("")
    lines.append(
        f"The indexes of a store with every episode embedded outgrow 1 TiB of RAM at about "
        f"{math.floor(PRIMARY_RAM / per / 1e6):,} million records."
    )
    return lines


def report(f: Figures, hw: str) -> str:
    """The run as a markdown block for docs/benchmarks.md."""
    sizes = [f"{p.size:,}" for p in f.points]
    last = f.points[-1]
    episodes = last.size
    lines = [
        MARK_START,
        f"Command: `{f.argv}`  ",
        f"Hardware: {hw}  ",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime(f.started))}, episodes over "
        f"{f.scopes:,} Zipf-distributed scopes, shared_buffers {f.shared_buffers}; "
        f"{f.vectors:,} of {episodes:,} episodes with a 384-dimension vector ({f.vectors / episodes:.1%}); "
        f"the whole run took {sum(p.wall_s for p in f.points) / 60:.1f} min  ",
        "",
        "| figure | " + " | ".join(sizes) + " | last / first | target |",
        "| --- | " + " | ".join("---" for _ in sizes) + " | --- | --- |",
        *("| " + " | ".join(r) + " |" for r in growth_rows(f)),
        "",
        "Each size: " + "; ".join(_step_note(p) for p in f.points) + ".  ",
        "",
        f"Bytes per record by table and by index at {last.size:,} episodes (those of at least "
        f"{MIN_SHARE:.1%} of the store):",
        "",
        "| table | heap | indexes | MiB in all |",
        "| --- | --- | --- | --- |",
        *("| " + " | ".join(r) + " |" for r in table_rows(last)),
        "",
        "| index | table | bytes per record |",
        "| --- | --- | --- |",
        *("| " + " | ".join(r) + " |" for r in index_rows(last)),
        "",
        f"Autovacuum at {last.size:,} episodes (counters since the server started"
        + (
            f"; running: {', '.join(last.disk.running)}"
            if last.disk and last.disk.running
            else "; none running"
        )
        + "):",
        "",
        "| table | live rows | dead rows | autovacuums | autoanalyzes | last autovacuum (UTC) |",
        "| --- | --- | --- | --- | --- | --- |",
        *("| " + " | ".join(r) + " |" for r in vacuum_rows(last)),
        "",
        f"Projection from the bytes per record at {last.size:,} episodes:",
        "",
        *projection_lines(f),
        MARK_END,
    ]
    return "\n".join(lines)


def _step_note(p: Point) -> str:
    build = ", ".join(f"{k.removeprefix('create_')} {v:.0f} s" for k, v in p.build.items())
    return (
        f"{p.size:,}: COPY of {p.copied:,} rows of memory_records in {p.copy_s:.0f} s, {build}; "
        f"autovacuum caught up in {p.settle_s:.0f} s ({', '.join(p.settled) or 'nothing to vacuum'}); "
        f"{p.captures:,} captures; list page of {p.page_scope} ({p.page_scope_records:,} records); "
        f"load average {' -> '.join(p.loadavg)}; {p.wall_s / 60:.1f} min"
    )


def write_markdown(path: Path, block: str) -> None:
    """Replace the scale block of ``path`` (or append it under a heading of its own)."""
    bench.write_markdown(
        path, block, start=MARK_START, end=MARK_END, heading="Scale (`membrane bench scale`)"
    )


def print_point(console: Console, p: Point) -> None:
    """One size's figures as they are measured."""
    v = p.values()
    console.print(
        f"[bold]{p.size:,} episodes[/] ({v['records']:,.0f} records): COPY {v['copy']:,.0f} records/s, "
        f"indexes {v['build']:.0f} s; ingest {v['ingest']:,.0f} captures/s committed; retrieve one scope "
        f"{v['one50']:.2f} / {v['one99']:.2f} ms, ten {v['ten50']:.2f} / {v['ten99']:.2f} ms; list page "
        f"{v['page50']:.2f} / {v['page99']:.2f} ms; decay {v['decay']:,.0f} ms, prune {v['prune']:,.0f} ms; "
        f"read from disk {v['read_queries']:,.0f} MB (queries), {v['read_sweeps']:,.0f} MB (sweeps); "
        f"{v['bytes']:,.0f} bytes/record; {p.wall_s / 60:.1f} min",
        highlight=False,
    )


def print_figures(console: Console, f: Figures) -> None:
    """The growth table, the disk by table and index, autovacuum, the projection."""
    t = Table(title="membrane bench scale: growth", title_justify="left")
    for col in ("figure", *(f"{p.size:,}" for p in f.points), "last / first", "target"):
        t.add_column(col)
    for r in growth_rows(f):
        t.add_row(*r)
    console.print(t)
    last = f.points[-1]
    for title, cols, rows in (
        (
            f"bytes per record by table at {last.size:,}",
            ("table", "heap", "indexes", "MiB"),
            table_rows(last),
        ),
        (f"bytes per record by index at {last.size:,}", ("index", "table", "bytes"), index_rows(last)),
        (
            f"autovacuum at {last.size:,}",
            ("table", "live", "dead", "autovacuums", "autoanalyzes", "last"),
            vacuum_rows(last),
        ),
    ):
        tt = Table(title=title, title_justify="left")
        for col in cols:
            tt.add_column(col)
        for r in rows:
            tt.add_row(*r)
        console.print(tt)
    if last.disk and last.disk.running:
        console.print("vacuum running: " + "; ".join(last.disk.running), highlight=False)
    for line in projection_lines(f):
        console.print(line, highlight=False, markup=False)
