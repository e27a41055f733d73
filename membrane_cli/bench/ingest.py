"""``membrane bench ingest``: captures through the batch endpoint vs a raw COPY (RFC 14.1).

Prints captures/s accepted (202s received) and committed (until every operation
succeeded), the single-capture accept latency, the RSS of the API and of every worker
process at start and end, and — same run, same database — a raw COPY of one row per
capture into a scratch table as the physical limit. With ``--via sdk`` the same run then
sends as many captures again through the Python SDK's ``ingest`` (``membrane_client``,
encoding included in its time), in the order batch, SDK, SDK, batch with half of each,
and reports its committed rate beside the batch endpoint's. ``--hyper-share`` sends that
share of the captures at sensitivity ``hyper``, and ``--encryption`` runs the stack with a
key ring, so that those are sealed (RFC 7.6): the same run with and without it measures
what sealing costs.
Targets are reported, never asserted.
"""

from __future__ import annotations

import base64
import json
import os
import platform
import queue
import random
import shutil
import tempfile
import threading
import time
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Annotated, Any

import httpx
import typer
from pydantic import SecretStr
from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from membrane_cli import bench
from membrane_cli.bench import scratch
from membrane_cli.stack import Stack, StackOptions, cpu_seconds, free_port, process_tree, rss_kib
from membrane_core import Membrane, Settings
from membrane_core.storage import db, embedded

console = Console()

#: Targets reported beside the figures (RFC 14.1): committed captures/s, accept p99, RSS per process.
TARGET_COMMITTED_PER_S = 3000
TARGET_ACCEPT_P99_MS = 15.0
TARGET_RSS_MB = 300
#: ``--via sdk``: the SDK's committed rate as a share of the batch endpoint's (RFC 14.1).
TARGET_SDK_SHARE = 0.9
MARK_START, MARK_END = "<!-- bench-ingest:start -->", "<!-- bench-ingest:end -->"

_WORDS = (
    "deploy",
    "billing",
    "cache",
    "migration",
    "timeout",
    "retry",
    "schema",
    "index",
    "queue",
    "latency",
    "rollback",
    "feature flag",
    "pager",
    "incident",
    "build",
    "release",
)


def make_capture(i: int, rng: random.Random) -> dict[str, Any]:
    """A realistic capture: mostly events and tool outputs, some facts and outcomes."""
    scope = f"bench-{i % 20}"
    a, b = rng.choice(_WORDS), rng.choice(_WORDS)
    roll = rng.random()
    if roll < 0.15:
        return {
            "source_kind": "observation",
            "scope": scope,
            "content": {
                "subject": f"service-{i % 500}",
                "predicate": "depends_on",
                "object": f"{a} {i % 97}",
            },
        }
    if roll < 0.25:
        return {
            "source_kind": "outcome",
            "scope": scope,
            "summary": f"{a} task finished",
            "content": {
                "text": f"the {a} task #{i} finished",
                "outcome": rng.choice(["success", "failure", "partial"]),
            },
        }
    if roll < 0.6:
        return {
            "source_kind": "tool_output",
            "scope": scope,
            "tags": [a],
            "content": {
                "text": f"{a} check on {b}: exit {i % 3}",
                "tool_calls": [{"tool": "bash", "args": {"cmd": f"make {a}"}, "result": f"{i % 7} warnings"}],
            },
        }
    return {
        "source_kind": "event",
        "scope": scope,
        "summary": f"{a} {b} event {i}",
        "content": {
            "text": f"the agent noticed {a} near {b} while handling request {i}",
            "entities": [f"service-{i % 500}"],
        },
    }


