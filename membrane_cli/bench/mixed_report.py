"""The figures of ``membrane bench load``, on the terminal and as a docs block (RFC 14.1)."""

from __future__ import annotations

import time
from typing import TYPE_CHECKING

from rich.console import Console
from rich.table import Table

from membrane_cli.bench import percentile

if TYPE_CHECKING:
    from membrane_cli.bench.mixed import Run

MARK_START, MARK_END = "<!-- bench-load:start -->", "<!-- bench-load:end -->"
#: RFC 12.4: with the local model, retrieve p50 and p99 within these multiples of the baseline's.
TARGET_P50, TARGET_P99 = 1.5, 2.0
#: The backlog's samples shown, at most.
BACKLOG_POINTS = 8


def _ratio(run: Run, base: Run, p: float) -> float:
    a, b = percentile(run.times["retrieve"], p), percentile(base.times["retrieve"], p)
    return a / b if b else float("nan")


def kinds_rows(run: Run) -> list[tuple[str, str, str, str, str]]:
    """(kind, requests, per second, p50, p99) of each kind, then all together."""
    rows = []
    for kind, ms in run.times.items():
        errors = f" ({run.errors[kind]} failed)" if run.errors[kind] else ""
        rows.append(
            (
                kind,
                f"{len(ms):,}{errors}",
                f"{len(ms) / run.duration:,.1f}" if run.duration else "-",
                f"{percentile(ms, 50):.1f} ms",
                f"{percentile(ms, 99):.1f} ms",
            )
        )
    n = sum(len(ms) for ms in run.times.values())
    rows.append(("all", f"{n:,}", f"{n / run.duration:,.1f}" if run.duration else "-", "", ""))
    return rows


def backlog_line(run: Run) -> str:
    """The embed backlog at a few moments of the load and after it, and when it drained."""
    if not run.backlog:
        return "no samples"
    step = max(1, len(run.backlog) // BACKLOG_POINTS)
    points = run.backlog[::step]
    if points[-1] is not run.backlog[-1]:
        points.append(run.backlog[-1])
    shown = ", ".join(f"{t:.0f} s: {due:,} due (lag {lag:.0f} s)" for t, due, lag in points)
    peak = max(due for _, due, _ in run.backlog)
    drained = (
        f"drained {run.drained_s:.0f} s after the load stopped"
        if run.drained_s is not None
        else "not drained within the wait"
    )
    return f"{shown}; peak {peak:,} due; {drained}"


def captures_line(run: Run) -> str:
    """Accepted captures against those committed: none may be lost."""
    lost = len(run.accepted) - run.committed
    return f"{len(run.accepted):,} accepted, {run.committed:,} committed, {lost:,} not committed"


def cpu_line(run: Run) -> str:
    """The cores each process used over the load's window."""
    return ", ".join(f"{name} {share:.2f}" for name, share in sorted(run.cpu.items(), key=lambda kv: -kv[1]))


def print_run(console: Console, run: Run, base: Run) -> None:
    """One provider's tables on the terminal."""
    t = Table(title=f"membrane bench load: embedding {run.provider}", title_justify="left")
    for col in ("request", "answered", "per s", "p50", "p99"):
        t.add_column(col)
    for row in kinds_rows(run):
        t.add_row(*row)
    console.print(t)
    console.print(f"captures: {captures_line(run)}")
    console.print(f"embed backlog: {backlog_line(run)}")
    console.print(f"CPU (cores): {cpu_line(run)}")
    if run is not base:
        console.print(
            f"retrieve against {base.provider}: p50 {_ratio(run, base, 50):.2f}x (target ≤ {TARGET_P50}x), "
            f"p99 {_ratio(run, base, 99):.2f}x (target ≤ {TARGET_P99}x)"
        )


def report(runs: list[Run], argv: str, hw: str) -> str:
    """The run as a markdown block for docs/benchmarks.md."""
    base = runs[0]
    load = "; ".join(f"{r.provider} {' -> '.join(r.load)}" for r in runs)
    lines = [
        MARK_START,
        f"Command: `{argv}`  ",
        f"Hardware: {hw}  ",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; a fresh stack per provider, "
        f"the `{base.provider}` run the baseline; 1-minute load average {load}",
        "",
        "| embedding | request | answered | per s | p50 | p99 | p50 / p99 against baseline | target |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for r in runs:
        for kind, n, rate, p50, p99 in kinds_rows(r):
            against, target = "", ""
            if kind == "retrieve":
                if r is base:
                    against, target = "1.00x / 1.00x", "baseline"
                else:
                    against = f"{_ratio(r, base, 50):.2f}x / {_ratio(r, base, 99):.2f}x"
                    target = f"≤ {TARGET_P50}x / ≤ {TARGET_P99}x"
            lines.append(f"| {r.provider} | {kind} | {n} | {rate} | {p50} | {p99} | {against} | {target} |")
    lines.append("")
    for r in runs:
        lines += [
            f"`{r.provider}`: captures {captures_line(r)}.  ",
            f"Embed backlog: {backlog_line(r)}.  ",
            f"CPU, cores over the load: {cpu_line(r)}.  ",
        ]
    lines[-1] = lines[-1].rstrip()
    lines.append(MARK_END)
    return "\n".join(lines)
