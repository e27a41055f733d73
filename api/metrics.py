"""Prometheus text exposition of request counts, latency, accepted operations and rate-limit
refusals (RFC 14.2, 10.6).

A tiny in-process registry: one API process is one Prometheus target, so nothing
needs the multi-process machinery of a client library.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Latency histogram buckets in seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)


class Registry:
    """Counters and a latency histogram keyed by (method, route, status)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.requests: dict[tuple[str, str, str], int] = defaultdict(int)
        self.latency_sum: dict[tuple[str, str], float] = defaultdict(float)
        self.latency_count: dict[tuple[str, str], int] = defaultdict(int)
        self.latency_buckets: dict[tuple[str, str], list[int]] = defaultdict(lambda: [0] * len(BUCKETS))
        self.operations: dict[tuple[str, str], int] = defaultdict(int)
        self.refusals: dict[tuple[str, str], int] = defaultdict(int)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Record one finished request."""
        with self._lock:
            self.requests[(method, route, str(status))] += 1
            key = (method, route)
            self.latency_sum[key] += seconds
            self.latency_count[key] += 1
            buckets = self.latency_buckets[key]
            for i, bound in enumerate(BUCKETS):
                if seconds <= bound:
                    buckets[i] += 1

    def accepted(self, kind: str, status: str, n: int = 1) -> None:
        """Count operations accepted into the inbox, by kind and initial status."""
        with self._lock:
            self.operations[(kind, status)] += n

    def refused(self, actor: str, limit: str) -> None:
        """RFC 10.6: count a request refused over its key's rate limit, by key id (the actor)."""
        with self._lock:
            self.refusals[(actor, limit)] += 1

    def render(self) -> str:
        """The registry in Prometheus text format 0.0.4."""
        out: list[str] = []
        with self._lock:
            out += [
                "# HELP membrane_http_requests_total HTTP requests by route and status.",
                "# TYPE membrane_http_requests_total counter",
            ]
            for (method, route, status), n in sorted(self.requests.items()):
                out.append(
                    f'membrane_http_requests_total{{method="{method}",route="{_esc(route)}",'
                    f'status="{status}"}} {n}'
                )
            out += [
                "# HELP membrane_http_request_duration_seconds HTTP request latency by route.",
                "# TYPE membrane_http_request_duration_seconds histogram",
            ]
            for (method, route), count in sorted(self.latency_count.items()):
                labels = f'method="{method}",route="{_esc(route)}"'
                for bound, n in zip(BUCKETS, self.latency_buckets[(method, route)], strict=True):
                    out.append(f'membrane_http_request_duration_seconds_bucket{{{labels},le="{bound}"}} {n}')
                out.append(f'membrane_http_request_duration_seconds_bucket{{{labels},le="+Inf"}} {count}')
                out.append(
                    f"membrane_http_request_duration_seconds_sum{{{labels}}} "
                    f"{self.latency_sum[(method, route)]:.6f}"
                )
                out.append(f"membrane_http_request_duration_seconds_count{{{labels}}} {count}")
            out += [
                "# HELP membrane_operations_accepted_total Operations accepted into the inbox.",
                "# TYPE membrane_operations_accepted_total counter",
            ]
            for (kind, status), n in sorted(self.operations.items()):
                out.append(f'membrane_operations_accepted_total{{kind="{kind}",status="{status}"}} {n}')
            out += [
                "# HELP membrane_rate_limited_total Requests refused (429) over a key's rate limit.",
                "# TYPE membrane_rate_limited_total counter",
            ]
            for (actor, limit), n in sorted(self.refusals.items()):
                out.append(f'membrane_rate_limited_total{{actor="{_esc(actor)}",limit="{limit}"}} {n}')
        return "\n".join(out) + "\n"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"')


class MetricsMiddleware:
    """Pure ASGI middleware timing every HTTP request by its route template."""

    def __init__(self, app: ASGIApp, registry: Registry) -> None:
        self.app = app
        self.registry = registry

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        start = time.perf_counter()
        status = 500

        async def send_wrapper(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_wrapper)
        finally:
            route = scope.get("route")
            path = getattr(route, "path", None) or "unmatched"
            self.registry.observe(scope["method"], path, status, time.perf_counter() - start)