@dataclass
class Result:
    """Figures of one run."""

    count: int
    accepted_s: float = 0.0
    committed_s: float = 0.0
    succeeded: int = 0
    failed: int = 0
    single_ms: list[float] = field(default_factory=list)
    copy_s: float = 0.0
    rss_start: dict[str, int] = field(default_factory=dict)
    rss_end: dict[str, int] = field(default_factory=dict)
    errors: list[str] = field(default_factory=list)
    load: list[str] = field(default_factory=list)
    #: ``--via sdk``: the SDK phase's seconds until committed and its successes
    sdk_committed_s: float = 0.0
    sdk_succeeded: int = 0
    sdk_failed: int = 0
    #: ``--embedding``: the provider, and seconds from the last commit to the last vector
    embedding: str = "none"
    embed_lag_s: float | None = None
    #: ``--hyper-share`` and ``--encryption`` (RFC 7.6)
    hyper_share: float = 0.0
    encryption: bool = False
    #: records the run's captures left sealed (RFC 7.6)
    sealed: int = 0
    #: process -> CPU microseconds per committed capture while the captures were sent and
    #: committed (``/proc/<pid>/stat``; Postgres is every backend of its postmaster)
    cpu_us: dict[str, float] = field(default_factory=dict)

    def rate(self) -> float:
        """Captures committed per second through the batch endpoint."""
        return self.succeeded / self.committed_s if self.committed_s else 0.0

    def sdk_rate(self) -> float:
        """Captures committed per second through the SDK's ``ingest``."""
        return self.sdk_succeeded / self.sdk_committed_s if self.sdk_committed_s else 0.0


def _pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, max(0, round(p / 100 * len(s)) - 1))] if s else float("nan")


def rss_by_process(pids: dict[str, int]) -> dict[str, int]:
    """KiB of every process of every child: ``worker-ingest`` (main), ``worker-ingest/2``…"""
    out: dict[str, int] = {}
    for name, pid in pids.items():
        for n, p in enumerate(process_tree(pid)):
            kib = rss_kib(p)
            if kib is not None:
                out[name if n == 0 else f"{name}/{n}"] = kib
    return out


def _single_latency(client: httpx.Client, n: int, rng: random.Random) -> tuple[list[float], list[str]]:
    times, errs = [], []
    for i in range(n):
        body = make_capture(10_000_000 + i, rng)
        t = time.perf_counter()
        r = client.post("/v1/captures", json=body)
        times.append((time.perf_counter() - t) * 1000)
        if r.status_code != 202:
            errs.append(f"single capture: HTTP {r.status_code} {r.text[:200]}")
    return times, errs


