"""One capture is one trace: the API's request, the ingest task and its statements (RFC 14.4).

In the first test the API is a real uvicorn server in a thread of the test process,
publishing through its real Celery dispatcher to the run's redis-server, and the ingest task
runs in the in-process worker (``celery_worker``, tests/queue/conftest.py). Both are in this
process, so one tracer provider with an in-memory exporter sees every span, and the log
lines are read from a handler set up as ``membrane_core.logs`` sets up every process's.
The second runs the processes of a deployment (``python -m api --workers 2``, a prefork
ingest pool) with their OTLP exporters pointed at a collector the test serves.
"""

from __future__ import annotations

import contextlib
import gzip
import io
import json
import logging
import threading
import zlib
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import httpx
import pytest
from celery.signals import task_success
from celery.worker import WorkController

pytest.importorskip("opentelemetry.sdk", reason="optional extra not installed: pip install 'membrane[otel]'")

from opentelemetry import trace
from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor
from opentelemetry.proto.collector.trace.v1 import trace_service_pb2
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import SpanKind
from opentelemetry.util._once import Once

from api.app import create_app
from api.ratelimit import Unlimited
from membrane_core import Settings, logs, tracing
from tests.support.api import ApiProcess, Server, api_env
from tests.support.processes import Spawn, wait_until
from workers import tracing as worker_tracing

pytestmark = pytest.mark.slow

log = logging.getLogger(__name__)

CAPTURE = {"source_kind": "event", "scope": "proj", "content": {"text": "deployed the API"}}
#: Tracing on in the settings of the API and of the worker; the first ``configure`` of the
#: process (``spans``) chose the in-memory exporter, so nothing is sent anywhere.
TRACED = {"otel_exporter": "otlp"}
TRACING = {"MEMBRANE_OTEL_EXPORTER": "otlp"}
RUN = "run/membrane.ingest"


def _unset_global_provider() -> None:
    # OpenTelemetry lets a process set its global tracer provider once; its own tests put
    # it back like this (opentelemetry-test-utils, reset_trace_globals).
    trace._TRACER_PROVIDER_SET_ONCE = Once()
    trace._TRACER_PROVIDER = None
    trace._PROXY_TRACER_PROVIDER = trace.ProxyTracerProvider()


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """Tracing on in this process, into memory (first, before any pool connects); off after."""
    exporter = InMemorySpanExporter()
    _unset_global_provider()
    on = tracing.configure(Settings(**TRACED), "membrane-test", processor=SimpleSpanProcessor(exporter))
    assert on and trace.get_tracer_provider() is tracing.provider()
    try:
        yield exporter
    finally:
        worker_tracing.uninstrument()
        tracing.shutdown()
        _unset_global_provider()


@pytest.fixture
def log_lines() -> Iterator[io.StringIO]:
    """The JSON lines this process logs at INFO, through the handler every process has."""
    out = io.StringIO()
    handler = logging.StreamHandler(out)
    handler.addFilter(logs.ContextFilter())
    handler.setFormatter(logs.JsonFormatter())
    root = logging.getLogger()
    level = root.level
    root.addHandler(handler)
    root.setLevel(logging.INFO)
    # a line from inside each task (the in-process worker logs its outcome only on errors)
    task_success.connect(_task_line, weak=False)
    try:
        yield out
    finally:
        task_success.disconnect(_task_line)
        root.removeHandler(handler)
        root.setLevel(level)


def _task_line(**_: Any) -> None:
    log.info("task done")


