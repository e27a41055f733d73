"""``membrane bench scale``: one store grown through several sizes, measured at each (RFC 14.1).

A fresh store (embedded Postgres in a temporary folder, the settings a new user gets) is
grown to each of ``--sizes`` episodes with ``COPY`` (:mod:`membrane_cli.bench.scale_store`:
Zipf-distributed scopes, text of realistic length, tags, provenance, entities, relations,
audit entries, decay checkpoints, a share of the episodes with a vector), its search
indexes built again after each growth as a restore builds them. At each size, in order:

- ingest: ``--captures`` captures (the mix of ``bench ingest``, into Zipf-drawn scopes)
  through the real path, ``Membrane.inbox.submit_captures`` then
  ``InboxWorker.process_captures`` in batches of ``--capture-batch``, in this process;
- hybrid retrieval (a fixed query vector, so the model is not timed) over one scope and over
  ten, the same queries at every size, both variants per query in an order drawn per query
  after ``--warmup`` unmeasured queries;
- ``Membrane.listing.records``: the first page of the largest scope, ``--rounds`` times;
- the decay and the prune sweeps: ``--due`` records of each due (as ``bench maintenance``
  makes them due), then ``Maintenance.run`` batches until one claims nothing;
- disk bytes by table and index, autovacuum's counters and any vacuum running.

Then the growth table (each figure's ratio, last size to first) and a projection to 100M
and 1B records. Targets are reported, never asserted.
"""

from __future__ import annotations

import random
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import psycopg
import typer
from rich.console import Console

from membrane_cli import bench
from membrane_cli.bench import fresh_store, ingest, maintenance
from membrane_cli.bench import load as benchload
from membrane_cli.bench import retrieve as synthetic
from membrane_cli.bench import scale_report as rep
from membrane_cli.bench import scale_store as store
from membrane_core import Membrane, Settings, errors
from membrane_core.requests import RetrieveRequest, parse
from membrane_core.retrieval.retriever import Retriever
from membrane_core.storage import embedded
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()


@dataclass(frozen=True)
class Options:
    """The parameters of a run (RFC 14.1)."""

    sizes: tuple[int, ...]
    scopes: int
    zipf: float
    vector_share: float
    queries: int
    warmup: int
    captures: int
    capture_batch: int
    rounds: int
    due: int
    batch: int
    dim: int = 384
    clusters: int = 200
    seed: int = 11

    def argv(self) -> str:
        """The command that makes this run."""
        return (
            f"membrane bench scale --sizes {','.join(str(s) for s in self.sizes)} --scopes {self.scopes} "
            f"--zipf {self.zipf:g} --vector-share {self.vector_share:g} --queries {self.queries} "
            f"--warmup {self.warmup} --captures {self.captures} --rounds {self.rounds}"
        )


class Query:
    """One query of the run: its text and vector, its one scope and its ten."""

    def __init__(self, text: str, scopes: list[str]) -> None:
        self.one = parse(RetrieveRequest, {"query": text, "scopes": scopes[:1], "limit": 10})
        self.ten = parse(RetrieveRequest, {"query": text, "scopes": scopes, "limit": 10})


def _queries(world: store.World, n: int, embedder: synthetic.FixedEmbedder) -> list[Query]:
    """``n`` queries, the same at every size: scopes drawn by the Zipf law (traffic follows
    the data), a query about one of the first scope's topics."""
    rng = np.random.default_rng(world.seed + 2)
    out = []
    for i in range(n):
        ranks: list[int] = []
        while len(ranks) < 10:
            r = int(world.draw_scopes(rng, 1)[0])
            if r not in ranks:
                ranks.append(r)
        c = world.topic(ranks[0], int(rng.integers(0, store.TOPICS_PER_SCOPE)))
        words = [world.corpus.topics[c][int(j)] for j in rng.choice(6, 2, replace=False)]
        text = " ".join(words) + (f" and {world.corpus.entity_name(c)}" if i % 2 else "") + f" q{i}"
        embedder.vectors[text] = world.corpus.vector(c, rng, 1)[0].tolist()
        out.append(Query(text, [store.scope_name(r) for r in ranks]))
    return out


def _grow(dsn: str, world: store.World, start: int, stop: int) -> tuple[float, int, dict[str, float]]:
    """RFC 14.1: episodes ``start`` to ``stop`` by COPY, then the search indexes again and
    ANALYZE: the COPY's seconds, the records it wrote, the seconds of each index step."""
    benchload.drop_indexes(dsn)
    before = world.episodes + len(world.entities)
    t0 = time.perf_counter()
    with bench.progress(console, 34) as progress:
        task = progress.add_task(f"COPY to {stop:,} episodes", total=stop - start)
        store.load(
            dsn,
            store.chunks(world, start, stop, datetime.now(UTC)),
            lambda chunk: progress.advance(task, len(chunk.work) - len(chunk.tables["terms"])),
        )
    copy_s = time.perf_counter() - t0
    with console.status("building the GIN and HNSW indexes again, ANALYZE"):
        build = benchload.build_indexes(dsn)
    return copy_s, world.episodes + len(world.entities) - before, build


