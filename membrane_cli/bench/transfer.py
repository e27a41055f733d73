"""``membrane bench transfer`` and ``membrane bench erase`` (RFC 14.1, 15).

transfer: N synthetic records (as ``bench list`` loads them, each with its create entry) are
exported (every scope) and imported into an empty database, each beside a raw ``COPY TO``
of the same tables and a raw ``COPY FROM`` of those rows into another empty database, in the
same run. Rows per second count the lines each side writes (an export writes a payload in its
record's line, raw COPY as a row of its own); the speed ratio is of times, for the same
records. Target: the export and the import at least a quarter of the raw COPY's speed.

erase: N records over scopes of S records each; a thread captures one observation at a time
into the other scopes, first alone, then while one scope is erased; the erasure's time and
the captures' p50 and p99 before and during it.
"""

from __future__ import annotations

import statistics
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated

import psycopg
import typer
from psycopg import sql
from pydantic import SecretStr
from rich.console import Console

from membrane_cli import bench
from membrane_cli.bench import listing as listbench
from membrane_cli.bench import load as benchload
from membrane_cli.bench import retrieve as synthetic
from membrane_cli.bench.ingest import hardware
from membrane_cli.bench.queries import q
from membrane_core import Membrane
from membrane_core.storage import embedded, migrate
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

console = Console()

#: RFC 15.1: the tables an export reads rows of, in the order a raw COPY FROM loads them.
TABLES = (
    "memory_records",
    "record_payloads",
    "record_tags",
    "provenance_sources",
    "relations",
    "entity_terms",
    "entity_identifiers",
    "audit_log",
    "fact_tombstones",
)
#: RFC 14.1: an export and an import at least a quarter of raw COPY's rows per second.
TARGET = 0.25
TRANSFER_MARKS = ("<!-- bench-transfer:start -->", "<!-- bench-transfer:end -->")
ERASE_MARKS = ("<!-- bench-erase:start -->", "<!-- bench-erase:end -->")
ERASER = TrustPolicy(actor="bench", operator=True, erase=True)


@dataclass
class Rate:
    """Rows moved and the seconds it took."""

    rows: int
    seconds: float

    @property
    def per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def _load(dsn: str, records: int, scopes: int) -> float:
    """The synthetic records, then a create entry for each (RFC 5.5), as ``bench list`` loads them."""
    t0 = time.perf_counter()
    listbench._load(dsn, records, scopes, synthetic._scope(0))
    with psycopg.connect(dsn) as conn:
        for i in range(1, scopes):
            conn.execute(q("bench_list_audit"), {"scope": synthetic._scope(i)})
    return time.perf_counter() - t0


def _raw_out(dsn: str, folder: Path) -> Rate:
    """RFC 14.1: ``COPY <table> TO STDOUT`` of every table an export reads, into files."""
    folder.mkdir(parents=True)
    rows = 0
    t0 = time.perf_counter()
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        for table in TABLES:
            with (
                (folder / table).open("wb") as out,
                cur.copy(sql.SQL("COPY {} TO STDOUT").format(sql.Identifier(table))) as copy,
            ):
                for block in copy:
                    out.write(block)
                    rows += bytes(block).count(b"\n")
    return Rate(rows, time.perf_counter() - t0)


def _raw_in(dsn: str, folder: Path) -> Rate:
    """RFC 14.1: ``COPY <table> FROM STDIN`` of those files into an empty store, one transaction."""
    rows = 0
    t0 = time.perf_counter()
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        for table in TABLES:
            data = (folder / table).read_bytes()
            rows += data.count(b"\n")
            with cur.copy(sql.SQL("COPY {} FROM STDIN").format(sql.Identifier(table))) as copy:
                copy.write(data)
    return Rate(rows, time.perf_counter() - t0)


def _empty(admin: str, name: str, dim: int) -> str:
    dsn = benchload.create_database(admin, name, drop=True)
    migrate.migrate(dsn, dim)
    return dsn


@dataclass
class TransferFigures:
    records: int
    scopes: int
    load_seconds: float = 0.0
    export: Rate = field(default_factory=lambda: Rate(0, 0.0))
    raw_out: Rate = field(default_factory=lambda: Rate(0, 0.0))
    import_: Rate = field(default_factory=lambda: Rate(0, 0.0))
    raw_in: Rate = field(default_factory=lambda: Rate(0, 0.0))
    loadavg: list[str] = field(default_factory=list)