def _send_batches(
    url: str, headers: dict[str, str], batches: list[bytes], clients: int, progress: Progress, task: Any
) -> tuple[list[str], list[str]]:
    work: queue.Queue[bytes] = queue.Queue()
    for b in batches:
        work.put(b)
    ids: list[str] = []
    errs: list[str] = []
    lock = threading.Lock()

    def client_loop() -> None:
        with httpx.Client(
            base_url=url, headers={**headers, "content-type": "application/json"}, timeout=120
        ) as c:
            while True:
                try:
                    body = work.get_nowait()
                except queue.Empty:
                    return
                r = c.post("/v1/captures:batch", content=body)
                with lock:
                    if r.status_code == 202:
                        ops = r.json()["operations"]
                        ids.extend(op["operation_id"] for op in ops)
                        progress.advance(task, len(ops))
                    else:
                        errs.append(f"batch: HTTP {r.status_code} {r.text[:200]}")

    threads = [threading.Thread(target=client_loop) for _ in range(clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return ids, errs


def _wait_committed(
    m: Membrane, ids: list[str], progress: Progress, task: Any, timeout: float
) -> tuple[int, int]:
    ok = bad = 0
    deadline = time.monotonic() + timeout
    # newest chunk first: the pool claims oldest first, so once the newest chunk has
    # finished the others have too, and only one chunk is ever polled (the measurement's
    # own queries stay off the database the pool is writing to)
    for start in reversed(range(0, len(ids), 2000)):
        views = m.inbox.wait(ids[start : start + 2000], max(0.0, deadline - time.monotonic()))
        ok += sum(v.status.value == "succeeded" for v in views)
        bad += sum(v.status.value == "failed" for v in views)
        progress.advance(task, len(views))
    return ok, bad


def _sdk_phase(
    url: str,
    api_key: str | None,
    count: int,
    offset: int,
    batch: int,
    clients: int,
    lib: Membrane,
    progress: Progress,
    timeout: float,
    res: Result,
) -> None:
    """``--via sdk``: ``count`` new captures through ``membrane_client``'s ``ingest``, timed
    from the first read of the input until every operation succeeded (encoding included)."""
    try:
        from membrane_client import Client
    except ModuleNotFoundError as exc:
        raise typer.BadParameter("--via sdk needs the client: pip install ./clients/python") from exc
    rng = random.Random(11 + offset)
    captures = (make_capture(20_000_000 + offset + i, rng) for i in range(count))  # read lazily
    sent = progress.add_task("accepted (SDK ingest)", total=count)
    committed = progress.add_task("committed (SDK ingest)", total=count)
    with Client(url, api_key=api_key, timeout=120) as client:
        t0 = time.perf_counter()
        result = client.ingest(
            captures,
            batch=batch,
            concurrency=clients,
            on_progress=lambda p: progress.update(sent, completed=p.items),
        )
        ids = [str(i) for i in result.operation_ids]
        res.errors += [f"sdk item {i.index}: {i.error}" for i in result.failures[:3]]
        ok, bad = _wait_committed(lib, ids, progress, committed, timeout)
        res.sdk_committed_s += time.perf_counter() - t0
    res.sdk_succeeded, res.sdk_failed = res.sdk_succeeded + ok, res.sdk_failed + bad


def loadavg() -> str:
    """The 1-minute load average (other work on the machine skews every figure)."""
    try:
        return Path("/proc/loadavg").read_text().split()[0]
    except OSError:
        return "?"


def hardware() -> str:
    """CPU model, cores, memory and Python of this machine."""
    model = "unknown CPU"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
        mem_kib = next(
            int(x.split()[1])
            for x in Path("/proc/meminfo").read_text().splitlines()
            if x.startswith("MemTotal")
        )
        mem = f"{mem_kib / 1024 / 1024:.0f} GiB RAM"
    except (OSError, StopIteration):
        mem = "unknown RAM"
    return f"{model}, {os.cpu_count()} cores, {mem}, Python {platform.python_version()}, {platform.system()}"


def report(res: Result, argv: str, hw: str) -> str:
    """The run as a markdown block for docs/benchmarks.md."""
    acc = res.count / res.accepted_s if res.accepted_s else 0.0
    com = res.succeeded / res.committed_s if res.committed_s else 0.0
    cp = res.count / res.copy_s if res.copy_s else 0.0
    p50, p99 = _pct(res.single_ms, 50), _pct(res.single_ms, 99)
    lines = [
        MARK_START,
        f"Command: `{argv}`  ",
        f"Hardware: {hw}  ",
        f"Run: {time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}; 1-minute load average "
        f"{' → '.join(res.load)} (the host's other work included)"
        + (
            f"; {100 * res.hyper_share:.0f} % of the captures at hyper, encryption "
            + (f"on ({res.sealed:,} records sealed)" if res.encryption else "off (plain)")
            if res.hyper_share or res.encryption
            else ""
        ),
        "",
        "| figure | measured | target |",
        "| --- | --- | --- |",
        f"| captures accepted (HTTP 202, batch endpoint) | {acc:,.0f}/s | |",
        f"| captures committed (operations succeeded) | {com:,.0f}/s "
        f"({res.succeeded:,} ok, {res.failed:,} failed) | ≥ {TARGET_COMMITTED_PER_S:,}/s |",
        f"| raw COPY of one row per capture, same database | {cp:,.0f} rows/s | physical limit |",
        f"| committed / COPY | {100 * com / cp if cp else 0:.1f} % | |",
        *(
            [
                f"| embedding lag ({res.embedding}): last commit to last vector | "
                + (f"{res.embed_lag_s:.1f} s" if res.embed_lag_s is not None else "timed out")
                + " | |"
            ]
            if res.embedding != "none"
            else []
        ),
        *(
            [
                f"| captures committed through the SDK's ingest, same run | {res.sdk_rate():,.0f}/s "
                f"({res.sdk_succeeded:,} ok, {res.sdk_failed:,} failed; "
                f"{100 * res.sdk_rate() / com if com else 0:.0f} % of the batch endpoint's) | "
                f"≥ {100 * TARGET_SDK_SHARE:.0f} % |"
            ]
            if res.sdk_committed_s
            else []
        ),
        f"| single-capture accept latency p50 / p99 ({len(res.single_ms)} sequential) | "
        f"{p50:.1f} ms / {p99:.1f} ms | p99 < {TARGET_ACCEPT_P99_MS:.0f} ms |",
        "",
        "| process | RSS start | RSS end | CPU per committed capture |",
        "| --- | --- | --- | --- |",
    ]
    for name in sorted(set(res.rss_start) | set(res.rss_end) | set(res.cpu_us)):
        s, e = res.rss_start.get(name), res.rss_end.get(name)
        lines.append(f"| {name} | {_mb(s)} | {_mb(e)} | {_cpu(res, name)} |")
    if res.cpu_us:
        lines.append(f"| all | | | {sum(res.cpu_us.values()):.0f} µs |")
    if res.errors:
        lines += ["", f"Errors ({len(res.errors)}): " + "; ".join(res.errors[:3])]
    lines.append(MARK_END)
    return "\n".join(lines)


def write_markdown(path: Path, block: str) -> None:
    """Replace the ingest block of ``path`` (or append it under an Ingest heading)."""
    bench.write_markdown(
        path, block, start=MARK_START, end=MARK_END, heading="Ingest (`membrane bench ingest`)"
    )


def _batches(
    count: int, size: int, rng: random.Random, hyper_share: float = 0.0
) -> tuple[list[bytes], list[tuple[Any, ...]]]:
    batches, rows = [], []
    levels = random.Random(13)  # its own stream: the mix of captures is the same at every share
    for start in range(0, count, size):
        caps = [make_capture(i, rng) for i in range(start, min(count, start + size))]
        for c in caps:
            if levels.random() < hyper_share:
                c["sensitivity"] = "hyper"
        batches.append(json.dumps({"captures": caps}, separators=(",", ":")).encode())
        rows += [(uuid.uuid4(), "capture", c["scope"], json.dumps(c, separators=(",", ":"))) for c in caps]
    return batches, rows


def ingest(
    count: Annotated[int, typer.Option("--count", "-n", min=1, help="Captures to send.")] = 100_000,
    batch: Annotated[int, typer.Option(min=1, max=1000, help="Captures per batch request.")] = 1000,
    clients: Annotated[int, typer.Option(min=1, max=64, help="Concurrent HTTP clients.")] = 4,
    single: Annotated[int, typer.Option(min=0, help="Sequential single captures for latency.")] = 1000,
    url: Annotated[
        str | None,
        typer.Option(help="A running API whose database is MEMBRANE_DATABASE_URL; default: a fresh stack."),
    ] = None,
    api_key: Annotated[str | None, typer.Option(envvar="MEMBRANE_API_KEY")] = None,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
    timeout: Annotated[float, typer.Option(help="Seconds to wait for every commit.")] = 1800,
    via: Annotated[
        str,
        typer.Option(
            help="batch: the batch endpoint; sdk: then as many again "
            "through the Python SDK's ingest, same run."
        ),
    ] = "batch",
    embedding: Annotated[
        str,
        typer.Option(
            help="The stack's embedding provider: none (what the throughput target is defined "
            "without) or local, which also reports how far the embedding pool lags behind."
        ),
    ] = "none",
    hyper_share: Annotated[
        float, typer.Option(min=0.0, max=1.0, help="Share of the batch captures sent at sensitivity hyper.")
    ] = 0.0,
    encryption: Annotated[
        bool, typer.Option(help="Run the stack with a fresh key ring: hyper captures are sealed (RFC 7.6).")
    ] = False,
) -> None:
    """N captures through POST /v1/captures:batch vs a raw COPY (RFC 14.1); prints figures."""
    if via not in ("batch", "sdk"):
        raise typer.BadParameter("--via is batch or sdk")
    if embedding not in ("none", "local", "hashing"):
        raise typer.BadParameter("--embedding is none, local or hashing")
    # the stack's children read it from the environment, as the store does
    os.environ["MEMBRANE_EMBEDDING_PROVIDER"] = embedding
    _key_ring(encryption)
    settings = Settings()
    stack: Stack | None = None
    rng = random.Random(7)
    res = Result(count=count, embedding=embedding, hyper_share=hyper_share, encryption=encryption)
    try:
        if url is None:
            data_dir = Path(tempfile.mkdtemp(prefix="membrane-bench-"))
            settings = bench.fresh_store(settings, data_dir).model_copy(update={"api_keys": {}})
            stack = Stack(settings, StackOptions(data_dir=data_dir, api_port=free_port(), flower=False))
            with console.status("starting a fresh stack (embedded Postgres, Redis, API, workers, beat)"):
                stack.start()
            url, dsn = f"http://127.0.0.1:{stack.opts.api_port}", stack.dsn
        else:
            dsn = db.resolve_dsn(settings.database_dsn(), settings.data_dir)
        pids = stack.pids() if stack else {}
        res.rss_start = rss_by_process(pids)
        res.load.append(loadavg())
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        lib = Membrane(settings.model_copy(update={"database_url": SecretStr(dsn)}))
        try:
            with console.status("encoding the captures"):
                batches, rows = _batches(count, batch, rng, hyper_share)
            with httpx.Client(base_url=url, headers=headers, timeout=30) as client:
                warm = [
                    client.post("/v1/captures", json=make_capture(0, rng)).json()["operation_id"]
                    for _ in range(20)
                ]  # warm-up: connections, caches
                # Time nothing before the ingest pool has booted and committed the warm-up.
                lib.inbox.wait(warm, 120)
                with console.status(f"{single} sequential single captures"):
                    res.single_ms, errs = _single_latency(client, single, rng)
                res.errors += errs
            if stack is not None and (master := embedded.postmaster(stack.opts.data_dir)) is not None:
                pids = {**pids, "postgres": master.pid}
            cpu_before = {name: cpu_seconds(pid) for name, pid in pids.items()}
            with bench.progress(console, 34) as progress:
                sent = progress.add_task("accepted (POST /v1/captures:batch)", total=count)
                committed = progress.add_task("committed (operations succeeded)", total=count)
                # --via sdk: batch, SDK, SDK, batch, half the captures each way, so that the
                # store's growth and the host's drift weigh on both alike
                half = len(batches) // 2 if via == "sdk" else len(batches)
                for first, part in ((True, batches[:half]), (False, batches[half:])):
                    if not part:
                        continue
                    t0 = time.perf_counter()
                    ids, errs = _send_batches(url, headers, part, clients, progress, sent)
                    res.accepted_s += time.perf_counter() - t0
                    res.errors += errs
                    ok, bad = _wait_committed(lib, ids, progress, committed, timeout)
                    res.succeeded, res.failed = res.succeeded + ok, res.failed + bad
                    res.committed_s += time.perf_counter() - t0
                    if via == "sdk" and first:
                        n = half * batch
                        _sdk_phase(url, api_key, n, 0, batch, clients, lib, progress, timeout, res)
                        _sdk_phase(url, api_key, count - n, n, batch, clients, lib, progress, timeout, res)
            done = res.succeeded + res.sdk_succeeded
            res.cpu_us = {
                name: (cpu_seconds(pid) - cpu_before[name]) / done * 1e6 if done else 0.0
                for name, pid in pids.items()
            }
            res.sealed = sum(lib.sealing.progress()["by_key"].values())
            if embedding != "none":
                res.embed_lag_s = _embedding_lag(lib, timeout)
            res.rss_end = rss_by_process(pids)
            res.load.append(loadavg())
            with console.status("raw COPY of the same rows into a scratch table"):
                t = time.perf_counter()
                scratch.copy_rows(dsn, rows)
                res.copy_s = time.perf_counter() - t
        finally:
            lib.close()
    finally:
        if stack:
            with console.status("stopping the stack"):
                stack.stop()
            shutil.rmtree(stack.opts.data_dir, ignore_errors=True)
    argv = (
        f"membrane bench ingest --count {count} --batch {batch} --clients {clients} --single {single}"
        + (" --via sdk" if via == "sdk" else "")
        + (f" --embedding {embedding}" if embedding != "none" else "")
        + (f" --hyper-share {hyper_share:g}" if hyper_share else "")
        + (" --encryption" if encryption else "")
    )
    block = report(res, argv, hardware())
    _print(res)
    if markdown:
        write_markdown(markdown, block)
        console.print(f"wrote {markdown}")


def _key_ring(on: bool) -> None:
    """RFC 7.6: a fresh key ring in the environment the stack's children read, or none."""
    names = ("MEMBRANE_ENCRYPTION_KEYS", "MEMBRANE_ENCRYPTION_INDEX_KEY", "MEMBRANE_ENCRYPTION_KEY_ID")
    for name in names:
        os.environ.pop(name, None)
    if on:
        os.environ[names[0]] = json.dumps({"bench": base64.b64encode(os.urandom(32)).decode()})
        os.environ[names[1]] = base64.b64encode(os.urandom(32)).decode()


def _embedding_lag(lib: Membrane, timeout: float) -> float | None:
    """RFC 12.1: seconds from now (the last commit) until no ``embed`` item is pending."""
    t0 = time.perf_counter()
    deadline = t0 + timeout
    with console.status("waiting for the embedding pool"):
        while time.perf_counter() < deadline:
            backlog = lib.metrics().get("work_backlog") or {}
            if not (backlog.get("embed") or {}).get("pending"):
                return time.perf_counter() - t0
            time.sleep(0.5)
    return None


def _mb(kib: int | None) -> str:
    return f"{kib / 1024:.0f} MB" if kib else ""


def _cpu(res: Result, name: str) -> str:
    """RFC 14.1: a process's CPU time per committed capture, its pool's children included."""
    return f"{res.cpu_us[name]:.0f} µs" if name in res.cpu_us else ""


def _print(res: Result) -> None:
    acc = res.count / res.accepted_s if res.accepted_s else 0.0
    com = res.succeeded / res.committed_s if res.committed_s else 0.0
    cp = res.count / res.copy_s if res.copy_s else 0.0
    t = Table(title="membrane bench ingest", title_justify="left")
    for col in ("figure", "measured", "target"):
        t.add_column(col)
    t.add_row("captures accepted", f"{acc:,.0f}/s", "")
    t.add_row(
        "captures committed",
        f"{com:,.0f}/s ({res.succeeded:,} ok, {res.failed:,} failed)",
        f"≥ {TARGET_COMMITTED_PER_S:,}/s",
    )
    if res.sdk_committed_s:
        t.add_row(
            "committed through the SDK",
            f"{res.sdk_rate():,.0f}/s ({res.sdk_succeeded:,} ok, "
            f"{100 * res.sdk_rate() / com if com else 0:.0f} % of the batch endpoint's)",
            f"≥ {100 * TARGET_SDK_SHARE:.0f} %",
        )
    if res.embedding != "none":
        lag = f"{res.embed_lag_s:.1f} s" if res.embed_lag_s is not None else "timed out"
        t.add_row(f"embedding lag ({res.embedding}): last commit → last vector", lag, "")
    t.add_row("raw COPY, same database", f"{cp:,.0f} rows/s", "physical limit")
    t.add_row("committed / COPY", f"{100 * com / cp if cp else 0:.1f} %", "")
    t.add_row("load average (1 min)", " → ".join(res.load), "")
    if res.hyper_share or res.encryption:
        sealed = "on (sealed)" if res.encryption else "off (plain)"
        t.add_row(
            "captures at hyper / encryption",
            f"{100 * res.hyper_share:.0f} % / {sealed}, {res.sealed:,} records sealed",
            "",
        )
    t.add_row(
        "single accept p50 / p99",
        f"{_pct(res.single_ms, 50):.1f} / {_pct(res.single_ms, 99):.1f} ms",
        f"p99 < {TARGET_ACCEPT_P99_MS:.0f} ms",
    )
    for name in sorted(set(res.rss_start) | set(res.rss_end)):
        s, e = res.rss_start.get(name, 0), res.rss_end.get(name, 0)
        t.add_row(f"RSS {name}", f"{s / 1024:.0f} → {e / 1024:.0f} MB", f"< {TARGET_RSS_MB} MB")
    for name in sorted(res.cpu_us):
        t.add_row(f"CPU {name}", f"{_cpu(res, name)} a committed capture", "")
    if res.cpu_us:
        t.add_row("CPU, every process", f"{sum(res.cpu_us.values()):.0f} µs a committed capture", "")
    console.print(t)
    for err in res.errors[:5]:
        console.print(f"[red]{err}[/red]")


def register(app: typer.Typer) -> None:
    """Add ``ingest`` to the ``bench`` group (RFC 14.1)."""
    app.command("ingest")(ingest)
