"""LangGraph store latency through ``MembraneStore`` beside the same calls through the SDK.

Needs the ``langgraph`` extra and a running stack (``bash scripts/run.sh``); it writes only
into scopes of its own (``bench-<run>:...``). Each measured step is timed through the store
and then as the SDK requests that the store sends for it, alternately, so drift on the
machine falls on both alike (RFC 10.9.1):

- put of a new key: the key's lookup (``GET /v1/records``) and the capture, waited for;
- put of an existing key: the lookup and the supersede, waited for;
- search with a query: the scopes (``GET /v1/scopes``) and a retrieval;
- search without one: the scopes and a list page.

The floor is the one write or read alone (a capture, a supersede, a retrieval, a list), what a
caller that already knew the record id and the scope would send.

    MEMBRANE_EMBEDDING_PROVIDER=none membrane run --port 18338 --no-flower &
    .venv/bin/python clients/python/bench/langgraph_store.py --url http://127.0.0.1:18338 --n 200
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from membrane_client import Client
from membrane_client import _langgraph_items as items
from membrane_client.langgraph import MembraneStore

#: The store's latency beside the SDK's for the same requests (RFC 10.9.1).
TARGET_RATIO = 1.2
WORDS = ["postgres", "redis", "vacuum", "latency", "python", "deploy", "index", "replica", "queue"]


@dataclass
class Timings:
    """Seconds per call of one step: through the store, the same requests through the SDK, and
    the single request alone."""

    store: list[float]
    sdk: list[float]
    floor: list[float]


def timed(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> float:
    start = time.perf_counter()
    fn(*args, **kwargs)
    return time.perf_counter() - start


def value(i: int, version: int) -> dict[str, Any]:
    words = " ".join(WORDS[(i + j) % len(WORDS)] for j in range(4))
    return {"content": f"memory {i} version {version}: {words}", "n": i}


def _finished(op: Any) -> None:
    assert op.finished, op
    op.raise_for_error()


class Run:
    """One run: a store and an SDK client on the same server, each in its own namespace."""

    def __init__(self, url: str, n: int) -> None:
        self.n = n
        tag = uuid.uuid4().hex[:8]
        self.prefix = f"bench-{tag}:"
        self.store = MembraneStore(url, scope_prefix=self.prefix)
        self.sdk = Client(url, timeout=30.0)
        self.store_ns = ("bench", "store")
        self.sdk_ns = ("bench", "sdk")
        self.sdk_scope = items.scope_of(self.sdk_ns, self.prefix)
        self.floor_ids: dict[int, Any] = {}

    def close(self) -> None:
        self.store.close()
        self.sdk.close()

    # -- the SDK side: what the store sends -------------------------------------------------

    def _lookup(self, key: str) -> Any:
        return self.sdk.list_records(scope=self.sdk_scope, tag=items.key_tag(key), type="working", limit=200)

    def _capture_body(self, i: int, version: int) -> dict[str, Any]:
        key, v = f"k{i}", value(i, version)
        text = items.index_text(v, ["$"])
        now = datetime.now(UTC)
        return items.capture_body(
            self.sdk_scope, self.sdk_ns, key, v, text=text, now=now, ttl=None, sensitivity=None
        )

    def sdk_put_new(self, i: int) -> None:
        self._lookup(f"k{i}")
        _finished(self.sdk.capture(self._capture_body(i, 0), wait=30))

    def sdk_put_update(self, i: int, version: int) -> None:
        page = self._lookup(f"k{i}")
        current = items.stored(page.records[0], self.prefix)
        assert current is not None
        v = value(i, version)
        revised = items.revised_body(
            current, v, text=items.index_text(v, ["$"]), now=datetime.now(UTC), ttl=None
        )
        _finished(
            self.sdk.supersede(current.record_id, revised, f"langgraph store put of key 'k{i}'", wait=30)
        )

    def floor_capture(self, i: int, scope: str) -> None:
        op = self.sdk.capture({**self._capture_body(i, 0), "scope": scope}, wait=30)
        _finished(op)
        self.floor_ids[i] = op.record_ids[0]

    def floor_supersede(self, i: int) -> None:
        revised = {"payload": {"thread_id": "floor", "task_state": "done", "context_summary": f"floor {i}"}}
        op = self.sdk.supersede(self.floor_ids[i], revised, "floor", wait=30)
        _finished(op)
        self.floor_ids[i] = op.record_ids[-1]

    def sdk_search(self, query: str | None) -> None:
        self.sdk.list_scopes()
        if query:
            self.sdk.retrieve(
                query, scopes=[self.sdk_scope], limit=10, memory_types=["working"], tags=["langgraph"]
            )
        else:
            self.sdk.list_records(scope=[self.sdk_scope], tag="langgraph", type="working", limit=10)

    # -- phases -----------------------------------------------------------------------------

    def warm_up(self) -> None:
        """Open both clients' connections and touch every path once, untimed."""
        warm = ("bench", "warm")
        for version in range(3):
            self.store.put(warm, "w", value(0, version))
            self.store.search(warm, query="postgres")
            self.store.search(warm)
        self.sdk.list_scopes()
        self.sdk.retrieve("postgres", scopes=[self.sdk_scope], limit=10)
        self.sdk.list_records(scope=self.sdk_scope, limit=10)

    def puts(self) -> tuple[Timings, Timings]:
        new, update = Timings([], [], []), Timings([], [], [])
        floor_scope = items.scope_of(("bench", "floor"), self.prefix)
        for i in range(self.n):
            new.store.append(timed(self.store.put, self.store_ns, f"k{i}", value(i, 0)))
            new.sdk.append(timed(self.sdk_put_new, i))
            new.floor.append(timed(self.floor_capture, i, floor_scope))
        for i in range(self.n):
            update.store.append(timed(self.store.put, self.store_ns, f"k{i}", value(i, 1)))
            update.sdk.append(timed(self.sdk_put_update, i, 1))
            update.floor.append(timed(self.floor_supersede, i))
        return new, update

    def searches(self, query: bool) -> Timings:
        t = Timings([], [], [])
        for i in range(self.n):
            q = f"{WORDS[i % len(WORDS)]} {WORDS[(i + 3) % len(WORDS)]}" if query else None
            t.store.append(timed(self.store.search, self.store_ns, query=q, limit=10))
            t.sdk.append(timed(self.sdk_search, q))
            if q:
                floor = {
                    "scopes": [self.sdk_scope],
                    "limit": 10,
                    "memory_types": ["working"],
                    "tags": ["langgraph"],
                }
                t.floor.append(timed(self.sdk.retrieve, q, **floor))
            else:
                t.floor.append(timed(self.sdk.list_records, scope=self.sdk_scope, tag="langgraph", limit=10))
        return t


