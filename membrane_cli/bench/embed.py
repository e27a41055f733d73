"""``membrane bench embed``: the embedding pool's records/s beside the bare model (RFC 12.4, 14.1).

A store of its own gets ``--records`` synthetic conversational turns (``bench.turns``) as
captures, each with its ``embed`` item. Then, ``--rounds`` times, in the same process and
on the same ONNX Runtime session (graph, threads, batch):

- the bare model, the ceiling: ``InferenceSession.run`` in a tight loop over the texts
  already tokenized, grouped as the pool groups them (claim batches of ``--batch``, sorted
  by length inside each, model batches of ``--model-batch``);
- the same without sorting, so that short texts are padded to long ones (what sorting saves);
- the provider's call on each claim batch (tokenizing, the model, pooling, the tokens);
- the pool's job, ``EmbeddingService.run_batch`` until nothing is due: claim, read the
  texts, embed, write the vectors and token signs, complete the items;
- the vectors' write alone, by the pool's one statement and by ``COPY`` into a stage.

Each figure is records per second; the pool's is given as a share of the ceiling. Targets
are reported, never asserted.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Annotated, Any

import numpy as np
import typer
from pgvector import Vector
from pgvector.psycopg import register_vector
from rich.console import Console
from rich.table import Table

from membrane_cli import bench
from membrane_cli.bench import turns
from membrane_cli.bench.ingest import hardware, loadavg
from membrane_cli.bench.queries import q
from membrane_core import Membrane, Settings
from membrane_core.jobs.embed import EmbeddingService, model_id
from membrane_core.providers import LocalMiniLMProvider
from membrane_core.providers.base import unit
from membrane_core.retrieval import late
from membrane_core.sealing import NO_KEYS
from membrane_core.storage import derived

console = Console()

MARK_START, MARK_END = "<!-- bench-embed:start -->", "<!-- bench-embed:end -->"
#: Texts the unsorted case embeds each round: padded to the longest of each batch, it is slow.
UNSORTED_SAMPLE = 1000
#: RFC 12.4: the pool at least this share of the bare model's records/s.
TARGET_SHARE = 0.8
LABELS = {
    "bare": "bare model, sorted by length (ceiling)",
    "unsorted": "bare model, in arrival order (padded)",
    "provider": "provider call: tokenize, model, pool, tokens",
    "pool": "embedding pool: EmbeddingService.run_batch",
    "write": "vectors written by the pool's statement, alone",
    "copy": "vectors written by COPY and one upsert, alone",
}


@dataclass
class Figures:
    """Seconds per case over every round, and what the run was."""

    records: int
    rounds: int
    batch: int
    model_batch: int
    threads: int
    model: str = ""
    seconds: dict[str, float] = field(default_factory=lambda: dict.fromkeys(LABELS, 0.0))
    padding: dict[str, float] = field(default_factory=dict)
    #: records each case embedded or wrote over every round
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(LABELS, 0))
    load: list[str] = field(default_factory=list)

    def rate(self, case: str) -> float:
        """Records per second of ``case`` over every round."""
        s = self.seconds[case]
        return self.counts[case] / s if s else 0.0


def _inputs(
    provider: LocalMiniLMProvider, texts: Sequence[str], batch: int, *, sort: bool
) -> list[dict[str, Any]]:
    """The model's inputs as the pool feeds them: claim batches of ``batch`` texts, sorted by
    length inside each when ``sort``, cut into the provider's model batches."""
    onnx = provider._onnx  # the benchmark runs the provider's own session
    assert onnx is not None
    out: list[dict[str, Any]] = []
    for start in range(0, len(texts), batch):
        claim = list(texts[start : start + batch])
        if sort:
            claim.sort(key=len)
        for i in range(0, len(claim), provider.batch_size):
            enc = onnx._tokenizer.encode_batch(claim[i : i + provider.batch_size])
            out.append(
                {
                    "input_ids": np.array([e.ids for e in enc], dtype=np.int64),
                    "attention_mask": np.array([e.attention_mask for e in enc], dtype=np.int64),
                    "token_type_ids": np.array([e.type_ids for e in enc], dtype=np.int64),
                }
            )
    return out


def _padding(inputs: list[dict[str, Any]]) -> float:
    """The share of the model's input positions that are padding."""
    total = sum(x["attention_mask"].size for x in inputs)
    return 1 - sum(int(x["attention_mask"].sum()) for x in inputs) / total if total else 0.0


def _capture(m: Membrane, count: int) -> list[uuid.UUID]:
    for start in range(0, count, 1000):
        m.capture_many(
            {"source_kind": "event", "scope": f"embed-{i % 20}", "content": {"text": text}}
            for i, text in enumerate(turns.turns(min(1000, count - start), seed=37 + start), start)
        )
    with m.db.transaction() as conn:
        return [row[0] for row in conn.execute(q("bench_emb_ids")).fetchall()]