def _ingest(m: Membrane, world: store.World, n: int, batch: int, offset: int, p: rep.Point) -> None:
    """RFC 9.1: ``n`` captures through the inbox and the worker's write, committed."""
    rng = random.Random(offset)
    nprng = np.random.default_rng(offset)
    caps = [ingest.make_capture(offset + i, rng) for i in range(n)]
    for cap, rank in zip(caps, world.draw_scopes(nprng, n), strict=True):
        cap["scope"] = store.scope_name(int(rank))
    ok = 0
    t0 = time.perf_counter()
    for lo in range(0, n, batch):
        views = m.inbox.submit_captures(caps[lo : lo + batch], DEVELOPMENT_POLICY)
        summary = m.inbox_worker.process_captures([v.operation_id for v in views], worker="bench-scale")
        ok += summary["succeeded"]
    p.ingest_s = time.perf_counter() - t0
    p.captures = ok


def _retrieve(retriever: Retriever, queries: list[Query], warmup: int, p: rep.Point) -> None:
    """Both variants of every query in an order drawn per query; the first ``warmup`` unmeasured."""
    order = random.Random(len(queries))
    with bench.progress(console, 34) as progress:
        task = progress.add_task("queries (one scope, ten scopes)", total=len(queries))
        for n, query in enumerate(queries):
            variants = [("one", query.one), ("ten", query.ten)]
            order.shuffle(variants)
            for name, req in variants:
                t = time.perf_counter()
                retriever.retrieve(req, DEVELOPMENT_POLICY)
                ms = (time.perf_counter() - t) * 1000
                if n >= warmup:
                    (p.one if name == "one" else p.ten).append(ms)
            progress.advance(task)


def _page(m: Membrane, dsn: str, rounds: int, p: rep.Point) -> None:
    """RFC 10.7: the first page of the largest scope (Zipf rank 0), ``rounds`` times after 10 more."""
    p.page_scope = store.scope_name(0)
    p.page_scope_records = store.scope_records(dsn, p.page_scope)
    request: dict[str, Any] = {"scopes": [p.page_scope], "limit": 50}
    for n in range(rounds + 10):
        t = time.perf_counter()
        m.listing.records(request, DEVELOPMENT_POLICY)
        if n >= 10:
            p.page.append((time.perf_counter() - t) * 1000)


