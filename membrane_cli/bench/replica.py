"""``membrane bench retrieve --replica``: hybrid retrieval served by a streaming replica beside
the same retrieval served by the primary, under a concurrent capture load (RFC 13.2, 14.1).

The store of ``bench retrieve`` is built on the embedded primary; a hot standby is made of
it with ``pg_basebackup`` (``membrane_core.storage.standby``). A second process writes
captures through the library at ``--load-rate`` per second for as long as the queries run.
Every query runs twice, in an order drawn per query: through a store that reads the
replica (a sample counts as replica-served only when its answer says so) and through one
that reads the primary. The replica's replay lag is sampled every half second. Targets are
reported, never asserted: replica-served p99 within 1.2x of primary-served.
"""

from __future__ import annotations

import multiprocessing as mp
import random
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import typer
from rich.console import Console
from rich.table import Table

from membrane_cli import bench
from membrane_cli.bench.ingest import hardware
from membrane_core import Membrane, Settings
from membrane_core.requests import RetrieveRequest, parse
from membrane_core.retrieval.retriever import Retriever
from membrane_core.storage import replica as replication
from membrane_core.storage import standby
from membrane_core.storage.db import Database
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()

#: RFC 13.2, 14.1: replica-served p99 within this of primary-served, in the same run.
TARGET_RATIO = 1.2
MARK_START, MARK_END = "<!-- bench-replica:start -->", "<!-- bench-replica:end -->"
#: Captures a load batch writes.
BATCH = 100


@dataclass
class ReplicaFigures:
    """One run: latencies (ms) by server, fallbacks, lag samples, and the load achieved."""

    replica: list[float] = field(default_factory=list)
    primary: list[float] = field(default_factory=list)
    fell_back: int = 0
    lag_seconds: list[float] = field(default_factory=list)
    lag_bytes: list[int] = field(default_factory=list)
    captures: int = 0
    load_seconds: float = 0.0
    loadavg: list[str] = field(default_factory=list)


def _load(dsn: str, folder: str, dim: int, rate: int, stop: Any, done: Any) -> None:
    """A capture load in a process of its own: ``rate`` captures a second in batches, until
    ``stop`` is set; the captures written go to ``done``."""
    settings = Settings(
        database_url=dsn,
        data_dir=Path(folder),
        embedding_dim=dim,
        embedding_provider="none",
        llm_provider="none",
        request_pool_timeout_seconds=30,
    )
    written, n = 0, 0
    with Membrane(settings) as m:
        start = time.monotonic()
        while not stop.is_set():
            batch = [
                {
                    "source_kind": "event",
                    "scope": f"load-{(n + i) % 20}",
                    "content": {"text": f"load event {n + i}: the build of service {(n + i) % 97} finished"},
                }
                for i in range(BATCH)
            ]
            m.capture_many(batch)
            n += BATCH
            written += BATCH
            ahead = start + written / rate - time.monotonic()
            if ahead > 0:
                time.sleep(ahead)
    done.put(written)


def _sample_lag(db: Database, primary: Database, stop: threading.Event, f: ReplicaFigures) -> None:
    while not stop.wait(0.5):
        seen = db.monitor.sample if db.monitor is not None else None
        if seen is None or seen.replayed is None:
            continue
        f.lag_seconds.append(seen.lag_seconds or 0.0)
        with primary.transaction() as conn:
            head = replication.position(conn)
        f.lag_bytes.append(max(0, head - seen.replayed))


def measure(
    folder: Path,
    dsn: str,
    dim: int,
    queries: list[tuple[str, str, list[float]]],
    warmup: int,
    embedder: Any,
    rate: int,
    loadavg: Any,
) -> ReplicaFigures:
    """RFC 13.2: the queries through the replica and through the primary under the load."""
    f = ReplicaFigures()
    made = standby.make(folder, folder / "standby")
    try:
        on_replica = Database(
            dsn, embedding_dim=dim, read_dsn=standby_url(made.dsn, dsn), min_size=1, max_size=2
        )
        on_primary = Database(dsn, embedding_dim=dim, min_size=1, max_size=2)
        clock = lambda: datetime.now(UTC)  # noqa: E731
        retrievers = {
            "replica": Retriever(on_replica, clock=clock, embedder=embedder),
            "primary": Retriever(on_primary, clock=clock, embedder=embedder),
        }
        ctx = mp.get_context("spawn")
        stop, done = ctx.Event(), ctx.Queue()
        loader = ctx.Process(target=_load, args=(dsn, str(folder / "load"), dim, rate, stop, done))
        stop_lag = threading.Event()
        sampler = threading.Thread(
            target=_sample_lag, args=(on_replica, on_primary, stop_lag, f), daemon=True
        )
        try:
            loader.start()
            time.sleep(2.0)  # the load running before the first query
            sampler.start()
            f.loadavg.append(loadavg())
            t0 = time.monotonic()
            order = random.Random(len(queries))
            for n, (scope, text, _) in enumerate(queries):
                req = parse(RetrieveRequest, {"query": text, "scopes": [scope], "limit": 10})
                names = list(retrievers)
                order.shuffle(names)
                for name in names:
                    t = time.perf_counter()
                    got = retrievers[name].retrieve(req, DEVELOPMENT_POLICY)
                    ms = (time.perf_counter() - t) * 1000
                    if n < warmup:
                        continue
                    if name == "primary":
                        f.primary.append(ms)
                    elif got.diagnostics.served_by == "replica":
                        f.replica.append(ms)
                    else:
                        f.fell_back += 1
            f.load_seconds = time.monotonic() - t0 + 2.0
            f.loadavg.append(loadavg())
        finally:
            stop.set()
            stop_lag.set()
            loader.join(60)
            if not done.empty():
                f.captures = int(done.get())
            on_replica.close()
            on_primary.close()
    finally:
        standby.drop(folder, made)
    return f