def _transfer(folder: Path, records: int, scopes: int) -> TransferFigures:
    f = TransferFigures(records, scopes)
    settings = listbench._settings(folder / "store")
    with Membrane(settings) as m:
        dsn = embedded.dsn(folder / "store")
        f.load_seconds = _load(dsn, records, scopes)
        benchload.warm_os_cache(dsn)
        f.loadavg.append(synthetic.loadavg())
        with console.status("raw COPY TO"):
            f.raw_out = _raw_out(dsn, folder / "raw")
        with console.status("membrane export"):
            t0 = time.perf_counter()
            manifest = m.transfer.export({}, DEVELOPMENT_POLICY, folder / "bundle")
            f.export = Rate(sum(x.rows for x in manifest.files), time.perf_counter() - t0)
        admin = dsn
        dim = settings.embedding_dim
        with console.status("raw COPY FROM"):
            f.raw_in = _raw_in(_empty(admin, "bench_raw_in", dim), folder / "raw")
        target = _empty(admin, "bench_import", dim)
        target_settings = settings.model_copy(update={"database_url": SecretStr(target)})
        with Membrane(target_settings) as t, console.status("membrane import"):
            t0 = time.perf_counter()
            t.transfer.import_bundle(folder / "bundle", DEVELOPMENT_POLICY)
            f.import_ = Rate(f.export.rows, time.perf_counter() - t0)
        f.loadavg.append(synthetic.loadavg())
    return f


def _transfer_report(f: TransferFigures, argv: str) -> str:
    def line(case: str, r: Rate, base: Rate | None) -> str:
        # the same records either way: the ratio is of their times (raw COPY counts a payload as
        # a row of its own, an export writes it in its record's line)
        ratio = f"{base.seconds / r.seconds:.2f}x" if base and r.seconds else "1.00x (baseline)"
        target = f"≥ {TARGET:.2f}x" if base else ""
        return f"| {case} | {r.rows:,} | {r.seconds:.1f} s | {r.per_second:,.0f} | {ratio} | {target} |"

    return "\n".join(
        [
            TRANSFER_MARKS[0],
            f"Command: `{argv}`  ",
            f"Hardware: {hardware()}  ",
            f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {f.records:,} records over "
            f"{f.scopes} scopes, each with its create entry; load average {' -> '.join(f.loadavg)}  ",
            "",
            "| case | rows | time | rows/s | speed against raw COPY | target |",
            "| --- | --- | --- | --- | --- | --- |",
            line("raw COPY TO (the same tables)", f.raw_out, None),
            line("membrane export (every scope)", f.export, f.raw_out),
            line("raw COPY FROM (into an empty store)", f.raw_in, None),
            line("membrane import (into an empty store)", f.import_, f.raw_in),
            "",
            f"Load: {f.load_seconds:.0f} s",
            TRANSFER_MARKS[1],
        ]
    )


def transfer(
    records: Annotated[int, typer.Option(min=1000, help="Synthetic records to load.")] = 1_000_000,
    scopes: Annotated[int, typer.Option(min=1, help="Scopes the records spread over.")] = 20,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
) -> None:
    """RFC 15.1, 15.2, 14.1: export and import beside raw COPY TO and COPY FROM of the same tables."""
    with bench.temp_store("transfer", "store") as folder:
        f = _transfer(folder, records, scopes)
    block = _transfer_report(f, f"membrane bench transfer --records {records} --scopes {scopes}")
    console.print(block, highlight=False)
    if markdown:
        bench.write_markdown(
            markdown, block, start=TRANSFER_MARKS[0], end=TRANSFER_MARKS[1], heading="Export and import"
        )


@dataclass
class EraseFigures:
    records: int
    scope_size: int
    erased: int = 0
    dry_seconds: float = 0.0
    erase_seconds: float = 0.0
    before: list[float] = field(default_factory=list)
    during: list[float] = field(default_factory=list)
    loadavg: list[str] = field(default_factory=list)