def _sweeps(m: Membrane, dsn: str, due: int, batch: int, seed: int, p: rep.Point) -> None:
    """RFC 6.5: ``due`` records due for decay and as many for pruning, made due as ``bench
    maintenance`` makes them, then each job's batches until one claims nothing."""
    rows = maintenance.Store(2 * due, due, datetime.now(UTC))
    rng = random.Random(seed)
    made = [rows._row(i, rng, i // due) for i in range(2 * due)]
    lines = {
        "records": [r.record for r in made],
        "payloads": [r.payload for r in made],
        "audit": [r.audit for r in made],
        "work": [w for r in made for w in r.work],
    }
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        for name, text in lines.items():
            with cur.copy(maintenance.COPIES[name]) as copy:
                copy.write("\n".join(text) + "\n")
    for job in ("decay", "prune"):
        t0, batches, items = time.perf_counter(), 0, 0
        while claimed := int(m.maintenance.run(job, limit=batch)["claimed"]):
            batches, items = batches + 1, items + claimed
        p.sweeps[job] = rep.Sweep(time.perf_counter() - t0, batches, items)


def _measure(
    m: Membrane,
    dsn: str,
    world: store.World,
    opts: Options,
    step: int,
    retrieval: tuple[Retriever, list[Query]],
) -> rep.Point:
    """Every figure at the size just reached (``step`` counts the sizes before it)."""
    point = rep.Point(opts.sizes[step])
    point.loadavg.append(synthetic.loadavg())
    with console.status(f"{opts.captures:,} captures through the inbox and the worker"):
        _ingest(m, world, opts.captures, opts.capture_batch, 10_000_000 * (step + 1), point)
    read = store.disk_read_bytes()
    _retrieve(*retrieval, opts.warmup, point)
    point.reads["queries"] = store.disk_read_bytes() - read
    with console.status("list pages, decay and prune sweeps"):
        _page(m, dsn, opts.rounds, point)
        read = store.disk_read_bytes()
        _sweeps(m, dsn, opts.due, opts.batch, opts.seed + step, point)
        point.reads["sweeps"] = store.disk_read_bytes() - read
    point.disk = store.disk(dsn)
    point.loadavg.append(synthetic.loadavg())
    return point


def _run(folder: Path, opts: Options, figures: rep.Figures) -> None:
    settings = fresh_store(Settings(embedding_provider="none", llm_provider="none"), folder)
    settings = settings.model_copy(update={"embedding_dim": opts.dim, "api_keys": {}, "api_keys_file": None})
    world = store.World(opts.scopes, opts.zipf, opts.vector_share, opts.dim, opts.clusters, opts.seed)
    embedder = synthetic.FixedEmbedder(opts.dim)
    queries = _queries(world, opts.queries + opts.warmup, embedder)
    with Membrane(settings) as m:
        dsn = embedded.dsn(folder)
        figures.shared_buffers = benchload.shared_buffers(dsn)
        retriever = Retriever(m.db, clock=lambda: datetime.now(UTC), embedder=embedder)
        loaded = 0
        for step, size in enumerate(opts.sizes):
            t0 = time.perf_counter()
            grown = _grow(dsn, world, loaded, size)
            loaded = size
            figures.vectors = world.vectors
            with console.status("waiting for autovacuum to catch up with the growth"):
                settled = store.settle(dsn)
            point = _measure(m, dsn, world, opts, step, (retriever, queries))
            point.copy_s, point.copied, point.build = grown
            point.settle_s, point.settled = settled
            point.wall_s = time.perf_counter() - t0
            figures.points.append(point)
            rep.print_point(console, point)
            _print_share(figures, point)


def _print_share(f: rep.Figures, p: rep.Point) -> None:
    """RFC 14.1: the share of the episodes with a vector, and what indexing them all would take."""
    hnsw = p.build.get("create_hnsw", 0.0)
    rate = f.vectors / hnsw if hnsw else 0.0
    line = f"vectors: {f.vectors:,} of {p.size:,} episodes ({f.vectors / p.size:.1%})"
    if rate:
        line += (
            f"; the HNSW index was built at {rate:,.0f} vectors/s, so indexing every episode "
            f"would take {p.size / rate / 60:,.0f} min at this size"
        )
    console.print(line, highlight=False)


def scale(
    sizes: Annotated[str, typer.Option(help="Checkpoint sizes in episodes, comma-separated.")] = (
        "1000000,3000000,10000000"
    ),
    scopes: Annotated[int, typer.Option(min=1, help="Scopes the episodes are drawn over (Zipf).")] = 100_000,
    zipf: Annotated[float, typer.Option(min=0.0, help="Exponent of the scopes' Zipf law.")] = 1.0,
    vector_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Share of the episodes with a vector: as many as this host indexes in the run's time.",
        ),
    ] = 0.05,
    queries: Annotated[int, typer.Option(min=1, help="Measured queries at each size.")] = 300,
    warmup: Annotated[int, typer.Option(min=0, help="Unmeasured queries first at each size.")] = 100,
    captures: Annotated[
        int, typer.Option(min=1, help="Captures through the real path at each size.")
    ] = 10_000,
    capture_batch: Annotated[
        int, typer.Option(min=1, max=1000, help="Captures per submit and write.")
    ] = 1000,
    rounds: Annotated[int, typer.Option(min=1, help="List pages read at each size.")] = 300,
    due: Annotated[int, typer.Option(min=1, help="Records due for decay, and as many for pruning.")] = 1000,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
) -> None:
    """RFC 14.1: a store grown to each size by COPY; ingest, retrieval, a list page, the sweeps,
    disk and autovacuum at each, their growth, and a projection to 100M and 1B records."""
    try:
        size_list = tuple(sorted({int(s) for s in sizes.split(",") if s.strip()}))
    except ValueError as exc:
        raise typer.BadParameter("sizes are whole numbers, comma-separated", param_hint="--sizes") from exc
    if not size_list or size_list[0] < 1000:
        raise typer.BadParameter("every size is at least 1,000 episodes", param_hint="--sizes")
    settings = Settings()
    opts = Options(
        size_list,
        scopes,
        zipf,
        vector_share,
        queries,
        warmup,
        captures,
        capture_batch,
        rounds,
        due,
        settings.batch_size,
    )
    figures = rep.Figures(argv=opts.argv(), scopes=scopes, vector_share=vector_share)
    try:
        with bench.temp_store("scale") as folder:
            _run(folder, opts, figures)
    except errors.MembraneError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    rep.print_figures(console, figures)
    if markdown:
        rep.write_markdown(markdown, rep.report(figures, ingest.hardware()))
        console.print(f"wrote {markdown}")


def register(app: typer.Typer) -> None:
    """Add ``scale`` to the ``bench`` group (RFC 14.1)."""
    app.command("scale")(scale)