def _write_copy(
    m: Membrane, units: dict[uuid.UUID, list[float]], signs: dict[uuid.UUID, bytes], model: str
) -> None:
    with m.db.transaction() as conn:
        register_vector(conn)
        conn.execute(q("bench_emb_stage"))
        with conn.cursor().copy(q("bench_emb_copy")) as copy:
            copy.set_types(["uuid", "vector", "bytea"])
            for rid, vec in units.items():
                copy.write_row((rid, Vector(vec), signs.get(rid)))
        conn.execute(q("bench_emb_from_stage"), {"model": model, "now": datetime.now(UTC)})


def _bare(provider: LocalMiniLMProvider, texts: Sequence[str], f: Figures, case: str) -> None:
    """The session alone over the inputs already made: sorted (``bare``), or in arrival order
    (``unsorted``, on the first ``UNSORTED_SAMPLE`` texts: padded, it is slow)."""
    sort = case == "bare"
    inputs = _inputs(provider, texts if sort else texts[:UNSORTED_SAMPLE], f.batch, sort=sort)
    f.padding[case] = _padding(inputs)
    assert provider._onnx is not None
    session = provider._onnx._session
    t = time.perf_counter()
    for x in inputs:
        session.run(None, x)
    f.seconds[case] += time.perf_counter() - t
    f.counts[case] += min(len(texts), len(texts) if sort else UNSORTED_SAMPLE)


def _call(
    provider: LocalMiniLMProvider, chunks: list[tuple[list[uuid.UUID], list[str]]]
) -> tuple[dict[uuid.UUID, list[float]], dict[uuid.UUID, bytes]]:
    """The provider's call on each claim batch; the unit vectors and token signs it gives."""
    units: dict[uuid.UUID, list[float]] = {}
    signs: dict[uuid.UUID, bytes] = {}
    for chunk_ids, chunk_texts in chunks:
        vectors, tokens = provider.embed_tokens(chunk_texts)
        for rid, v, t in zip(chunk_ids, vectors, tokens, strict=True):
            u = unit(v)
            if u is not None:
                units[rid], signs[rid] = u, late.pack(t)
    return units, signs


def _writes(
    m: Membrane,
    chunks: list[tuple[list[uuid.UUID], list[str]]],
    units: dict[uuid.UUID, list[float]],
    signs: dict[uuid.UUID, bytes],
    model: str,
    f: Figures,
) -> None:
    """The vectors written alone, a transaction a claim batch, by the pool's statement and by COPY."""
    now = datetime.now(UTC)
    t = time.perf_counter()
    for chunk_ids, _ in chunks:
        with m.db.transaction() as conn:
            batch: dict[uuid.UUID, Sequence[float]] = {i: units[i] for i in chunk_ids if i in units}
            derived.write_embeddings(conn, batch, model=model, now=now, signs=signs)
    f.seconds["write"] += time.perf_counter() - t
    t = time.perf_counter()
    for chunk_ids, _ in chunks:
        _write_copy(m, {i: units[i] for i in chunk_ids if i in units}, signs, model)
    f.seconds["copy"] += time.perf_counter() - t


def _round(
    m: Membrane,
    service: EmbeddingService,
    provider: LocalMiniLMProvider,
    ids: list[uuid.UUID],
    f: Figures,
    r: int,
) -> None:
    with m.db.transaction() as conn:
        found = derived.texts(conn, ids, NO_KEYS, open_sealed=True).texts
    texts = [found[i] for i in ids]
    chunks = [(ids[i : i + f.batch], texts[i : i + f.batch]) for i in range(0, len(ids), f.batch)]
    kept: dict[str, Any] = {}

    def call() -> None:
        t = time.perf_counter()
        kept["units"], kept["signs"] = _call(provider, chunks)
        f.seconds["provider"] += time.perf_counter() - t
        f.counts["provider"] += len(ids)

    def pool() -> None:
        if r:  # RFC 12.5: every record's item again, as embedding again writes them
            service.enqueue_stale(every=True)
        t = time.perf_counter()
        while service.run_batch().get("claimed"):
            pass
        f.seconds["pool"] += time.perf_counter() - t
        f.counts["pool"] += len(ids)

    steps = [
        lambda: _bare(provider, texts, f, "bare"),
        lambda: _bare(provider, texts, f, "unsorted"),
        call,
        pool,
    ]
    # the second round runs the cases backwards, so that the host's drift weighs on each alike
    for step in steps if r % 2 == 0 else reversed(steps):
        step()
    _writes(m, chunks, kept["units"], kept["signs"], model_id(provider), f)
    f.counts["write"] += len(ids)
    f.counts["copy"] += len(ids)