def ms(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return 1000 * ordered[min(len(ordered) - 1, max(0, round(p / 100 * len(ordered)) - 1))]


def row(name: str, t: Timings) -> str:
    ratio = statistics.median(t.store) / statistics.median(t.sdk)
    verdict = "ok" if ratio <= TARGET_RATIO else "over"
    cells = [f"{ms(values, 50):.1f} / {ms(values, 95):.1f}" for values in (t.store, t.sdk, t.floor)]
    return f"| {name} | {cells[0]} | {cells[1]} | {ratio:.2f} ({verdict}) | {cells[2]} |"


def hardware() -> str:
    model = "unknown CPU"
    cpuinfo = Path("/proc/cpuinfo")
    if cpuinfo.exists():
        for line in cpuinfo.read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    return f"{model}, {os.cpu_count()} cores, Python {platform.python_version()}, {platform.system()}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--url", default="http://127.0.0.1:8080")
    parser.add_argument("--n", type=int, default=200, help="calls of each step on each side")
    args = parser.parse_args()
    run = Run(args.url, args.n)
    try:
        run.warm_up()
        new, update = run.puts()
        query, listing = run.searches(True), run.searches(False)
    finally:
        run.close()
    print(f"{args.n} calls a step, {datetime.now(UTC):%Y-%m-%d}, {hardware()}")
    print("| step | MembraneStore p50 / p95 ms | SDK, same requests | p50 ratio | SDK, one request |")
    print("| --- | --- | --- | --- | --- |")
    print(row("put, new key", new))
    print(row("put, existing key (supersede)", update))
    print(row("search with a query (retrieve)", query))
    print(row("search without a query (list)", listing))


if __name__ == "__main__":
    main()
