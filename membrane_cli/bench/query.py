"""``membrane bench query``: what a retrieve costs through HTTP with query embedding (RFC 14.1).

A fresh store (embedded Postgres in a temporary folder) gets ``--records`` episodes in
one scope, embedded by the configured provider (``--embedding``, default ``local``), then
analysed (the planner statistics autovacuum keeps current in a store that has been
running; a load this small is measured before autovacuum gets to it), and the API is
served on a loopback port. Then ``--queries`` questions that were never asked
before, each measured four ways in an order drawn per question:

- ``embed``: the provider alone, on the question;
- ``statement``: ``Membrane.retrieve`` with the question's vector already known (the
  retriever's recent-query cache): the hybrid statement, late interaction (RFC 8.2.3) and
  the trust checks, the baseline;
- ``fused``: the same without late interaction, what the re-ranking costs beside it;
- ``library``: the same retrieve in-process for the question once more, reworded so that
  nothing is cached: the model and the statement;
- ``http``: ``POST /v1/retrieve`` for another rewording, over a kept-alive connection:
  what a client sees.

Target (RFC 14.1): HTTP retrieve p50 at most 10 ms with the local model.
"""

from __future__ import annotations

import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
import uvicorn
from rich.console import Console
from rich.table import Table

from membrane_cli.bench import fresh_store
from membrane_cli.bench import queries as bench_sql
from membrane_cli.stack import free_port
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import RecordingDispatcher
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()

#: RFC 14.1: HTTP retrieve p50 with the local query embedding, on 2 cores.
TARGET_HTTP_P50_MS = 10.0
SCOPE = "bench-query"
_PEOPLE = ("Ana", "Bo", "Chen", "Dara", "Eli", "Femi", "Gus", "Hana", "Ivo", "Jun")
_THINGS = (
    "the trip to Lisbon",
    "a new bike",
    "the pottery class",
    "the job interview",
    "a sick cat",
    "the garden",
    "a guitar lesson",
    "the marathon",
    "a book club",
    "the move to Oslo",
)
_VERBS = ("talked about", "worried about", "was excited about", "planned", "finished", "postponed")


def _turn(rng: random.Random, i: int) -> dict[str, Any]:
    who, what, verb = rng.choice(_PEOPLE), rng.choice(_THINGS), rng.choice(_VERBS)
    return {
        "source_kind": "event",
        "scope": SCOPE,
        "content": {"text": f"{who}: I {verb} {what} on day {i} with {rng.choice(_PEOPLE)}."},
    }


def _question(rng: random.Random, n: int) -> str:
    return f"what did {rng.choice(_PEOPLE)} say about {rng.choice(_THINGS)} (#{n})"


class _Served:
    """The API of ``membrane`` on a free loopback port, in a thread."""

    def __init__(self, membrane: Membrane) -> None:
        from api.app import create_app

        self.port = free_port()
        app = create_app(membrane=membrane, dispatcher=RecordingDispatcher())
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False)
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> str:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API did not start")
            time.sleep(0.02)
        return f"http://127.0.0.1:{self.port}"

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def _ask(step: str, q: str, m: Membrane, provider: Any, client: httpx.Client) -> None:
    """One measured step for question ``q`` (each rewording is new to the vector cache)."""
    body = {"query": q, "scopes": [SCOPE]}
    if step == "embed":
        provider.embed([q + " ?"])
    elif step == "statement":
        m.retrieve(body, DEVELOPMENT_POLICY)
    elif step == "fused":
        late, m.retriever.late_interaction = m.retriever.late_interaction, False
        try:
            m.retrieve(body, DEVELOPMENT_POLICY)
        finally:
            m.retriever.late_interaction = late
    elif step == "library":
        m.retrieve({**body, "query": q + " !"}, DEVELOPMENT_POLICY)
    else:
        client.post("/v1/retrieve", json={**body, "query": q + " ."}).raise_for_status()


def query(
    records: Annotated[int, typer.Option(min=10, help="Episodes in the one scope.")] = 500,
    queries: Annotated[int, typer.Option(min=10, help="Measured questions.")] = 300,
    warmup: Annotated[int, typer.Option(min=0, help="Unmeasured questions first.")] = 50,
    embedding: Annotated[str, typer.Option(help="local, hashing or http (from settings).")] = "local",
) -> None:
    """RFC 14.1: retrieve latency through HTTP with query embedding, beside its parts."""
    rng = random.Random(5)
    with tempfile.TemporaryDirectory(prefix="membrane-bench-query-") as tmp:
        settings = fresh_store(Settings(embedding_provider=embedding), Path(tmp))
        with Membrane(settings) as m:
            m.capture_many([_turn(rng, i) for i in range(records)])
            while m.embedding.run_batch()["claimed"]:
                pass
            with m.db.transaction() as conn:
                conn.execute(bench_sql.q("bench_analyze"))
            provider = m.embedding.provider
            if provider is None:
                raise typer.BadParameter("--embedding must name a provider")
            # RFC 8.2.3, 12.5: a vector out of its row costs a TOAST read per distance
            out_of_line = m.embedding.progress()["out_of_line"]
            steps_all = ("embed", "statement", "fused", "library", "http")
            times: dict[str, list[float]] = {k: [] for k in steps_all}
            with _Served(m) as url, httpx.Client(base_url=url, timeout=30) as client:
                for n in range(warmup + queries):
                    q = _question(rng, n)
                    steps = list(times)
                    rng.shuffle(steps)
                    took: dict[str, float] = {}
                    m.retrieve({"query": q, "scopes": [SCOPE]}, DEVELOPMENT_POLICY)  # caches q's vector
                    for step in steps:
                        t = time.perf_counter()
                        _ask(step, q, m, provider, client)
                        took[step] = (time.perf_counter() - t) * 1000
                    if n >= warmup:
                        for step, ms in took.items():
                            times[step].append(ms)
    table = Table(
        title=f"membrane bench query ({records} records in one scope, {queries} questions, "
        f"{embedding} embeddings)"
    )
    for col in ("what", "p50", "p99", "target"):
        table.add_column(col)
    labels = {
        "statement": "retrieve, query vector known (baseline)",
        "fused": "the same without late interaction",
        "embed": "query embedding alone",
        "library": "retrieve in-process, with embedding",
        "http": "POST /v1/retrieve, with embedding",
    }
    for step in ("statement", "fused", "embed", "library", "http"):
        target = f"p50 ≤ {TARGET_HTTP_P50_MS:g} ms" if step == "http" else ""
        table.add_row(
            labels[step],
            f"{statistics.median(times[step]):.2f} ms",
            f"{_pct(times[step], 0.99):.2f} ms",
            target,
        )
    console.print(table)
    console.print(f"vectors stored out of their row: {out_of_line} of {records} (RFC 8.2.3)", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``query`` to the ``bench`` group (RFC 14.1)."""
    app.command("query")(query)
