"""``membrane bench maintenance``: incremental batches against a full-scan sweep (RFC 6.5).

For each store size the command builds a scratch database with ``COPY`` (records,
payloads, create audit entries and one future ``decay`` item per record), in which
the SAME 1,000 due items of each kind (decay, prune, compress, consolidate) sit among
the rest. It then times the batches that clear them and, in the same run, a
full-scan sweep of the same store: every record read and its salience recomputed,
which is what Membrane's decay ticker does (before writing anything back). Figures
go to stdout as a Markdown table; nothing here is a pass/fail test.
"""

from __future__ import annotations

import json
import math
import random
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import psycopg
import typer
from psycopg import sql
from rich.console import Console
from rich.progress import Progress

from membrane_core import Membrane, Settings
from membrane_core.storage import db as storage_db
from membrane_core.storage import migrate

console = Console()
SEED = 6
SCOPES = 100
CHUNK = 20_000
FACT_POOL = 300
SIGNATURES = 40
TOOLS = ["search", "fetch", "parse", "summarise", "write_file", "run_tests", "deploy", "notify"]
JOBS = ("decay", "prune", "consolidate")


@dataclass
class Due:
    """The due records of one kind, identical for every store size (same seed)."""

    kind: str
    ids: list[uuid.UUID] = field(default_factory=list)


def _uuid(rng: random.Random) -> uuid.UUID:
    return uuid.UUID(int=rng.getrandbits(128), version=4)


def _ts(t: datetime) -> str:
    return t.isoformat()


def _episodic_body(i: int, rng: random.Random, *, rich: bool) -> str:
    body: dict[str, Any] = {
        "kind": "episodic",
        "source_kind": "event",
        "text": f"event {i}",
        "tool_calls": [],
        "entities": [],
        "data": {},
    }
    if rich:
        sig = random.Random(rng.randrange(SIGNATURES)).sample(TOOLS, 3 + i % 2)
        calls = []
        for n, tool in enumerate(sig):
            args = {"input": f"v{i}-{n - 1}"} if n else {"query": f"task {i % 50}"}
            calls.append({"tool": tool, "args": args, "result": {"output": f"v{i}-{n}"}})
        f = rng.randrange(FACT_POOL)
        body.update(
            outcome="success",
            tool_calls=calls,
            text=f"task {i % 50}",
            data={"facts": [{"subject": f"service-{f}", "predicate": "depends_on", "object": f"db-{f % 7}"}]},
        )
    return json.dumps(body, separators=(",", ":"))


@dataclass
class Row:
    """One generated record with its payload, audit entry and work items."""

    record: str
    payload: str
    audit: str
    work: list[str]


class Store:
    """Generates the rows of one store; the due records come first and do not depend on size."""

    def __init__(self, size: int, due: int, now: datetime) -> None:
        self.size, self.due, self.now = size, due, now
        self.kinds = [Due(k) for k in ("decay", "prune", "compress", "consolidate")]

    def rows(self) -> Iterator[Row]:
        due_rng, bg_rng = random.Random(SEED), random.Random(SEED + self.size)
        for i in range(self.size):
            slot = i // self.due if i < self.due * len(self.kinds) else None
            yield self._row(i, due_rng if slot is not None else bg_rng, slot)

    def _row(self, i: int, rng: random.Random, slot: int | None) -> Row:
        rid, now = _uuid(rng), self.now
        scope = f"scope-{(i % 10) if slot is not None else rng.randrange(SCOPES):03d}"
        kind = (
            "episodic" if slot is not None else rng.choices(["episodic", "semantic", "working"], [7, 2, 1])[0]
        )
        half = {"episodic": 3600, "semantic": 30 * 86400, "working": 86400}[kind]
        created = now - timedelta(seconds=rng.randrange(60, 3000))
        work_kind, due_at = "decay", now + timedelta(seconds=rng.randrange(600, 30 * 86400))
        if slot is not None:
            self.kinds[slot].ids.append(rid)
            work_kind = self.kinds[slot].kind
            due_at = now - timedelta(minutes=1)
            if work_kind == "decay":
                created = now - timedelta(minutes=90)
            elif work_kind == "prune":
                created = now - timedelta(hours=10)
            elif work_kind == "compress":
                created, half = now - timedelta(hours=25), 10 * 86400
        fact = ("\\N", "\\N", "\\N")
        if kind == "semantic":
            f = rng.randrange(FACT_POOL * 10)
            fact = (f"subject-{f}", "relates_to", f"object-{f % 97}")
            body = json.dumps(
                {"kind": "semantic", "subject": fact[0], "predicate": fact[1], "object": fact[2]},
                separators=(",", ":"),
            )
        elif kind == "working":
            body = json.dumps(
                {
                    "kind": "working",
                    "thread_id": f"t{i}",
                    "task_state": "executing",
                    "context_summary": f"step {i}",
                },
                separators=(",", ":"),
            )
        else:
            body = _episodic_body(i, rng, rich=work_kind == "consolidate")
        floor = 0.01 if kind != "semantic" else 0.05
        deletion = "manual_only" if kind == "semantic" else "auto_prune"
        c = _ts(created)
        record = "\t".join(
            [
                str(rid),
                kind,
                scope,
                "low",
                "0.8",
                "1",
                "active",
                str(half),
                str(floor),
                "\\N",
                "0.1",
                "1",
                c,
                "f",
                deletion,
                c,
                c,
                c,
                c,
                f"{kind} {i}",
                *fact,
                "900",
                f"{kind} {i} build deploy",
            ]
        )
        work = [f"{work_kind}\t{rid}\t{_ts(due_at)}"]
        if work_kind == "consolidate":  # its checkpoint too, as capture writes it
            work.append(f"decay\t{rid}\t{_ts(created + timedelta(hours=1))}")
        audit = f"{rid}\t{scope}\tlow\tcreate\tbench\t{c}\tcaptured\t{{}}"
        return Row(record, f"{rid}\t{kind}\t{body}", audit, work)