def measure(
    folder: Path, *, records: int, rounds: int, batch: int, model_batch: int, threads: int, quantized: bool
) -> Figures:
    """The store, then every case ``rounds`` times on one session."""
    f = Figures(records=records, rounds=rounds, batch=batch, model_batch=model_batch, threads=threads)
    settings = bench.fresh_store(Settings(embedding_provider="local", llm_provider="none"), folder)
    settings = settings.model_copy(update={"batch_size": batch, "embedding_pool_threads": threads})
    with console.status("loading the model (exported once into the user's cache)"):
        provider = LocalMiniLMProvider(batch_size=model_batch, threads=threads, quantized=quantized)
    f.model = model_id(provider)
    with Membrane(settings) as m:
        service = EmbeddingService(m.db, lambda: provider, clock=m.clock, batch_size=batch)
        with console.status(f"capturing {records:,} turns"):
            ids = _capture(m, records)
        f.load.append(loadavg())
        with console.status("warming the session up (unmeasured)"):
            provider.embed_tokens(list(turns.turns(min(records, 2 * batch), seed=1)))
        for r in range(rounds):
            with console.status(f"round {r + 1} of {rounds}"):
                _round(m, service, provider, ids, f, r)
        f.load.append(loadavg())
    return f


def print_figures(f: Figures) -> None:
    """The cases on the terminal, each beside the ceiling."""
    t = Table(
        title=f"membrane bench embed: {f.model}, {f.threads or 'default'} threads", title_justify="left"
    )
    for col in ("case", "records/s", "of the ceiling", "target"):
        t.add_column(col)
    ceiling = f.rate("bare")
    for case, label in LABELS.items():
        share = f"{100 * f.rate(case) / ceiling:.0f} %" if ceiling and case not in ("write", "copy") else ""
        target = "baseline" if case == "bare" else f"≥ {100 * TARGET_SHARE:.0f} %" if case == "pool" else ""
        t.add_row(label, f"{f.rate(case):,.0f}", share, target)
    console.print(t)
    console.print(
        f"padding: {100 * f.padding.get('bare', 0):.0f} % of the positions sorted, "
        f"{100 * f.padding.get('unsorted', 0):.0f} % in arrival order; load average {' -> '.join(f.load)}"
    )


def report(f: Figures, argv: str) -> str:
    """The run as a markdown block for docs/benchmarks.md."""
    ceiling = f.rate("bare")
    lines = [
        MARK_START,
        f"Command: `{argv}`  ",
        f"Hardware: {hardware()}  ",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; {f.model}, "
        f"intra-op threads {f.threads or 'default'}, claim batch {f.batch}, model batch {f.model_batch}, "
        f"{f.records:,} turns x {f.rounds} rounds; padding {100 * f.padding.get('bare', 0):.0f} % sorted, "
        f"{100 * f.padding.get('unsorted', 0):.0f} % unsorted; load average {' -> '.join(f.load)}",
        "",
        "| case | records/s | of the ceiling | target |",
        "| --- | --- | --- | --- |",
    ]
    for case, label in LABELS.items():
        share = f"{100 * f.rate(case) / ceiling:.0f} %" if ceiling and case not in ("write", "copy") else ""
        target = "baseline" if case == "bare" else f"≥ {100 * TARGET_SHARE:.0f} %" if case == "pool" else ""
        lines.append(f"| {label} | {f.rate(case):,.0f} | {share} | {target} |")
    lines.append(MARK_END)
    return "\n".join(lines)


def embed(
    records: Annotated[int, typer.Option(min=10, help="Synthetic turns captured and embedded.")] = 5000,
    rounds: Annotated[int, typer.Option(min=1, help="Times every case runs.")] = 2,
    batch: Annotated[int, typer.Option(min=1, help="Records a pool batch claims.")] = 500,
    model_batch: Annotated[int, typer.Option(min=1, help="Texts one model run takes.")] = 32,
    threads: Annotated[int, typer.Option(min=0, help="ONNX Runtime intra-op threads (0: its default).")] = 1,
    int8: Annotated[bool, typer.Option(help="The int8 graph (the default) or the float one.")] = True,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
) -> None:
    """RFC 12.4, 14.1: the embedding pool's records/s beside the bare model on the same session."""
    with bench.temp_store("embed") as folder:
        f = measure(
            folder,
            records=records,
            rounds=rounds,
            batch=batch,
            model_batch=model_batch,
            threads=threads,
            quantized=int8,
        )
    argv = (
        f"membrane bench embed --records {records} --rounds {rounds} --batch {batch} "
        f"--model-batch {model_batch} --threads {threads}" + ("" if int8 else " --no-int8")
    )
    print_figures(f)
    if markdown:
        bench.write_markdown(
            markdown,
            report(f, argv),
            start=MARK_START,
            end=MARK_END,
            heading="Embedding pool (`membrane bench embed`)",
        )
        console.print(f"wrote {markdown}")


def register(app: typer.Typer) -> None:
    """Add ``embed`` to the ``bench`` group (RFC 14.1)."""
    app.command("embed")(embed)