def _captures(m: Membrane, scopes: int, stop: threading.Event, out: list[float]) -> None:
    """One observation at a time into the scopes other than the first, each latency in ms."""
    n = 0
    while not stop.is_set():
        n += 1
        scope = synthetic._scope(1 + n % max(1, scopes - 1))
        t0 = time.perf_counter()
        m.captures.capture_many(
            [
                {
                    "source_kind": "observation",
                    "scope": scope,
                    "content": {"subject": f"s{n}", "predicate": "is", "object": f"o{n}"},
                }
            ],
            DEVELOPMENT_POLICY,
        )
        out.append((time.perf_counter() - t0) * 1000)


def _erase(folder: Path, records: int, scope_size: int, window: float) -> EraseFigures:
    scopes = max(2, records // scope_size)
    f = EraseFigures(records, scope_size)
    with Membrane(listbench._settings(folder / "store")) as m:
        dsn = embedded.dsn(folder / "store")
        _load(dsn, records, scopes)
        benchload.warm_os_cache(dsn)
        f.loadavg.append(synthetic.loadavg())
        stop = threading.Event()
        before: list[float] = []
        thread = threading.Thread(target=_captures, args=(m, scopes, stop, before))
        thread.start()
        time.sleep(window)
        stop.set()
        thread.join()
        f.before = before
        request = {"scope": synthetic._scope(0), "reason": "benchmark"}
        stop = threading.Event()
        during: list[float] = []
        thread = threading.Thread(target=_captures, args=(m, scopes, stop, during))
        thread.start()
        t0 = time.perf_counter()
        dry = m.erasure.erase(request, ERASER)
        f.dry_seconds = time.perf_counter() - t0
        t0 = time.perf_counter()
        done = m.erasure.erase({**request, "dry_run": False, "confirm": dry.confirm}, ERASER)
        f.erase_seconds = time.perf_counter() - t0
        stop.set()
        thread.join()
        f.during = during
        f.erased = done.counts["memory_records"]
        f.loadavg.append(synthetic.loadavg())
    return f


def _erase_report(f: EraseFigures, argv: str) -> str:
    def pct(v: list[float], p: float) -> str:
        return f"{synthetic._pct(v, p):.1f} ms" if v else "-"

    ratio = synthetic._pct(f.during, 99) / synthetic._pct(f.before, 99) if f.before and f.during else 0.0
    return "\n".join(
        [
            ERASE_MARKS[0],
            f"Command: `{argv}`  ",
            f"Hardware: {hardware()}  ",
            f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {f.records:,} records, "
            f"one scope of {f.erased:,} erased while a thread captures into the others; "
            f"load average {' -> '.join(f.loadavg)}  ",
            "",
            f"Erasure: dry run {f.dry_seconds:.1f} s, erasure {f.erase_seconds:.1f} s "
            f"({f.erased / f.erase_seconds:,.0f} records/s)"
            if f.erase_seconds
            else "Erasure: -",
            "",
            "| captures in other scopes | n | p50 | p99 |",
            "| --- | --- | --- | --- |",
            *(
                f"| {label} | {len(v)} | {pct(v, 50)} | {pct(v, 99)} |"
                for label, v in (
                    ("before the erasure (baseline)", f.before),
                    ("during the dry run and the erasure", f.during),
                )
            ),
            "",
            f"p99 during / before: {ratio:.2f}x; median during: "
            f"{statistics.median(f.during) if f.during else 0:.1f} ms",
            ERASE_MARKS[1],
        ]
    )


def erase(
    records: Annotated[int, typer.Option(min=1000, help="Synthetic records to load.")] = 1_000_000,
    scope_size: Annotated[
        int, typer.Option(min=100, help="Records a scope holds; the first is erased.")
    ] = 100_000,
    window: Annotated[
        float, typer.Option(min=1.0, help="Seconds of captures measured before the erasure.")
    ] = 20.0,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
) -> None:
    """RFC 15.4, 14.1: erase a scope while captures go on in the others; their p99 before and during."""
    with bench.temp_store("erase", "store") as folder:
        f = _erase(folder, records, scope_size, window)
    block = _erase_report(
        f, f"membrane bench erase --records {records} --scope-size {scope_size} --window {window:g}"
    )
    console.print(block, highlight=False)
    if markdown:
        bench.write_markdown(markdown, block, start=ERASE_MARKS[0], end=ERASE_MARKS[1], heading="Erasure")


def register(app: typer.Typer) -> None:
    """Add ``transfer`` and ``erase`` to the ``bench`` group (RFC 14.1)."""
    app.command("transfer")(transfer)
    app.command("erase")(erase)
