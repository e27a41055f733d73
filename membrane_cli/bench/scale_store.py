"""The store of ``membrane bench scale``: synthetic records as a pipeline leaves them (RFC 14.1).

Episodes over a fixed universe of scopes drawn by a Zipf law (a few tenants hold most of
the records, most hold a few), with text of a log-normal length, one or two tags for two
in three, the provenance source of their capture, the create entry of the audit log and
the decay checkpoint a capture schedules; entities (a handful of topics per scope) that
episodes mention, and a link from an episode to the scope's previous one on its topic.
A share of the episodes carries a vector. The rows are written with the COPY loader of
``bench retrieve`` (:func:`membrane_cli.bench.load.copy_chunk`) and its row layout
(:func:`membrane_cli.bench.retrieve._row`); the audit entries and checkpoints, which that
loader leaves out, by one more COPY each.
"""

from __future__ import annotations

import json
import time
import uuid
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import psycopg

from membrane_cli.bench import load as benchload
from membrane_cli.bench import retrieve as synthetic
from membrane_cli.bench.queries import q
from membrane_core.capture.plan import new_id

#: Topics (embedding clusters) each scope's records are about.
TOPICS_PER_SCOPE = 8
#: Half-lives of the synthetic records, days (RFC 6.1): episodes and entities.
EPISODE_HALF_LIFE, ENTITY_HALF_LIFE = 30, 90
#: Words of an episode's text: log-normal, median and spread, capped (RFC 14.1: a
#: pipeline's events are a sentence or two, its tool outputs now and then a page).
WORDS_MEDIAN, WORDS_SIGMA, WORDS_MAX = 24, 1.0, 600
VOCABULARY = [synthetic.word(i) for i in range(4096)]


def scope_name(rank: int) -> str:
    """The scope of Zipf rank ``rank`` (0 is the largest)."""
    return f"scope-{rank}"


@dataclass
class World:
    """The synthetic world of one run: topic vectors and words, the Zipf law over the
    scopes, and what earlier chunks wrote that later ones refer to (entities, the last
    episode of each scope's topic)."""

    scopes: int
    zipf: float
    vector_share: float
    dim: int
    clusters: int
    seed: int
    corpus: synthetic.Corpus = field(init=False)
    cdf: Any = field(init=False)
    entities: dict[tuple[int, int], uuid.UUID] = field(default_factory=dict)
    last: dict[tuple[int, int], uuid.UUID] = field(default_factory=dict)
    episodes: int = 0
    vectors: int = 0

    def __post_init__(self) -> None:
        self.corpus = synthetic.Corpus(dim=self.dim, clusters=self.clusters, scopes=1, seed=self.seed)
        weights = 1.0 / np.arange(1, self.scopes + 1, dtype=np.float64) ** self.zipf
        self.cdf = np.cumsum(weights) / weights.sum()

    def draw_scopes(self, rng: np.random.Generator, n: int) -> Any:
        """``n`` scope ranks drawn by the Zipf law."""
        return np.minimum(np.searchsorted(self.cdf, rng.random(n)), self.scopes - 1)

    def topic(self, rank: int, k: int) -> int:
        """The ``k``-th topic (cluster) of scope ``rank``."""
        return (rank * 7919 + k * 31) % self.clusters

    def expected_share(self, rank: int) -> float:
        """The share of the episodes that scope ``rank`` holds."""
        return float(self.cdf[rank] - (self.cdf[rank - 1] if rank else 0.0))


class Chunk(NamedTuple):
    """The rows of one chunk, by table, in the layouts of :func:`load.copy_chunk`."""

    tables: dict[str, list[Any]]
    audit: list[tuple[Any, ...]]
    work: list[tuple[Any, ...]]


def chunks(world: World, start: int, stop: int, now: datetime, size: int = 20_000) -> Iterator[Chunk]:
    """Episodes ``start`` to ``stop`` of the world (the same ones for the same seed), in chunks."""
    for lo in range(start, stop, size):
        yield _chunk(world, lo, min(stop, lo + size), now)


