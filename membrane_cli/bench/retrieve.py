"""``membrane bench retrieve``: hybrid retrieval latency beside a bare pgvector top-10 (RFC 14.1).

Builds N synthetic records (clustered embeddings, cluster-topical text, entities with
mentions, record-to-record relations) with one COPY per table into a dedicated database,
then runs the same queries three ways in the same run, interleaved: the bare pgvector
top-10 (``ORDER BY embedding <=> q LIMIT 10`` under the same scope filter and iterative
scan), hybrid retrieve with a scope filter, and hybrid retrieve with one-hop expansion.
Latencies are end to end in this process (Python, driver, Postgres). ``--sealed-share``
loads that share of the episodes at ``hyper``, sealed as a capture seals them (RFC 7.6),
and retrieves with the key ring that opens them. ``--proposed-share`` also copies the loaded
store on the same server with that share of its records proposed (RFC 5.7) and runs every
query three ways on both stores, the six in an order drawn per query. Targets are reported,
never asserted.
"""

from __future__ import annotations

import base64
import functools
import json
import math
import os
import random
import shutil
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from membrane_cli import bench
from membrane_cli.bench import load as benchload
from membrane_cli.bench import proposed as proposed_store
from membrane_cli.bench import replica as replica_bench
from membrane_cli.bench.ingest import hardware
from membrane_core import errors
from membrane_core.requests import RetrieveRequest, parse
from membrane_core.retrieval.retriever import Retriever
from membrane_core.sealing import NO_KEYS, Sealer, ring_from_config
from membrane_core.storage import embedded, migrate
from membrane_core.storage.db import Database
from membrane_core.storage.rowbatch import sealed_content
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()

#: Targets on 2 cores (RFC 14.1): p99 by size, and hybrid within 3x of the bare query.
TARGET_P99_MS = {100_000: 25.0, 1_000_000: 50.0}
TARGET_RATIO = 3.0
MARK_START, MARK_END = "<!-- bench-retrieve:start -->", "<!-- bench-retrieve:end -->"
#: Tags of the synthetic records (RFC 2.1): a pipeline's handful of labels.
TAGS = ("inbox", "billing", "deploy", "support", "research", "incident", "followup", "weekly")
_SYLLABLES = ("ka", "lo", "mi", "ra", "ne", "to", "su", "vi", "de", "po", "ga", "ri", "zu", "fe", "ho", "la")


def word(i: int) -> str:
    """A pronounceable synthetic word: three syllables from ``i``."""
    return "".join(_SYLLABLES[(i >> s) & 15] for s in (8, 4, 0))


@dataclass
class Corpus:
    """The synthetic world: cluster centres, topic words and entity names."""

    dim: int
    clusters: int
    scopes: int
    seed: int
    centres: Any = None
    topics: list[list[str]] = field(default_factory=list)

    def __post_init__(self) -> None:
        rng = np.random.default_rng(self.seed)
        c = rng.standard_normal((self.clusters, self.dim)).astype(np.float32)
        self.centres = c / np.linalg.norm(c, axis=1, keepdims=True)
        self.topics = [
            [word(int(w)) for w in rng.choice(4096, 6, replace=False)] for _ in range(self.clusters)
        ]

    def entity_name(self, cluster: int) -> str:
        """The entity every record of ``cluster`` may mention."""
        return f"{self.topics[cluster][0]} {self.topics[cluster][1]}"

    def vector(self, cluster: int, rng: np.random.Generator, n: int) -> Any:
        """``n`` unit vectors around the centre of ``cluster``."""
        noise = rng.standard_normal((n, self.dim)).astype(np.float32) * (0.9 / math.sqrt(self.dim))
        v = self.centres[cluster] + noise
        return v / np.linalg.norm(v, axis=1, keepdims=True)


def _scope(i: int) -> str:
    return f"scope-{i}"


def bench_sealer() -> Sealer:
    """A fresh key ring for a run with sealed records (RFC 7.6)."""
    key = base64.b64encode(os.urandom(32)).decode()
    return Sealer(
        ring_from_config(json.dumps({"bench": key}), None, base64.b64encode(os.urandom(32)).decode())
    )


