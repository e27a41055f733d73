"""Prometheus ``/metrics`` of the API: requests, latency, accepted operations, rate-limit refusals,
and the deployment gauges read at scrape time (RFC 14.2, 10.6).

The counters and the histogram are ``prometheus_client`` metrics in a registry of this app's
own. When ``PROMETHEUS_MULTIPROC_DIR`` is set before the process imports ``prometheus_client``
(``python -m api --workers N`` sets it for its processes, :mod:`api.server`), every API process
writes its values to files of its own in that directory, and a scrape, whichever process
answers it, sums the files of every process, so no counter goes back when consecutive
scrapes land on different processes. Rationale: docs/design/metrics-multiprocess.md.
"""

from __future__ import annotations

import os
import time
from collections.abc import Awaitable, Callable, Iterator, MutableMapping
from typing import Any

import prometheus_client
from prometheus_client import values
from prometheus_client.metrics_core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from membrane_core.metrics import DeploymentGauges

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: Latency histogram buckets in seconds.
BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.015, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: The ``method`` label's values; any other method is ``other``, so that a client cannot grow
#: the series (and each process's file in multiprocess mode) without bound.
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})

#: The exposition format of ``generate_latest``.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: The environment variable that puts prometheus_client in its multiprocess mode.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

# A counter's ``_created`` series is per process (and absent in multiprocess mode): one
# exposition in either mode.
prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]


def multiprocess_dir() -> str | None:
    """The multiprocess directory this process writes its values to, or ``None``.

    ``None`` also when the variable was set only after prometheus_client was imported: the
    values then live in this process's memory, and the registry of the app is what to read.
    """
    path = os.environ.get(MULTIPROC_ENV)
    return path if path and getattr(values.ValueClass, "_multiprocess", False) else None


def process_exited(pid: int) -> None:
    """RFC 14.2: what an exiting API process leaves in the multiprocess directory.

    Its counters stay (they are part of every total); ``mark_process_dead`` removes the files
    of its live gauges, which the API does not keep today.
    """
    path = multiprocess_dir()
    if path is not None:
        mark_process_dead(pid, path)  # type: ignore[no-untyped-call]


_Children = tuple[prometheus_client.Counter, prometheus_client.Histogram]


class Registry:
    """Counters and a latency histogram by (method, route, status), in Prometheus form."""

    def __init__(self) -> None:
        self.multiprocess_dir = multiprocess_dir()
        self.own = prometheus_client.CollectorRegistry()
        reg = self.own
        self.requests = prometheus_client.Counter(
            "membrane_http_requests",
            "HTTP requests by route and status.",
            ("method", "route", "status"),
            registry=reg,
        )
        self.latency = prometheus_client.Histogram(
            "membrane_http_request_duration_seconds",
            "HTTP request latency by route.",
            ("method", "route"),
            buckets=BUCKETS,
            registry=reg,
        )
        self.operations = prometheus_client.Counter(
            "membrane_operations_accepted",
            "Operations accepted into the inbox, by kind and initial status.",
            ("kind", "status"),
            registry=reg,
        )
        self.refusals = prometheus_client.Counter(
            "membrane_rate_limited",
            "Requests refused (429) over a key's rate limit, by key id.",
            ("actor", "limit"),
            registry=reg,
        )
        self.unchecked_requests = prometheus_client.Counter(
            "membrane_rate_unchecked",
            "Requests whose rate limit could not be checked (Redis down), admitted or refused.",
            ("limit", "outcome"),
            registry=reg,
        )
        # the labelled children of each (method, route, status): ``labels()`` takes a lock
        # and builds a key on every call; the request path looks one tuple up instead
        self._children: dict[tuple[str, str, int], _Children] = {}

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        """Record one finished request."""
        key = (method, route, status)
        pair = self._children.get(key)
        if pair is None:
            pair = self._children[key] = (
                self.requests.labels(method, route, str(status)),
                self.latency.labels(method, route),
            )
        pair[0].inc()
        pair[1].observe(seconds)

    def accepted(self, kind: str, status: str, n: int = 1) -> None:
        """Count operations accepted into the inbox, by kind and initial status."""
        self.operations.labels(kind, status).inc(n)

    def refused(self, actor: str, limit: str) -> None:
        """RFC 10.6: count a request refused over its key's rate limit, by key id (the actor)."""
        self.refusals.labels(actor, limit).inc()

    def unchecked(self, limit: str, *, admitted: bool) -> None:
        """RFC 10.6: count a request whose limit Redis could not check, by what it got."""
        self.unchecked_requests.labels(limit, "admitted" if admitted else "refused").inc()

    def render(self, gauges: DeploymentGauges | None = None) -> bytes:
        """RFC 14.2: Prometheus text format 0.0.4: every API process's figures (the sum over the
        multiprocess directory, else this app's), then ``gauges`` when given."""
        if self.multiprocess_dir is None:
            text = prometheus_client.generate_latest(self.own)
        else:
            text = prometheus_client.generate_latest(
                MultiProcessCollector(None, path=self.multiprocess_dir)  # type: ignore[no-untyped-call]
            )
        if gauges is not None:
            text += prometheus_client.generate_latest(GaugeCollector(gauges))
        return text