def _chunk(world: World, lo: int, hi: int, now: datetime) -> Chunk:
    rng = np.random.default_rng([world.seed, lo])
    n = hi - lo
    tables: dict[str, list[Any]] = {
        k: [] for k in ("records", "payloads", "embeddings", "relations", "terms", "tags", "provenance")
    }
    audit: list[tuple[Any, ...]] = []
    work: list[tuple[Any, ...]] = []
    ranks = world.draw_scopes(rng, n)
    topics = rng.integers(0, TOPICS_PER_SCOPE, n)
    lengths = np.minimum(WORDS_MAX, np.ceil(rng.lognormal(np.log(WORDS_MEDIAN), WORDS_SIGMA, n))).astype(int)
    noise = rng.integers(0, len(VOCABULARY), int(lengths.sum()))
    mentions = rng.random(n) < 0.3
    linked = rng.random(n) < 0.5
    embedded = rng.random(n) < world.vector_share
    tag_counts = rng.integers(0, 3, n)
    tag_picks = rng.integers(0, len(synthetic.TAGS), (n, 2))
    clusters = np.array([world.topic(int(r), int(t)) for r, t in zip(ranks, topics, strict=True)])
    vectors = np.zeros((n, world.dim), dtype=np.float32)
    for c in np.unique(clusters[embedded]):
        idx = np.nonzero(embedded & (clusters == c))[0]
        vectors[idx] = world.corpus.vector(int(c), rng, len(idx))
    half = EPISODE_HALF_LIFE * 86400
    w = 0
    for k in range(n):
        rank, c = int(ranks[k]), int(clusters[k])
        scope = scope_name(rank)
        # as a pipeline writes them: ids time-ordered (RFC 2.1) and written in id order
        rid = new_id()
        at = now - timedelta(microseconds=n - k)
        key = (rank, c)
        if mentions[k] and key not in world.entities:
            _entity(world, tables, audit, work, key, scope, now)
        words = [VOCABULARY[int(i)] for i in noise[w : w + lengths[k]]]
        w += int(lengths[k])
        topic = world.corpus.topics[c]
        text = f"event {lo + k}: {topic[k % 6]} {topic[(k + 2) % 6]} {' '.join(words)}"
        if mentions[k]:
            text += f" with {world.corpus.entity_name(c)}"
        body: dict[str, Any] = {
            "kind": "episodic",
            "source_kind": "event",
            "text": text,
            "tool_calls": [],
            "outcome": None,
            "entities": [],
            "data": {},
        }
        tags = sorted({synthetic.TAGS[int(j)] for j in tag_picks[k][: tag_counts[k]]})
        tables["records"].append(
            synthetic._row(rid, "episodic", scope, text, body, at, EPISODE_HALF_LIFE, tags)
        )
        tables["payloads"].append((rid, "episodic", json.dumps(body), None, None))
        tables["tags"].extend((rid, t) for t in tags)
        tables["provenance"].append((rid, "event", f"capture:{rid}", None, "bench-pipeline", at))
        if embedded[k]:
            tables["embeddings"].append((rid, scope, "bench", vectors[k]))
        if mentions[k]:
            tables["relations"].append((rid, "mentions", world.entities[key]))
        prev = world.last.get(key)
        if prev is not None and linked[k]:
            tables["relations"].append((rid, "related_to", prev))
        world.last[key] = rid
        audit.append((rid, scope, "low", "create", "bench-pipeline", at, "captured", "{}"))
        work.append(("decay", rid, at + timedelta(seconds=half)))
    world.episodes += n
    world.vectors += int(embedded.sum())
    return Chunk(tables, audit, work)


def _entity(
    world: World,
    tables: dict[str, list[Any]],
    audit: list[tuple[Any, ...]],
    work: list[tuple[Any, ...]],
    key: tuple[int, int],
    scope: str,
    now: datetime,
) -> None:
    """The entity of a scope's topic, written with the chunk that first mentions it."""
    eid = world.entities[key] = new_id()
    name = world.corpus.entity_name(key[1])
    body: dict[str, Any] = {
        "kind": "entity",
        "canonical_name": name,
        "entity_kind": "thing",
        "aliases": [],
        "identifiers": [],
        "description": None,
    }
    tables["records"].append(synthetic._row(eid, "entity", scope, name, body, now, ENTITY_HALF_LIFE))
    tables["payloads"].append((eid, "entity", json.dumps(body), None, None))
    tables["terms"].append((eid, scope, name, "canonical"))
    audit.append((eid, scope, "low", "create", "bench-pipeline", now, "captured", "{}"))
    work.append(("decay", eid, now + timedelta(days=ENTITY_HALF_LIFE)))


def copy_records(dsn: str, chunk: Chunk) -> None:
    """The first stage of a chunk: its ``memory_records`` rows, committed on their own."""
    benchload.copy_chunk(
        dsn, records=chunk.tables["records"], payloads=(), embeddings=(), relations=(), entity_terms=()
    )


def copy_rest(dsn: str, chunk: Chunk) -> None:
    """The second stage of a chunk, once its records are committed: every row that refers to a
    record (payloads, vectors, relations, terms, tags, provenance), then the audit entries and
    decay checkpoints."""
    t = chunk.tables
    benchload.copy_chunk(
        dsn,
        records=(),
        payloads=t["payloads"],
        embeddings=t["embeddings"],
        relations=t["relations"],
        entity_terms=t["terms"],
        tags=t["tags"],
        provenance=t["provenance"],
    )
    with psycopg.connect(dsn) as conn, conn.cursor() as cur:
        for name, rows in (("scale_copy_audit", chunk.audit), ("scale_copy_work", chunk.work)):
            with cur.copy(q(name)) as out:
                for row in rows:
                    out.write_row(row)