def parsed(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def by_id(finished: list[ReadableSpan]) -> dict[int, ReadableSpan]:
    return {s.context.span_id: s for s in finished}


def ancestors(span: ReadableSpan, index: dict[int, ReadableSpan]) -> list[ReadableSpan]:
    """The span's parent, its parent's parent, ... as far as they were exported."""
    out = []
    while span.parent is not None and span.parent.span_id in index:
        span = index[span.parent.span_id]
        out.append(span)
    return out


def capture(client: httpx.Client) -> dict[str, Any]:
    resp = client.post("/v1/captures?wait=20", json=CAPTURE)
    assert resp.status_code == 200, resp.text  # the worker finished it within the wait
    body: dict[str, Any] = resp.json()
    assert body["status"] == "succeeded"
    return {**body, "request_id": resp.headers["X-Request-ID"]}


@pytest.mark.in_process_worker(queues=("ingest",), env=TRACING)
def test_one_capture_is_one_trace(
    spans: InMemorySpanExporter,
    celery_worker: WorkController,
    log_lines: io.StringIO,  # after the worker, whose start sets up this process's logging
    settings: Settings,
    redis_url: str,
) -> None:
    # the API as served: its own Membrane (built once tracing is on) and Celery dispatcher
    app = create_app(settings.model_copy(update={"redis_url": redis_url, **TRACED}), rate_limiter=Unlimited())
    try:
        with Server(app) as server, httpx.Client(base_url=server.url, timeout=60) as client:
            bodies = [capture(client), capture(client)]
    finally:
        FastAPIInstrumentor.uninstrument_app(app)

    def finished() -> list[ReadableSpan]:
        return list(spans.get_finished_spans())

    # a task's span ends after its commit, which may follow the API's answer
    wait_until(lambda: sum(s.name == RUN for s in finished()) == 2, 20, "both ingest tasks' spans")
    done = finished()
    index = by_id(done)
    assert {SpanKind.SERVER, SpanKind.CLIENT, SpanKind.PRODUCER, SpanKind.CONSUMER} <= {s.kind for s in done}
    servers = [s for s in done if s.kind is SpanKind.SERVER]
    # one server span a request: FastAPI's own telemetry stands aside for the instrumentation
    assert [s.name for s in servers] == ["POST /v1/captures"] * 2
    assert servers[0].attributes is not None and servers[0].attributes["http.status_code"] == 200

    traces = []
    for server_span in servers:
        trace_id = server_span.context.trace_id
        traces.append(trace_id)
        mine = [s for s in done if s.context.trace_id == trace_id]
        # the root: the test's own request, through the httpx instrumentation
        root = ancestors(server_span, index)[-1]
        assert root.kind is SpanKind.CLIENT and root.name == "POST" and root.parent is None
        assert all(s is root or root in ancestors(s, index) for s in mine)
        # the request publishes the task, whose run continues the trace from its headers
        (run,) = [s for s in mine if s.name == RUN]
        assert run.kind is SpanKind.CONSUMER and run.parent is not None
        publish = index[run.parent.span_id]
        assert publish.name == "apply_async/membrane.ingest" and publish.kind is SpanKind.PRODUCER
        assert server_span in ancestors(publish, index)
        # the task's statements are below its span: its COPYs into the store among them
        statements = [s for s in mine if _statement(s) and run in ancestors(s, index)]
        assert {"SELECT", "COPY", "UPDATE"} <= {s.name for s in statements}
        assert any(_statement(s).startswith("COPY memory_records") for s in statements)
        assert all(s.kind is SpanKind.CLIENT and s.name == _statement(s).split()[0] for s in statements)
        # and the API's own (the COPY of the operation it accepts) are below the request's
        accepted = [s for s in mine if _statement(s).startswith("COPY operations")]
        assert len(accepted) == 1 and server_span in ancestors(accepted[0], index)
        assert run not in ancestors(accepted[0], index)
    assert traces[0] != traces[1]  # control: the second capture is a trace of its own

    # each capture's log lines, the API's access line and the task's, carry its trace id,
    # beside the request id that travels in the task's headers too (RFC 14.3)
    lines = parsed(log_lines)
    for trace_id, body in zip(traces, bodies, strict=True):
        ours = [line for line in lines if body["operation_id"] in line.get("operation_ids", ())]
        (access,) = [line for line in ours if line["logger"] == "api.access"]
        (task,) = [line for line in ours if line.get("task") == "membrane.ingest"]
        assert access["trace_id"] == task["trace_id"] == trace.format_trace_id(trace_id)
        assert access["request_id"] == task["request_id"] == body["request_id"]
        (run,) = [s for s in done if s.name == RUN and s.context.trace_id == trace_id]
        assert task["span_id"] == trace.format_span_id(run.context.span_id)
    assert not any("trace_id" in line for line in lines if line["logger"] == "api.app")  # outside a span


def _statement(span: ReadableSpan) -> str:
    """The SQL of a Postgres statement's span, else ''."""
    attributes = span.attributes or {}
    return str(attributes.get("db.statement", "")) if attributes.get("db.system") == "postgresql" else ""


# -- real processes, through OTLP ------------------------------------------------------------


class Collector:
    """An OTLP/HTTP trace collector on loopback: the spans it received, by name."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        received = self.spans
        lock = threading.Lock()

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                encoding = self.headers.get("Content-Encoding")
                if encoding == "gzip":
                    body = gzip.decompress(body)
                elif encoding == "deflate":
                    body = zlib.decompress(body)
                request = trace_service_pb2.ExportTraceServiceRequest.FromString(body)
                with lock:
                    received.extend(Collector.flatten(request))
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, *args: Any) -> None:  # quiet
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    @staticmethod
    def flatten(request: Any) -> list[dict[str, Any]]:
        out = []
        for resource_spans in request.resource_spans:
            attributes = {a.key: a.value.string_value for a in resource_spans.resource.attributes}
            for scope_spans in resource_spans.scope_spans:
                for span in scope_spans.spans:
                    out.append(
                        {
                            "service": attributes.get("service.name"),
                            "name": span.name,
                            "trace_id": span.trace_id.hex(),
                            "span_id": span.span_id.hex(),
                            "parent": span.parent_span_id.hex() or None,
                            "statement": next(
                                (a.value.string_value for a in span.attributes if a.key == "db.statement"), ""
                            ),
                        }
                    )
        return out

    def named(self, name: str) -> list[dict[str, Any]]:
        return [s for s in list(self.spans) if s["name"] == name]


@pytest.fixture
def collector() -> Iterator[Collector]:
    c = Collector()
    c.thread.start()
    try:
        yield c
    finally:
        c.server.shutdown()
        c.server.server_close()


def test_the_processes_of_a_deployment_send_one_trace(
    collector: Collector, spawn: Spawn, database_url: str, redis_url: str, tmp_path: Path
) -> None:
    otel = {
        "MEMBRANE_OTEL_EXPORTER": "otlp",
        "MEMBRANE_OTEL_ENDPOINT": collector.url,
        "MEMBRANE_EMBEDDING_PROVIDER": "none",
        "OTEL_BSP_SCHEDULE_DELAY": "100",  # the SDK's variables apply: spans leave within 0.1 s
    }
    spawn("worker", "ingest", env=otel)  # the prefork pool: its child turns tracing on
    server = ApiProcess(api_env(database_url, redis_url, tmp_path, **otel), tmp_path / "api.log", workers=2)
    try:
        server.wait_ready(90)
        with httpx.Client(base_url=server.url, timeout=30) as client:
            for _ in range(2):
                resp = client.post("/v1/captures?wait=20", json=CAPTURE)
                assert resp.status_code == 200 and resp.json()["status"] == "succeeded", resp.text
        wait_until(lambda: len(collector.named(RUN)) == 2, 30, "both tasks' spans at the collector")
    finally:
        with contextlib.suppress(Exception):
            server.stop()  # each API process sends what it holds as it exits
    wait_until(lambda: len(collector.named("POST /v1/captures")) == 2, 10, "both requests' spans")
    spans = list(collector.spans)
    index = {s["span_id"]: s for s in spans}

    def chain(span: dict[str, Any]) -> list[str]:
        names = []
        while span["parent"] in index:
            span = index[span["parent"]]
            names.append(span["name"])
        return names

    requests = collector.named("POST /v1/captures")
    assert len(requests) == 2 and {s["service"] for s in requests} == {"membrane-api"}
    assert requests[0]["trace_id"] != requests[1]["trace_id"]
    for request in requests:
        mine = [s for s in spans if s["trace_id"] == request["trace_id"]]
        (run,) = [s for s in mine if s["name"] == RUN]
        assert run["service"] == "membrane-worker"
        assert chain(run) == ["apply_async/membrane.ingest", "POST /v1/captures"]
        copies = [s for s in mine if s["statement"].startswith("COPY memory_records")]
        assert len(copies) == 1 and copies[0]["service"] == "membrane-worker"
        assert chain(copies[0])[:1] == [RUN] and chain(copies[0])[-1] == "POST /v1/captures"
    # probes make no span: wait_ready polled /healthz
    assert not [s for s in spans if "healthz" in s["name"]]