def _chunks(
    corpus: Corpus,
    size: int,
    chunk: int,
    now: datetime,
    *,
    sealed_share: float = 0.0,
    sealer: Sealer = NO_KEYS,
) -> Iterator[dict[str, list[Any]]]:
    rng = np.random.default_rng(corpus.seed + 1)
    trng = np.random.default_rng(corpus.seed + 3)  # tags: the rest of the corpus as before
    srng = random.Random(corpus.seed + 4)  # which episodes are sealed: the rest as before
    entity_ids = {(c, s): uuid.uuid4() for c in range(corpus.clusters) for s in range(corpus.scopes)}
    last: dict[tuple[int, int], uuid.UUID] = {}
    first = True
    for start in range(0, size, chunk):
        n = min(chunk, size - start)
        out: dict[str, list[Any]] = {
            "records": [],
            "payloads": [],
            "embeddings": [],
            "relations": [],
            "terms": [],
            "tags": [],
            "provenance": [],
        }
        if first:  # the entities, once
            for (c, s), eid in entity_ids.items():
                name = corpus.entity_name(c)
                ebody: dict[str, Any] = {
                    "kind": "entity",
                    "canonical_name": name,
                    "entity_kind": "thing",
                    "aliases": [],
                    "identifiers": [],
                    "description": None,
                }
                out["records"].append(_row(eid, "entity", _scope(s), name, ebody, now, 90))
                out["payloads"].append((eid, "entity", json.dumps(ebody), None, None))
                out["terms"].append((eid, _scope(s), name, "canonical"))
            first = False
        clusters = rng.integers(0, corpus.clusters, n)
        vectors = np.empty((n, corpus.dim), dtype=np.float32)
        for c in np.unique(clusters):
            idx = np.nonzero(clusters == c)[0]
            vectors[idx] = corpus.vector(int(c), rng, len(idx))
        for k in range(n):
            i, c, s = start + k, int(clusters[k]), (start + k) % corpus.scopes
            rid = uuid.uuid4()
            topic = [corpus.topics[c][int(j)] for j in rng.choice(6, 3, replace=False)]
            noise = [word(int(j)) for j in rng.integers(0, 4096, 6)]
            mentions = rng.random() < 0.3
            text = " ".join(topic + noise) + (f" with {corpus.entity_name(c)}" if mentions else "")
            full_text = f"event {i}: {text}"
            body: dict[str, Any] = {
                "kind": "episodic",
                "source_kind": "event",
                "text": full_text,
                "tool_calls": [],
                "outcome": None,
                "entities": [],
                "data": {},
            }
            at = now - timedelta(minutes=float(rng.integers(0, 10_000)))
            # what a capture writes besides the payload (RFC 3.3): most records carry a tag or
            # two, and every one the provenance source of its capture
            tags = sorted({TAGS[int(j)] for j in trng.integers(0, len(TAGS), int(trng.integers(0, 3)))})
            row = _row(rid, "episodic", _scope(s), full_text, body, at, 30, tags)
            if sealed_share and srng.random() < sealed_share:
                # as a capture at hyper writes it (RFC 7.6): no indexed text, blind tags
                content = sealed_content(json.dumps(body), None, {}, list(tags))
                out["records"].append((*row[:3], "hyper", *row[4:-1], ""))
                out["payloads"].append((rid, "episodic", None, *sealer.seal_content(rid, content)))
                out["tags"].extend((rid, sealer.blind_tag(t)) for t in tags)
            else:
                out["records"].append(row)
                out["payloads"].append((rid, "episodic", json.dumps(body), None, None))
                out["tags"].extend((rid, t) for t in tags)
            out["provenance"].append((rid, "event", f"capture:{rid}", None, "bench-pipeline", at))
            out["embeddings"].append((rid, _scope(s), "bench", vectors[k]))
            if mentions:
                out["relations"].append((rid, "mentions", entity_ids[(c, s)]))
            prev = last.get((c, s))
            if prev is not None and rng.random() < 0.5:
                out["relations"].append((rid, "related_to", prev))
            last[(c, s)] = rid
        yield out


