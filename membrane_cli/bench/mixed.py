"""``membrane bench load``: a new stack's mixed load, without and with the local model (RFC 14.1, 12.4).

Each provider gets a fresh stack as ``membrane run`` starts it (its defaults, no keys), a
seed of turns committed and embedded, then ``--clients`` closed-loop clients for
``--duration`` seconds, each request drawn from captures, retrieves and list reads. The run
with ``none`` is the baseline: the same load on a stack that embeds nothing. Printed: the
throughput and p50/p99 per request kind, the embedding backlog over the load and after it
until it drains, the CPU each process used, and the captures accepted against committed.
Targets are reported, never asserted.
"""

from __future__ import annotations

import os
import random
import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import SecretStr
from rich.console import Console

from membrane_cli import bench
from membrane_cli.bench import turns
from membrane_cli.bench.ingest import hardware, loadavg
from membrane_cli.bench.mixed_report import MARK_END, MARK_START, print_run, report
from membrane_cli.stack import Stack, StackOptions, cpu_seconds, free_port
from membrane_core import Membrane, Settings
from membrane_core.storage import embedded

console = Console()

#: The request kinds and their shares of the load: an agent captures each turn, asks its
#: memory before answering, and now and then pages through a scope.
KINDS = ("capture", "retrieve", "list")
WEIGHTS = (0.4, 0.4, 0.2)
SCOPES = 20


@dataclass
class Run:
    """One provider's figures."""

    provider: str
    duration: float = 0.0
    #: request kind -> latencies in ms of the answered requests
    times: dict[str, list[float]] = field(default_factory=lambda: {k: [] for k in KINDS})
    errors: dict[str, int] = field(default_factory=lambda: {k: 0 for k in KINDS})
    accepted: list[str] = field(default_factory=list)
    committed: int = 0
    failed: int = 0
    #: (seconds since the load started, embed items due, embedding lag in seconds)
    backlog: list[tuple[float, int, float]] = field(default_factory=list)
    #: seconds after the load stopped until no embed item was left (None: not within the wait)
    drained_s: float | None = None
    #: process -> share of one core over the load's window
    cpu: dict[str, float] = field(default_factory=dict)
    load: list[str] = field(default_factory=list)
    note: str = ""


def _capture(rng: random.Random, scope: str) -> dict[str, Any]:
    speaker = rng.choice(("user", "assistant"))
    text = turns.turn(rng)
    return {
        "source_kind": "event",
        "scope": scope,
        "content": {"text": f"{speaker}: {text}", "speaker": speaker},
    }


def _client(url: str, deadline: float, seed: int, run: Run, lock: threading.Lock) -> None:
    rng = random.Random(seed)
    times: dict[str, list[float]] = {k: [] for k in KINDS}
    errors = dict.fromkeys(KINDS, 0)
    ids: list[str] = []
    with httpx.Client(base_url=url, timeout=60) as c:
        while time.monotonic() < deadline:
            kind = rng.choices(KINDS, WEIGHTS)[0]
            scope = f"load-{rng.randrange(SCOPES)}"
            t = time.perf_counter()
            try:
                if kind == "capture":
                    r = c.post("/v1/captures", json=_capture(rng, scope))
                elif kind == "retrieve":
                    body = {"query": turns.question(rng), "scopes": [scope], "limit": 10}
                    r = c.post("/v1/retrieve", json=body)
                else:
                    r = c.get("/v1/records", params={"scope": scope, "limit": 20})
            except httpx.HTTPError:
                errors[kind] += 1
                continue
            ms = (time.perf_counter() - t) * 1000
            if r.status_code in (200, 202):
                times[kind].append(ms)
                if kind == "capture":
                    ids.append(r.json()["operation_id"])
            else:
                errors[kind] += 1
    with lock:
        for k in KINDS:
            run.times[k] += times[k]
            run.errors[k] += errors[k]
        run.accepted += ids


class Sampler(threading.Thread):
    """The embed backlog once a second, from the deployment gauges (RFC 14.2)."""

    def __init__(self, lib: Membrane, run: Run, t0: float) -> None:
        super().__init__(daemon=True)
        self.lib, self.run_, self.t0 = lib, run, t0
        self.halt = threading.Event()

    def run(self) -> None:
        while not self.halt.is_set():
            self.sample()
            self.halt.wait(1.0)

    def sample(self) -> tuple[int, float]:
        g = self.lib.deployment_gauges()
        due, lag = g.work_due.get("embed", 0), g.embedding_lag_seconds
        self.run_.backlog.append((time.monotonic() - self.t0, due, lag))
        return due, lag


def _seed(url: str, lib: Membrane, count: int, rng: random.Random) -> None:
    """``count`` turns over the scopes through the batch endpoint, committed and embedded."""
    caps = [_capture(rng, f"load-{i % SCOPES}") for i in range(count)]
    ids: list[str] = []
    with httpx.Client(base_url=url, timeout=120) as c:
        for start in range(0, count, 500):
            r = c.post("/v1/captures:batch", json={"captures": caps[start : start + 500]})
            r.raise_for_status()
            ids += [op["operation_id"] for op in r.json()["operations"]]
    lib.inbox.wait(ids, 600)
    _drained(lib, 600)