def load(dsn: str, chunks: Iterable[Chunk], done: Callable[[Chunk], None]) -> None:
    """Write ``chunks`` in two stages on two connections, as a pipeline: a chunk's records while
    the previous chunk's other rows are written and the next chunk is made. A chunk refers only
    to records of itself and of earlier chunks, which its second stage waits for, so every
    foreign key holds when it is checked. One backend per stage keeps both cores busy, where
    one connection left the second idle: at most two chunks are in flight. ``done`` is called
    with each chunk once both stages are committed."""
    inflight: deque[tuple[Chunk, Future[None]]] = deque()

    def stage_two(records: Future[None], chunk: Chunk) -> None:
        records.result()
        copy_rest(dsn, chunk)

    def finish_oldest() -> None:
        chunk, future = inflight.popleft()
        future.result()
        done(chunk)

    with ThreadPoolExecutor(1) as first, ThreadPoolExecutor(1) as second:
        for chunk in chunks:
            if len(inflight) == 2:
                finish_oldest()
            records = first.submit(copy_records, dsn, chunk)
            inflight.append((chunk, second.submit(stage_two, records, chunk)))
        while inflight:
            finish_oldest()


class TableBytes(NamedTuple):
    """A table's bytes: heap (with TOAST and maps) and its indexes."""

    name: str
    heap: int
    indexes: int


class IndexBytes(NamedTuple):
    """An index's bytes, and its table."""

    name: str
    table: str
    bytes: int


class Vacuum(NamedTuple):
    """Autovacuum's work on a table since the server started."""

    name: str
    live: int
    dead: int
    autovacuums: int
    autoanalyzes: int
    last: datetime | None


class Disk(NamedTuple):
    """What the store costs on disk, and autovacuum's work, at one size."""

    records: int
    tables: list[TableBytes]
    indexes: list[IndexBytes]
    vacuum: list[Vacuum]
    running: list[str]


def disk(dsn: str) -> Disk:
    """Bytes by table and index, autovacuum's counters and any vacuum running now."""
    with psycopg.connect(dsn, autocommit=True) as conn:
        row = conn.execute(q("scale_records")).fetchone()
        tables = [TableBytes(*r) for r in conn.execute(q("scale_table_bytes")).fetchall()]
        indexes = [IndexBytes(*r) for r in conn.execute(q("scale_index_bytes")).fetchall()]
        vacuum = [Vacuum(*r) for r in conn.execute(q("scale_autovacuum")).fetchall()]
        running = [
            f"{name} ({phase}, {scanned:,} of {total:,} heap blocks)"
            for name, phase, scanned, total in conn.execute(q("scale_vacuum_progress")).fetchall()
        ]
    return Disk(int(row[0]) if row else 0, tables, indexes, vacuum, running)


def settle(dsn: str, *, quiet: float = 15.0, limit: float = 1800.0) -> tuple[float, list[str]]:
    """Wait until no vacuum has run in this database for ``quiet`` seconds (longer than
    autovacuum's naptime, so a table it has yet to visit is visited first), at most ``limit``:
    the seconds waited and the tables vacuumed meanwhile. A pipeline's store is not grown by
    millions of rows a minute; after a growth, autovacuum catches up before the measurements."""
    t0 = time.perf_counter()
    seen: list[str] = []
    calm_since = t0
    with psycopg.connect(dsn, autocommit=True) as conn:
        while time.perf_counter() - t0 < limit:
            running = [r[0] for r in conn.execute(q("scale_vacuum_progress")).fetchall()]
            now = time.perf_counter()
            if running:
                seen.extend(name for name in running if name not in seen)
                calm_since = now
            elif now - calm_since >= quiet:
                break
            time.sleep(1.0)
    return time.perf_counter() - t0, seen


def disk_read_bytes() -> int:
    """Bytes read from this machine's block devices since it started (``/sys/block/*/stat``,
    sectors of 512 bytes), loop and RAM devices left out: reads the page cache did not serve.
    0 where the counters cannot be read."""
    total = 0
    for stat in Path("/sys/block").glob("*/stat"):
        if stat.parent.name.startswith(("loop", "ram", "zram", "dm-", "md")):
            continue
        try:
            total += int(stat.read_text().split()[2]) * 512
        except (OSError, IndexError, ValueError):
            continue
    return total


def scope_records(dsn: str, scope: str) -> int:
    """Records of ``scope``."""
    with psycopg.connect(dsn) as conn:
        row = conn.execute(q("scale_scope_records"), {"scope": scope}).fetchone()
    return int(row[0]) if row else 0