def _row(
    rid: uuid.UUID,
    kind: str,
    scope: str,
    text: str,
    body: dict[str, Any],
    at: datetime,
    half_life_days: int,
    tags: Sequence[str] = (),
) -> tuple[Any, ...]:
    # projected bytes and indexed text as records.projected_bytes and search_text make them
    return (
        rid,
        kind,
        scope,
        "low",
        0.8,
        1.0,
        half_life_days * 86400,
        0.01,
        1.0,
        at,
        "auto_prune" if kind == "episodic" else "manual_only",
        at,
        at,
        at,
        None,
        len(json.dumps(body)) + sum(len(t) + 4 for t in tags) + 512,
        " ".join([text, *tags]),
    )


class FixedEmbedder:
    """Query vectors prepared in advance, so the figures exclude the embedding model."""

    name = "bench"
    model = "bench"

    def __init__(self, dim: int) -> None:
        self.dim = dim
        self.vectors: dict[str, list[float]] = {}

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """The prepared vector of each text."""
        return [self.vectors[t] for t in texts]


def buffers_for(size: int, dim: int) -> str:
    """``shared_buffers`` that hold the HNSW graphs (4 bytes a dimension plus links, about
    twice the raw vectors) with room for the heap: at least 1 GB, whole gigabytes."""
    index_bytes = size * (dim * 4 + 200) * 2
    return f"{max(1, math.ceil(index_bytes / 2**30))}GB"


_pct = bench.percentile


@dataclass
class Figures:
    """Latencies (ms) of one run, by variant."""

    bare: list[float] = field(default_factory=list)
    hybrid: list[float] = field(default_factory=list)
    expand: list[float] = field(default_factory=list)
    overlap: list[float] = field(default_factory=list)
    neighbours: list[int] = field(default_factory=list)
    load: dict[str, float] = field(default_factory=dict)
    loadavg: list[str] = field(default_factory=list)
    shared_buffers: str = "?"
    warmed: int = 0
    warmup: int = 0
    #: RFC 5.7: the share of the copy's records proposed (0: no copy), how many of how many,
    #: the check before measuring, and the copy's latencies (ms) by variant
    proposed_share: float = 0.0
    proposed: int = 0
    records: int = 0
    check: proposed_store.Check | None = None
    copy: dict[str, list[float]] = field(default_factory=dict)