def standby_url(standby_dsn: str, database_dsn: str) -> str:
    """The standby's URL for the database ``database_dsn`` names."""
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    info = conninfo_to_dict(standby_dsn)
    info["dbname"] = conninfo_to_dict(database_dsn)["dbname"]
    return make_conninfo("", **info)


_pct = bench.percentile


def rows(f: ReplicaFigures) -> list[tuple[str, int, float, float, str, str]]:
    """Served by, samples, p50, p99 (ms), p99 against the primary's, target."""
    base = _pct(f.primary, 99)
    return [
        ("primary", len(f.primary), _pct(f.primary, 50), base, "1.00x", "baseline"),
        (
            "replica",
            len(f.replica),
            _pct(f.replica, 50),
            _pct(f.replica, 99),
            f"{_pct(f.replica, 99) / base:.2f}x",
            f"p99 ≤ {TARGET_RATIO:g}x primary",
        ),
    ]


def report(f: ReplicaFigures, size: int, argv: str) -> str:
    """The run as a markdown block for docs/benchmarks.md."""
    rate = f.captures / f.load_seconds if f.load_seconds else 0.0
    lag_s = sorted(f.lag_seconds) or [float("nan")]
    lag_b = sorted(f.lag_bytes) or [0]
    lines = [
        MARK_START,
        f"Command: `{argv}`  ",
        f"Hardware: {hardware()}  ",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {size:,} records, every query "
        f"through the replica and through the primary in an order drawn per query, under a capture "
        f"load of {rate:,.0f} committed captures/s ({f.captures:,} in {f.load_seconds:.0f} s), load "
        f"average {' -> '.join(f.loadavg)}  ",
        "",
        "| served by | samples | p50 | p99 | p99 / primary p99 | target |",
        "| --- | --- | --- | --- | --- | --- |",
        *(f"| {r[0]} | {r[1]} | {r[2]:.2f} ms | {r[3]:.2f} ms | {r[4]} | {r[5]} |" for r in rows(f)),
        "",
        f"Replica answers that fell back to the primary: {f.fell_back}.  ",
        f"Replay lag over {len(f.lag_seconds)} samples: median {lag_s[len(lag_s) // 2]:.2f} s, "
        f"max {lag_s[-1]:.2f} s; median {lag_b[len(lag_b) // 2]:,} bytes behind, max {lag_b[-1]:,}.",
        MARK_END,
    ]
    return "\n".join(lines)


def refuse_with(replica: bool, other: bool) -> None:
    """``--replica`` runs alone, on the embedded server's store."""
    if replica and other:
        console.print("[red]--replica measures the embedded server's store alone[/red]")
        raise typer.Exit(2)


def run(
    folder: Path,
    dsn: str,
    dim: int,
    queries: list[tuple[str, str, list[float]]],
    warmup: int,
    embedder: Any,
    rate: int,
    loadavg: Any,
    size: int,
    argv: str,
    markdown: Path | None,
) -> None:
    """Measure, print, and write the block into ``markdown`` when given."""
    f = measure(folder, dsn, dim, queries, warmup, embedder, rate, loadavg)
    print_figures(f)
    if markdown:
        bench.write_markdown(
            markdown,
            report(f, size, argv),
            start=MARK_START,
            end=MARK_END,
            heading="Retrieval from a replica (`membrane bench retrieve --replica`)",
        )
        console.print(f"wrote {markdown}")


def print_figures(f: ReplicaFigures) -> None:
    table = Table(title="hybrid retrieve by the server that served it (RFC 13.2)")
    for col in ("served by", "samples", "p50", "p99", "p99 / primary", "target"):
        table.add_column(col)
    for r in rows(f):
        table.add_row(r[0], str(r[1]), f"{r[2]:.2f} ms", f"{r[3]:.2f} ms", r[4], r[5])
    console.print(table)
    rate = f.captures / f.load_seconds if f.load_seconds else 0.0
    console.print(
        f"load: {f.captures:,} captures in {f.load_seconds:.0f} s ({rate:,.0f}/s); "
        f"fell back: {f.fell_back}; lag samples: {len(f.lag_seconds)}, "
        f"max {max(f.lag_seconds, default=0.0):.2f} s"
    )