COPIES = {
    "records": "COPY memory_records (id, type, scope, sensitivity, confidence, salience, status, "
    "half_life_seconds, min_salience, max_age_seconds, reinforcement_gain, base_salience, "
    "reinforced_at, pinned, deletion_policy, recorded_at, created_at, updated_at, "
    "occurred_at, summary, fact_subject, fact_predicate, fact_object, projected_bytes, "
    "search_text) FROM STDIN",
    "payloads": "COPY record_payloads (record_id, kind, body) FROM STDIN",
    "audit": "COPY audit_log (record_id, scope, sensitivity, action, actor, ts, rationale, details) "
    "FROM STDIN",
    "work": "COPY work_items (kind, target_id, due_at) FROM STDIN",
}


def build(dsn: str, store: Store, progress: Progress) -> None:
    """Fill the scratch database with COPY, in chunks, then VACUUM ANALYZE it."""
    task = progress.add_task(f"building {store.size:,} records", total=store.size)
    buffers: dict[str, list[str]] = {k: [] for k in COPIES}
    with psycopg.connect(dsn) as conn:

        def flush() -> None:
            with conn.cursor() as cur:
                for name, lines in buffers.items():
                    if lines:
                        with cur.copy(COPIES[name]) as copy:
                            copy.write("\n".join(lines) + "\n")
                        lines.clear()
            conn.commit()

        for n, row in enumerate(store.rows(), 1):
            buffers["records"].append(row.record)
            buffers["payloads"].append(row.payload)
            buffers["audit"].append(row.audit)
            buffers["work"].extend(row.work)
            if n % CHUNK == 0:
                flush()
                progress.update(task, completed=n)
        flush()
        progress.update(task, completed=store.size)
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute("VACUUM ANALYZE")


def full_sweep(dsn: str, now: datetime) -> tuple[float, int]:
    """Membrane's sweep: read every record and recompute its salience (no writes); seconds, rows."""
    started = time.perf_counter()
    n = 0
    with psycopg.connect(dsn) as conn, conn.transaction(), conn.cursor(name="sweep") as cur:
        cur.itersize = 10_000
        cur.execute(
            "SELECT id, base_salience, reinforced_at, half_life_seconds, min_salience, "
            "pinned FROM memory_records"
        )
        for _, base, at, half, floor, pinned in cur:
            elapsed = max(0.0, (now - at).total_seconds())
            _ = base if pinned else max(min(base, floor), base * math.pow(2.0, -elapsed / half))
            n += 1
    return time.perf_counter() - started, n


def run_jobs(membrane: Membrane, batch: int) -> dict[str, tuple[float, int, int]]:
    """Time each job's batches until nothing of its kind is due: ``{job: (s, batches, items)}``."""
    out = {}
    for job in JOBS:
        started, batches, items = time.perf_counter(), 0, 0
        while True:
            result = membrane.maintenance.run(job, limit=batch)
            claimed = (
                result["compress"]["claimed"] + result["consolidate"]["claimed"]
                if job == "consolidate"
                else result["claimed"]
            )
            if not claimed:
                break
            batches, items = batches + 1, items + claimed
        out[job] = (time.perf_counter() - started, batches, items)
    return out


