"""The figures of ``membrane bench list``: tables on the terminal, a block for the docs (RFC 14.1)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import NamedTuple

from rich.console import Console
from rich.table import Table

from membrane_cli import bench
from membrane_cli.bench.ingest import hardware
from membrane_cli.bench.retrieve import _pct as pct

#: RFC 14.1: a page of records through the API within 3x of the bare read of its content
#: (p99), a record's console page within 3x of its JSON read (p50).
TARGET_RATIO = 3.0
MARK_START, MARK_END = "<!-- bench-list:start -->", "<!-- bench-list:end -->"
LABELS = {
    "ids": "bare SELECT: ids by the index",
    "rows": "bare SELECT: columns and payload",
    "content": "bare SELECT: the page's content (baseline)",
    "list": "Membrane.listing.records",
    "http": "GET /v1/records",
    "get": "GET /v1/records/{id} (baseline)",
    "console": "GET /console/records/{id}",
}


@dataclass
class Figures:
    """One run: what was loaded and read, and the latencies (ms) of each case by (kind, page)."""

    records: int
    scopes: int
    rounds: int
    warmup: int
    deep: int = 1
    deep_is_last: bool = False
    console: bool = False
    console_note: str = ""
    load: dict[str, float] = field(default_factory=dict)
    loadavg: list[str] = field(default_factory=list)
    times: dict[tuple[str, int | None], list[float]] = field(default_factory=dict)


class Row(NamedTuple):
    """A line of the table: a case, its page, p50 and p99 (ms), its ratios and target."""

    case: str
    page: str
    p50: float
    p99: float
    ratio: str
    target: str
    ratio_rows: str = ""


def rows(f: Figures) -> tuple[list[Row], list[Row]]:
    """The list rows (p99 against the bare read of the same page's content, and of its columns
    and payload) and the console rows (p50 against the JSON read of the same record)."""
    lists: list[Row] = []
    targets = {
        "content": "baseline",
        "list": "information",
        "http": f"p99 ≤ {TARGET_RATIO:g}x bare content",
    }
    for page in sorted({p for _, p in f.times if p is not None}):
        base = pct(f.times[("content", page)], 99)
        narrow = pct(f.times[("rows", page)], 99)
        for kind in ("ids", "rows", "content", "list", "http"):
            values = f.times[(kind, page)]
            p99 = pct(values, 99)
            lists.append(
                Row(
                    LABELS[kind],
                    str(page),
                    pct(values, 50),
                    p99,
                    f"{p99 / base:.1f}x",
                    targets.get(kind, ""),
                    f"{p99 / narrow:.1f}x",
                )
            )
    pages: list[Row] = []
    if ("get", None) in f.times:
        base = pct(f.times[("get", None)], 50)
        for kind in ("get", "console"):
            values = f.times[(kind, None)]
            p50 = pct(values, 50)
            target = "baseline" if kind == "get" else f"p50 ≤ {TARGET_RATIO:g}x JSON"
            pages.append(Row(LABELS[kind], "", p50, pct(values, 99), f"{p50 / base:.1f}x", target))
    return lists, pages


def _deep(f: Figures) -> str:
    return f"page {f.deep}" + (" (the scope's last)" if f.deep_is_last else "")


def _console_line(f: Figures) -> str:
    if f.console:
        return "a record of the deep page in turn each round, by its console page and its JSON read"
    return f.console_note or "the API serves no console (RFC 10.8): its record page was not measured"


def report(f: Figures, argv: str) -> str:
    """The run as a markdown block for docs/benchmarks.md."""
    lists, pages = rows(f)
    lines = [
        MARK_START,
        f"Command: `{argv}`  ",
        f"Hardware: {hardware()}  ",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {f.records:,} records over "
        f"{f.scopes} scopes, one scope's first page and {_deep(f)} of 50 records, {f.rounds} measured "
        f"rounds after {f.warmup} unmeasured ones, every case once a round in an order drawn per "
        f"round, load average {' -> '.join(f.loadavg)} on the shared machine  ",
        "",
        "| case | page | p50 | p99 | p99 / bare content p99 | p99 / columns and payload p99 | target |",
        "| --- | --- | --- | --- | --- | --- | --- |",
        *(
            f"| {r.case} | {r.page} | {r.p50:.2f} ms | {r.p99:.2f} ms | {r.ratio} | {r.ratio_rows} "
            f"| {r.target} |"
            for r in lists
        ),
        "",
    ]
    if pages:
        lines += [
            "| record | p50 | p99 | p50 / JSON p50 | target |",
            "| --- | --- | --- | --- | --- |",
            *(f"| {r.case} | {r.p50:.2f} ms | {r.p99:.2f} ms | {r.ratio} | {r.target} |" for r in pages),
            "",
        ]
    lines += [
        f"Console: {_console_line(f)}.  ",
        "Load: " + ", ".join(f"{k} {v:.1f} s" for k, v in f.load.items()),
        MARK_END,
    ]
    return "\n".join(lines)


def write_markdown(path: Path, block: str) -> None:
    """Replace the list block of ``path`` (or append it under a Lists heading)."""
    bench.write_markdown(path, block, start=MARK_START, end=MARK_END, heading="Lists (`membrane bench list`)")


def print_figures(console: Console, f: Figures) -> None:
    """The run as tables on the terminal."""
    lists, pages = rows(f)
    t = Table(
        title=f"membrane bench list ({f.records:,} records, first page and {_deep(f)})", title_justify="left"
    )
    for col in ("case", "page", "p50", "p99", "p99 / bare content", "p99 / columns and payload", "target"):
        t.add_column(col)
    for r in lists:
        t.add_row(r.case, r.page, f"{r.p50:.2f} ms", f"{r.p99:.2f} ms", r.ratio, r.ratio_rows, r.target)
    console.print(t)
    if pages:
        c = Table(title="a record's page (RFC 10.8)", title_justify="left")
        for col in ("record", "p50", "p99", "p50 / JSON", "target"):
            c.add_column(col)
        for r in pages:
            c.add_row(r.case, f"{r.p50:.2f} ms", f"{r.p99:.2f} ms", r.ratio, r.target)
        console.print(c)
    console.print(f"console: {_console_line(f)}", highlight=False)
    console.print("load: " + ", ".join(f"{k} {v:.1f} s" for k, v in f.load.items()), highlight=False)