def _drained(
    lib: Membrane, timeout: float, on_sample: Callable[[], tuple[int, float]] | None = None
) -> float | None:
    """Seconds until no embed item is left (``None`` after ``timeout``)."""
    t0 = time.monotonic()
    while time.monotonic() - t0 < timeout:
        if on_sample is not None:
            due, lag = on_sample()
        else:
            g = lib.deployment_gauges()
            due, lag = g.work_due.get("embed", 0), g.embedding_lag_seconds
        if not due and not lag:
            return time.monotonic() - t0
        time.sleep(1.0)
    return None


def _committed(lib: Membrane, ids: list[str], timeout: float) -> tuple[int, int]:
    ok = bad = 0
    for start in range(0, len(ids), 2000):
        views = lib.inbox.wait(ids[start : start + 2000], timeout)
        ok += sum(v.status.value == "succeeded" for v in views)
        bad += sum(v.status.value != "succeeded" for v in views)
    return ok, bad


def measure(provider: str, *, clients: int, duration: float, seed: int, drain_timeout: float) -> Run:
    """One fresh stack with ``provider``, seeded, under the load; its figures."""
    run = Run(provider=provider)
    os.environ["MEMBRANE_EMBEDDING_PROVIDER"] = provider  # the children read it, as the store does
    data_dir = Path(tempfile.mkdtemp(prefix="membrane-bench-load-"))
    settings = bench.fresh_store(Settings(), data_dir).model_copy(
        update={"api_keys": {}, "api_keys_file": None}
    )
    stack = Stack(
        settings,
        StackOptions(data_dir=data_dir, api_port=free_port(), flower=False, worker_metrics_port=None),
    )
    try:
        with console.status(f"[{provider}] starting a fresh stack as membrane run does"):
            stack.start()
        url = f"http://127.0.0.1:{stack.opts.api_port}"
        lib = Membrane(settings.model_copy(update={"database_url": SecretStr(stack.dsn)}))
        try:
            with console.status(f"[{provider}] seeding {seed} turns, committed and embedded"):
                _seed(url, lib, seed, random.Random(5))
            pids = stack.pids()
            master = embedded.postmaster(data_dir)
            if master is not None:
                pids["postgres"] = master.pid
            before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            own = time.process_time()  # the load generator's threads, not its children
            run.load.append(loadavg())
            t0 = time.monotonic()
            sampler = Sampler(lib, run, t0)
            sampler.start()
            lock = threading.Lock()
            threads = [
                threading.Thread(target=_client, args=(url, t0 + duration, 1000 + i, run, lock))
                for i in range(clients)
            ]
            with console.status(f"[{provider}] {clients} clients for {duration:.0f} s"):
                for t in threads:
                    t.start()
                for t in threads:
                    t.join()
            run.duration = time.monotonic() - t0
            run.cpu = {n: (cpu_seconds(p) - before[n]) / run.duration for n, p in pids.items()}
            run.cpu["load generator"] = (time.process_time() - own) / run.duration
            run.load.append(loadavg())
            sampler.halt.set()
            sampler.join()
            with console.status(f"[{provider}] waiting for every capture and the embedding backlog"):
                run.committed, run.failed = _committed(lib, run.accepted, drain_timeout)
                run.drained_s = _drained(lib, drain_timeout, sampler.sample)
        finally:
            lib.close()
    finally:
        with console.status("stopping the stack"):
            stack.stop()
        shutil.rmtree(data_dir, ignore_errors=True)
    return run


def load(
    clients: Annotated[int, typer.Option(min=1, max=64, help="Concurrent closed-loop clients.")] = 8,
    duration: Annotated[float, typer.Option(min=1, help="Seconds of load per provider.")] = 60,
    seed: Annotated[int, typer.Option(min=0, help="Turns captured and embedded before the load.")] = 1000,
    provider: Annotated[
        list[str] | None, typer.Option(help="Providers, in order; the first is the baseline.")
    ] = None,
    drain_timeout: Annotated[float, typer.Option(help="Seconds to wait for the backlog to drain.")] = 900,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
) -> None:
    """RFC 12.4, 14.1: the mixed load of a new stack with each provider; retrieval beside the baseline."""
    providers = provider or ["none", "local"]
    for p in providers:
        if p not in ("none", "local", "hashing"):
            raise typer.BadParameter("--provider is none, local or hashing")
    saved = os.environ.get("MEMBRANE_EMBEDDING_PROVIDER")
    try:
        runs = [
            measure(p, clients=clients, duration=duration, seed=seed, drain_timeout=drain_timeout)
            for p in providers
        ]
    finally:
        if saved is None:
            os.environ.pop("MEMBRANE_EMBEDDING_PROVIDER", None)
        else:
            os.environ["MEMBRANE_EMBEDDING_PROVIDER"] = saved
    argv = f"membrane bench load --clients {clients} --duration {duration:g} --seed {seed}" + "".join(
        f" --provider {p}" for p in (provider or [])
    )
    for r in runs:
        print_run(console, r, runs[0])
    if markdown:
        bench.write_markdown(
            markdown,
            report(runs, argv, hardware()),
            start=MARK_START,
            end=MARK_END,
            heading="Mixed load (`membrane bench load`)",
        )
        console.print(f"wrote {markdown}")


def register(app: typer.Typer) -> None:
    """Add ``load`` to the ``bench`` group (RFC 14.1)."""
    app.command("load")(load)