def _with_db(dsn: str, name: str) -> str:
    info = psycopg.conninfo.conninfo_to_dict(dsn)
    info["dbname"] = name
    return psycopg.conninfo.make_conninfo("", **info)


def create_store(admin: str, settings: Settings, size: int, due: int, progress: Progress) -> str:
    """A fresh scratch database holding ``size`` records; returns its URL."""
    name = f"membrane_bench_maint_{size}"
    drop_store(admin, size)
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
    dsn = _with_db(admin, name)
    migrate.migrate(dsn, settings.embedding_dim)
    build(dsn, Store(size, due, datetime.now(UTC)), progress)
    return dsn


def drop_store(admin: str, size: int) -> None:
    """Drop the scratch database of ``size`` if it exists."""
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(
            sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(
                sql.Identifier(f"membrane_bench_maint_{size}")
            )
        )


def measure(dsn: str, settings: Settings, size: int, batch: int) -> dict[str, Any]:
    """Time the batches that clear the due items, and the full-scan sweep before and after."""
    sweep = full_sweep(dsn, datetime.now(UTC))
    database = storage_db.Database(
        dsn, embedding_dim=settings.embedding_dim, run_migrations=False, min_size=1, max_size=2
    )
    with Membrane(settings, database=database) as membrane:
        jobs = run_jobs(membrane, batch)
    sweep_after = full_sweep(dsn, datetime.now(UTC))
    return {"size": size, "jobs": jobs, "sweep": min(sweep[0], sweep_after[0]), "rows": sweep[1]}


def report(results: list[dict[str, Any]], due: int, batch: int) -> str:
    """The figures as a Markdown table, smallest store first, with ratios to it."""
    base = results[0]
    lines = [
        f"{due:,} due items of each kind (decay, prune, compress + consolidate), batch size {batch}.",
        "",
        "| store | decay | prune | consolidate | incremental total | full-scan sweep |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in results:
        total = sum(t for t, _, _ in r["jobs"].values())
        base_total = sum(t for t, _, _ in base["jobs"].values())
        cells = [f"{r['jobs'][j][0] * 1000:,.0f} ms" for j in JOBS]
        lines.append(
            f"| {r['size']:,} | "
            + " | ".join(cells)
            + f" | {total * 1000:,.0f} ms ({total / base_total:.2f}x)"
            + f" | {r['sweep'] * 1000:,.0f} ms ({r['sweep'] / base['sweep']:.1f}x) |"
        )
    return "\n".join(lines)


def register(app: typer.Typer) -> None:
    """Add ``maintenance`` to the ``bench`` group (RFC 6.5)."""

    @app.command("maintenance")
    def maintenance(
        sizes: Annotated[str, typer.Option(help="Store sizes, comma-separated.")] = "10000,1000000",
        due: Annotated[int, typer.Option(help="Due items of each kind.")] = 1000,
        batch: Annotated[int | None, typer.Option(help="Batch size (default MEMBRANE_BATCH_SIZE).")] = None,
        keep: Annotated[bool, typer.Option(help="Keep the scratch databases.")] = False,
    ) -> None:
        """Time decay, prune and consolidation batches against a full-scan sweep (RFC 6.5)."""
        settings = Settings()
        size_list = sorted(int(s) for s in sizes.split(",") if s.strip())
        if not size_list or size_list[0] < due * 4:
            raise typer.BadParameter(
                f"every size must hold the {due * 4:,} due records", param_hint="--sizes"
            )
        admin = storage_db.resolve_dsn(settings.database_dsn(), settings.data_dir)
        batch_size = batch or settings.batch_size
        try:
            # every store is built first, so that all are measured back to back
            with Progress(console=console) as progress:
                stores = {size: create_store(admin, settings, size, due, progress) for size in size_list}
            # largest first: whatever warm-up cost there is counts against the large store
            measured = {
                size: measure(stores[size], settings, size, batch_size) for size in reversed(size_list)
            }
            results = [measured[size] for size in size_list]
        finally:
            if not keep:
                for size in size_list:
                    drop_store(admin, size)
        for r in results:
            jobs = ", ".join(f"{j} {n} items in {b} batches" for j, (_, b, n) in r["jobs"].items())
            console.print(f"[bold]{r['size']:,}[/]: {jobs}; sweep read {r['rows']:,} rows")
        console.print(report(results, due, batch_size), markup=False)