class GaugeCollector:
    """RFC 14.2: the deployment gauges of one scrape as metric families."""

    def __init__(self, gauges: DeploymentGauges) -> None:
        self.gauges = gauges

    def collect(self) -> Iterator[Metric]:
        """The inbox depth, the due work and its oldest item by kind, and the embedding lag."""
        g = self.gauges
        inbox = GaugeMetricFamily(
            "membrane_inbox_operations",
            "Operations in the inbox not yet finished, by kind and status (queued, running).",
            labels=("kind", "status"),
        )
        for (kind, status), n in sorted(g.inbox.items()):
            inbox.add_metric((kind, status), n)
        due = GaugeMetricFamily(
            "membrane_work_due_items", "Work items due and not dead, by kind.", labels=("kind",)
        )
        oldest = GaugeMetricFamily(
            "membrane_work_oldest_due_seconds",
            "Age of the oldest due work item, by kind (0 when none is due).",
            labels=("kind",),
        )
        for kind in sorted(g.work_due):
            due.add_metric((kind,), g.work_due[kind])
            oldest.add_metric((kind,), g.oldest_due_seconds.get(kind, 0.0))
        lag = GaugeMetricFamily(
            "membrane_embedding_lag_seconds",
            "Age of the oldest record still waiting for its embedding (0 when none waits).",
            value=g.embedding_lag_seconds,
        )
        yield from (inbox, due, oldest, lag, *review_families(g), *replica_families(g))


def replica_families(g: DeploymentGauges) -> tuple[Metric, ...]:
    """RFC 13.2, 14.2: the replica's replay lag and the reads sent to the primary instead;
    none without a replica."""
    if not g.replica_fallbacks:
        return ()
    lag = GaugeMetricFamily(
        "membrane_replica_lag_seconds",
        "Replay lag of the read replica at its last sample (-1 when it is not reachable).",
        value=-1.0 if g.replica_lag_seconds is None else g.replica_lag_seconds,
    )
    fell = CounterMetricFamily(
        "membrane_replica_fallbacks",
        "Reads this API process sent to the primary although a replica is configured, by reason.",
        labels=("reason",),
    )
    for reason, n in sorted(g.replica_fallbacks.items()):
        fell.add_metric((reason,), n)
    return (lag, fell)


def review_families(g: DeploymentGauges) -> tuple[Metric, ...]:
    """RFC 5.7, 14.2: the review queue's depth and oldest proposal by scope, and decisions by
    outcome."""
    depth = GaugeMetricFamily(
        "membrane_review_queue_depth", "Proposals waiting for a reviewer, by scope.", labels=("scope",)
    )
    age = GaugeMetricFamily(
        "membrane_review_oldest_seconds",
        "Age of the oldest proposal waiting for a reviewer, by scope.",
        labels=("scope",),
    )
    for scope in sorted(g.review_depth):
        depth.add_metric((scope,), g.review_depth[scope])
        age.add_metric((scope,), g.review_oldest_seconds.get(scope, 0.0))
    decisions = CounterMetricFamily(
        "membrane_review_decisions", "Proposals decided, by outcome.", labels=("decision",)
    )
    for outcome in sorted(g.review_decisions):
        decisions.add_metric((outcome,), g.review_decisions[outcome])
    return depth, age, decisions


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
            method = scope["method"] if scope["method"] in METHODS else "other"
            self.registry.observe(method, path, status, time.perf_counter() - start)