def loadavg() -> str:
    """The 1-minute load average of the machine (others' work shares the cores)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def _load(
    dsn: str,
    corpus: Corpus,
    size: int,
    figures: Figures,
    *,
    sealed_share: float = 0.0,
    sealer: Sealer = NO_KEYS,
) -> None:
    benchload.drop_indexes(dsn)
    now = datetime.now(UTC)
    t0 = time.perf_counter()
    with bench.progress(console) as progress:
        task = progress.add_task("COPY synthetic records", total=size)
        for chunk in _chunks(corpus, size, 20_000, now, sealed_share=sealed_share, sealer=sealer):
            benchload.copy_chunk(
                dsn,
                records=chunk["records"],
                payloads=chunk["payloads"],
                embeddings=chunk["embeddings"],
                relations=chunk["relations"],
                entity_terms=chunk["terms"],
                tags=chunk["tags"],
                provenance=chunk["provenance"],
            )
            progress.advance(task, len(chunk["embeddings"]))
    figures.load["copy"] = time.perf_counter() - t0
    with console.status("building the GIN and HNSW indexes, ANALYZE"):
        figures.load.update(benchload.build_indexes(dsn))


def _queries(corpus: Corpus, n: int, embedder: FixedEmbedder) -> list[tuple[str, str, list[float]]]:
    rng = np.random.default_rng(corpus.seed + 2)
    out = []
    for i in range(n):
        c = int(rng.integers(0, corpus.clusters))
        words = [corpus.topics[c][int(j)] for j in rng.choice(6, 2, replace=False)]
        text = " ".join(words) + (f" and {corpus.entity_name(c)}" if i % 2 else "") + f" q{i}"
        vec = corpus.vector(c, rng, 1)[0].tolist()
        embedder.vectors[text] = vec
        out.append((_scope(int(rng.integers(0, corpus.scopes))), text, vec))
    return out


@dataclass(frozen=True)
class Store:
    """A store the queries run on: its pool and its retriever; ``copy`` for the copy with a
    share of its records proposed (RFC 5.7)."""

    db: Database
    retriever: Retriever
    copy: bool = False


def _measure(
    stores: Sequence[Store],
    queries: list[tuple[str, str, list[float]]],
    figures: Figures,
    warmup: int,
) -> None:
    figures.loadavg.append(loadavg())
    with bench.progress(console) as progress:
        task = progress.add_task(f"queries ({3 * len(stores)} variants each)", total=len(queries))
        order = random.Random(len(queries))  # the same orders in every run of a size
        for n, (scope, text, vec) in enumerate(queries):
            req = parse(RetrieveRequest, {"query": text, "scopes": [scope], "limit": 10})
            req_x = parse(
                RetrieveRequest,
                {
                    "query": text,
                    "scopes": [scope],
                    "limit": 10,
                    "expand": {"hops": 1, "max_nodes": 25, "max_edges": 100},
                },
            )
            out: dict[tuple[bool, str], Any] = {}
            ms: dict[tuple[bool, str], float] = {}

            def bare(db: Database, scope: str = scope, vec: list[float] = vec) -> list[Any]:
                with db.reader() as conn:
                    return benchload.bare_vector(conn, scope, vec, k=10)

            runs: dict[tuple[bool, str], Callable[[], Any]] = {}
            for store in stores:
                runs[(store.copy, "bare")] = functools.partial(bare, store.db)
                runs[(store.copy, "hybrid")] = functools.partial(
                    store.retriever.retrieve, req, DEVELOPMENT_POLICY
                )
                runs[(store.copy, "expand")] = functools.partial(
                    store.retriever.retrieve, req_x, DEVELOPMENT_POLICY
                )
            names = list(runs)
            # the variants run back to back on the same query, in an order drawn afresh for
            # each query: in a fixed rotation, expansion ran right after the hybrid on the
            # same query two times in three and found its pages already read; with the copy
            # (RFC 5.7), each store's variants warm its pages for the others as often
            order.shuffle(names)
            for name in names:
                t = time.perf_counter()
                out[name] = runs[name]()
                ms[name] = (time.perf_counter() - t) * 1000
            if n >= warmup:
                figures.bare.append(ms[(False, "bare")])
                figures.hybrid.append(ms[(False, "hybrid")])
                figures.expand.append(ms[(False, "expand")])
                got = {r.id for r in out[(False, "hybrid")].records}
                bare_ids = out[(False, "bare")]
                figures.overlap.append(len(got & set(bare_ids)) / max(1, len(bare_ids)))
                figures.neighbours.append(len(out[(False, "expand")].neighbors))
                for (copy, variant), v in ms.items():
                    if copy:
                        figures.copy.setdefault(variant, []).append(v)
            progress.advance(task)
    figures.loadavg.append(loadavg())


#: The variants of the proposed comparison (RFC 5.7), hybrid first: its p99 has the target.
PROPOSED_VARIANTS = (
    ("hybrid", "hybrid retrieve"),
    ("expand", "hybrid + one-hop expansion"),
    ("bare", "bare pgvector top-10"),
)


def proposed_rows(f: Figures) -> list[tuple[str, str, float, float, str, str]]:
    """RFC 5.7: each variant on the store with none proposed and on the copy with a share
    proposed: store, variant, p50, p99 (ms), p99 against none proposed, target."""
    rows = []
    share = f"{f.proposed_share:.0%} proposed"
    for key, label in PROPOSED_VARIANTS:
        base = {"hybrid": f.hybrid, "expand": f.expand, "bare": f.bare}[key]
        copy = f.copy.get(key, [])
        base99 = _pct(base, 99)
        target = f"≤ {proposed_store.TARGET_RATIO:g}x" if key == "hybrid" else "information"
        rows.append(("none proposed", label, _pct(base, 50), base99, "1.00x", "baseline"))
        rows.append((share, label, _pct(copy, 50), _pct(copy, 99), f"{_pct(copy, 99) / base99:.2f}x", target))
    return rows


def proposed_note(f: Figures) -> str:
    """RFC 5.7: what the copy holds and what the check before measuring read on it."""
    line = (
        f"Proposed: a copy of the store on the same server with {f.proposed:,} of its "
        f"{f.records:,} records proposed (chosen by a hash of their ids), every query three ways "
        "on both stores, the six in an order drawn per query."
    )
    if f.check:
        c = f.check
        line += (
            f" Checked before measuring on the copy, {c.queries} queries of {proposed_store.CHECK_LIMIT} "
            f"rows with one-hop expansion: {c.hidden_returned:,} records returned, none proposed; "
            f"with `include_proposed: true`, {c.shown_proposed:,} of {c.shown_returned:,} proposed."
        )
    return line


def report(f: Figures, size: int, argv: str, hw: str) -> str:
    """The run as a markdown block for docs/benchmarks.md."""
    target = TARGET_P99_MS.get(size)
    bare50, bare99 = _pct(f.bare, 50), _pct(f.bare, 99)
    whose = "databases'" if f.proposed_share else "database's"  # with the copy, both stores'
    lines = [
        MARK_START,
        f"Command: `{argv}`  ",
        f"Hardware: {hw}  ",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, {size:,} records, "
        f"{len(f.bare)} measured queries (after {f.warmup} unmeasured ones, three variants "
        + ("each on each store" if f.proposed_share else "each")
        + "), one scope filter per query, "
        f"load average {' -> '.join(f.loadavg)} on the shared machine, "
        f"shared_buffers {f.shared_buffers}, "
        + (
            f"the {whose} {f.warmed / 2**30:.1f} GiB of files read once into the OS page "
            "cache before measuring (a server that has been serving)  "
            if f.warmed
            else "OS page cache not warmed (the server's files are not on this machine)  "
        ),
        "",
        "| variant | p50 | p99 | p50 / bare p50 | p99 / bare p99 | target |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| bare pgvector top-10 (same filter, iterative scan) | {bare50:.2f} ms | "
        f"{bare99:.2f} ms | 1.0 | 1.0 | baseline |",
    ]
    for name, values in (
        ("hybrid retrieve (vector + BM25 + entity, fused, hydrated)", f.hybrid),
        ("hybrid retrieve + one-hop expansion", f.expand),
    ):
        p50, p99 = _pct(values, 50), _pct(values, 99)
        tgt = (
            f"p99 < {target:.0f} ms, ≤ {TARGET_RATIO:.0f}x bare" if target else f"≤ {TARGET_RATIO:.0f}x bare"
        )
        lines.append(
            f"| {name} | {p50:.2f} ms | {p99:.2f} ms | {p50 / bare50:.1f} | {p99 / bare99:.1f} | {tgt} |"
        )
    lines += [
        "",
        f"Hybrid top-10 shares {np.mean(f.overlap):.0%} of the bare vector top-10; "
        f"expansion returned {np.mean(f.neighbours):.1f} neighbours per query on average.  ",
    ]
    if f.proposed_share:
        lines += [
            "",
            proposed_note(f) + "  ",
            "",
            "| store | variant | p50 | p99 | p99 / none proposed p99 | target |",
            "| --- | --- | --- | --- | --- | --- |",
            *(
                f"| {store} | {label} | {p50:.2f} ms | {p99:.2f} ms | {ratio} | {target} |"
                for store, label, p50, p99, ratio, target in proposed_rows(f)
            ),
            "",
        ]
    lines += [
        "Load: " + ", ".join(f"{k} {v:.1f} s" for k, v in f.load.items())
        if f.load
        else "Load: reused an existing benchmark database.",
        MARK_END,
    ]
    return "\n".join(lines)


def write_markdown(path: Path, block: str) -> None:
    """Replace the retrieve block of ``path`` (or append it under a Retrieval heading)."""
    bench.write_markdown(
        path, block, start=MARK_START, end=MARK_END, heading="Retrieval (`membrane bench retrieve`)"
    )


def retrieve(
    size: Annotated[int, typer.Option("--size", "-n", min=1000, help="Records to build.")] = 100_000,
    queries: Annotated[int, typer.Option(min=10, help="Measured queries.")] = 200,
    warmup: Annotated[
        int,
        typer.Option(
            min=0,
            help="Unmeasured warm-up queries (at 1,000,000 records, 200 left the hybrid's "
            "median 1.5x what it was after 1,500).",
        ),
    ] = 1000,
    dim: Annotated[int, typer.Option(min=8, max=2000, help="Embedding dimension.")] = 384,
    scopes: Annotated[int, typer.Option(min=1, help="Scopes the records spread over.")] = 20,
    clusters: Annotated[int, typer.Option(min=2, help="Embedding clusters.")] = 200,
    data_dir: Annotated[
        Path | None,
        typer.Option(help="Embedded Postgres data folder; default a temporary one, removed afterwards."),
    ] = None,
    database_url: Annotated[
        str | None, typer.Option(help="Admin URL of a server to use instead of the embedded one.")
    ] = None,
    reuse: Annotated[bool, typer.Option(help="Reuse an already loaded benchmark database.")] = False,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
    sealed_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=1.0,
            help="Share of the episodes loaded at hyper and sealed (RFC 7.6), opened by the retrieval.",
        ),
    ] = 0.0,
    proposed_share: Annotated[
        float,
        typer.Option(
            min=0.0,
            max=0.9,
            help="Also measure, in the same run, a copy of the store with this share of its records "
            "proposed (RFC 5.7), hidden from the retrieval.",
        ),
    ] = 0.0,
    replica: Annotated[
        bool,
        typer.Option(
            "--replica",
            help="Measure hybrid retrieval served by a streaming replica beside the primary, "
            "under a concurrent capture load (RFC 13.2); the embedded server only.",
        ),
    ] = False,
    load_rate: Annotated[
        int, typer.Option(min=0, help="With --replica: captures a second written during the queries.")
    ] = 2000,
) -> None:
    """Hybrid retrieve (with and without one-hop expansion) vs bare pgvector top-10 (RFC 14.1)."""
    replica_bench.refuse_with(replica, database_url is not None or bool(proposed_share or sealed_share))
    temp = data_dir is None and database_url is None
    folder = Path(tempfile.mkdtemp(prefix="membrane-bench-retrieve-")) if temp else data_dir
    figures = Figures()
    server: Any = None
    try:
        if database_url is None:
            assert folder is not None
            # with the copy (RFC 5.7), room for both stores' indexes
            server, admin = _embedded(folder, buffers_for(size * (2 if proposed_share else 1), dim))
        else:
            admin = database_url
        figures.shared_buffers = benchload.shared_buffers(admin)
        name = f"membrane_bench_retrieve_{size}_{dim}" + (
            f"_sealed{round(100 * sealed_share)}" if sealed_share else ""
        )
        # a sealed corpus is opened only by the ring it was sealed with: it is loaded afresh
        dsn = benchload.create_database(admin, name, drop=not reuse or bool(sealed_share))
        migrate.migrate(dsn, dim)
        corpus = Corpus(dim=dim, clusters=clusters, scopes=scopes, seed=11)
        sealer = bench_sealer() if sealed_share else NO_KEYS
        if benchload.loaded(dsn) == 0:
            _load(dsn, corpus, size, figures, sealed_share=sealed_share, sealer=sealer)
        # before any pool opens: a database is copied only while nobody is connected to it
        copy = _copy(admin, name, dsn, proposed_share, figures) if proposed_share else None
        with console.status("reading the database files into the OS page cache"):
            figures.warmed = benchload.warm_os_cache(dsn)
            if copy is not None:
                figures.warmed += benchload.warm_os_cache(copy.dsn)
        embedder = FixedEmbedder(dim)
        qs = _queries(corpus, queries + warmup, embedder)
        if replica:
            assert folder is not None
            argv = (
                f"membrane bench retrieve --replica --size {size} --queries {queries} --warmup {warmup} "
                f"--dim {dim} --load-rate {load_rate}"
            )
            replica_bench.run(
                folder, dsn, dim, qs, warmup, embedder, load_rate, loadavg, size, argv, markdown
            )
            return
        stores: list[Store] = []
        try:
            for store_dsn, is_copy in ((dsn, False), *(((copy.dsn, True),) if copy else ())):
                db = Database(store_dsn, embedding_dim=dim, min_size=1, max_size=2)
                retriever = Retriever(db, clock=lambda: datetime.now(UTC), embedder=embedder, sealer=sealer)
                stores.append(Store(db, retriever, copy=is_copy))
            if copy is not None:
                with console.status("checking that the copy's proposed records stay hidden"):
                    figures.check = proposed_store.check(
                        stores[-1].retriever,
                        proposed_store.proposed_ids(copy.dsn),
                        [(sc, t) for sc, t, _ in qs],
                    )
            figures.warmup = warmup
            _measure(stores, qs, figures, warmup)
        finally:
            for store in stores:
                store.db.close()
    except errors.MembraneError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    finally:
        if server is not None:  # the embedded server this command started
            server.stop()
        if temp and folder is not None:
            shutil.rmtree(folder, ignore_errors=True)
    argv = (
        f"membrane bench retrieve --size {size} --queries {queries} --warmup {warmup} "
        f"--dim {dim} --scopes {scopes} --clusters {clusters}"
        + (f" --sealed-share {sealed_share:g}" if sealed_share else "")
        + (f" --proposed-share {proposed_share:g}" if proposed_share else "")
    )
    block = report(figures, size, argv, hardware())
    _print(figures, size)
    if markdown:
        write_markdown(markdown, block)
        console.print(f"wrote {markdown}")


def _embedded(folder: Path, want: str) -> tuple[Any, str]:
    """The embedded server of ``folder``, started with ``want`` of shared buffers, and its URL."""
    with console.status("starting the embedded Postgres"):
        server = embedded.start(folder)
        admin = embedded.dsn(folder)
        if benchload.shared_buffers(admin) != want:
            # our own server: room for the HNSW index, as a production server has
            benchload.shared_buffers(admin, enlarge=want)
            server.stop()
            server.start()
    return server, admin


def _copy(admin: str, name: str, dsn: str, share: float, figures: Figures) -> proposed_store.Copy:
    """RFC 5.7: the copy of the loaded store with ``share`` of its records proposed."""
    with console.status(f"copying the store, {share:.0%} of the copy's records proposed"):
        copy = proposed_store.build(admin, name, dsn, share)
    figures.load.update(copy.seconds)
    figures.proposed_share, figures.proposed, figures.records = share, copy.proposed, copy.records
    return copy


def _print(f: Figures, size: int) -> None:
    t = Table(title=f"membrane bench retrieve ({size:,} records)", title_justify="left")
    for col in ("variant", "p50", "p99", "p50 / bare", "p99 / bare"):
        t.add_column(col)
    bare50, bare99 = _pct(f.bare, 50), _pct(f.bare, 99)
    for name, values in (
        ("bare pgvector top-10", f.bare),
        ("hybrid retrieve", f.hybrid),
        ("hybrid + one-hop expansion", f.expand),
    ):
        t.add_row(
            name,
            f"{_pct(values, 50):.2f} ms",
            f"{_pct(values, 99):.2f} ms",
            f"{_pct(values, 50) / bare50:.1f}x",
            f"{_pct(values, 99) / bare99:.1f}x",
        )
    console.print(t)
    p99 = TARGET_P99_MS.get(size)
    console.print(
        f"overlap with bare top-10: {np.mean(f.overlap):.0%}; "
        f"neighbours per expanded query: {np.mean(f.neighbours):.1f}; "
        + (f"target p99 {p99:.0f} ms, " if p99 else "no p99 target at this size, ")
        + f"≤ {TARGET_RATIO:.0f}x bare"
    )
    if f.proposed_share:
        c = Table(title=f"with {f.proposed_share:.0%} of the store proposed (RFC 5.7)", title_justify="left")
        for col in ("store", "variant", "p50", "p99", "p99 / none proposed", "target"):
            c.add_column(col)
        for store, label, p50, p99, ratio, target in proposed_rows(f):
            c.add_row(store, label, f"{p50:.2f} ms", f"{p99:.2f} ms", ratio, target)
        console.print(c)
        console.print(proposed_note(f).replace("`", ""), highlight=False)
    if f.load:
        console.print("load: " + ", ".join(f"{k} {v:.1f} s" for k, v in f.load.items()))


def register(app: typer.Typer) -> None:
    """Add ``retrieve`` to the ``bench`` group (RFC 14.1)."""
    app.command("retrieve")(retrieve)
