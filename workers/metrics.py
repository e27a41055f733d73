"""Prometheus figures of a Celery worker pool: its tasks by queue and outcome, their run time,
retries and failures, served by the pool itself (RFC 14.2).

With ``MEMBRANE_WORKER_METRICS_PORT`` set, the pool's main process serves ``GET /metrics`` on
``MEMBRANE_WORKER_METRICS_HOST`` (loopback by default). The tasks run in the pool's forked
children, so prometheus_client runs in its multiprocess mode: at ``worker_init``, before the
pool forks, the main process points ``PROMETHEUS_MULTIPROC_DIR`` at a directory of the pool's
own (the one given, emptied, else a new temporary one) and builds the metrics. Every child
inherits both and writes its values to files of its own; a scrape, answered by the main
process once the pool is ready, sums the files of every child, those replaced
(``--max-memory-per-child``) or gone included, so a counter never goes back. Without the
port nothing is recorded.

Off loopback the endpoint needs ``MEMBRANE_METRICS_TOKEN`` and, like every credential,
TLS (``MEMBRANE_TLS_*``) or ``MEMBRANE_ALLOW_INSECURE_CREDENTIALS`` (RFC 7.5); with the
token set a scrape needs ``Authorization: Bearer <token>``. A refused setting stops the
pool at start with status 2; a port already taken is logged, and the pool runs without it.
Rationale: docs/design/metrics-multiprocess.md.
"""

from __future__ import annotations

import hashlib
import hmac
import http.server
import logging
import os
import shutil
import ssl
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import prometheus_client
from celery.signals import (
    task_failure,
    task_postrun,
    task_prerun,
    task_retry,
    worker_init,
    worker_process_shutdown,
    worker_ready,
    worker_shutdown,
)
from prometheus_client import values
from prometheus_client.multiprocess import MultiProcessCollector, mark_process_dead

from membrane_core import Settings, errors, listen
from workers import config

log = logging.getLogger(__name__)

#: The environment variable that puts prometheus_client in its multiprocess mode.
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"

#: The exposition format of ``generate_latest``.
CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

#: Task run time buckets in seconds: a capture batch takes milliseconds, a maintenance drain
#: or an LLM extraction batch up to minutes.
BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0)

#: Celery's final states as the ``outcome`` label; any other is its name in lower case.
OUTCOMES = {"SUCCESS": "succeeded", "FAILURE": "failed", "RETRY": "retried"}

#: The outcomes every (queue, task) of the pool starts with at zero.
START_OUTCOMES = ("succeeded", "failed", "retried")

#: The ``queue`` label of a task that did not come from one of the pool's queues.
OTHER_QUEUE = "other"


@dataclass
class Recorder:
    """The pool's metrics and what its signals need: the queues it consumes, task start times."""

    tasks: prometheus_client.Counter
    duration: prometheus_client.Histogram
    retries: prometheus_client.Counter
    failures: prometheus_client.Counter
    queues: frozenset[str]
    #: The start of each running task, by task id (``perf_counter``).
    started: dict[str, float]

    def queue(self, task: Any) -> str:
        """The queue ``task``'s message came from, when it is one the pool consumes."""
        info = getattr(getattr(task, "request", None), "delivery_info", None) or {}
        name = info.get("routing_key")
        return name if name in self.queues else OTHER_QUEUE


@dataclass
class _Exporter:
    settings: Settings
    #: The multiprocess directory this process made, removed when it stops.
    made: str | None
    server: http.server.ThreadingHTTPServer | None = None


#: This process's recorder (``None``: no metrics), and the main process's HTTP server.
_state: dict[str, Any] = {"recorder": None, "exporter": None}


def recorder() -> Recorder | None:
    """This process's recorder, or ``None`` when the pool serves no metrics."""
    rec: Recorder | None = _state["recorder"]
    return rec


def _new_recorder(queues: frozenset[str]) -> Recorder:
    # prometheus_client picks its value class (in memory, or the multiprocess files) when it
    # is first imported, and the celery command imports it before any of this code (Flower's
    # command plugin does): with PROMETHEUS_MULTIPROC_DIR now set, the choice is made again,
    # before the first metric of the pool is built. Never twice: two value classes of one
    # process would write one file through two maps.
    if not getattr(values.ValueClass, "_multiprocess", False):
        values.ValueClass = values.get_value_class()  # type: ignore[no-untyped-call]
    prometheus_client.disable_created_metrics()  # type: ignore[no-untyped-call]
    return Recorder(
        tasks=prometheus_client.Counter(
            "membrane_worker_tasks",
            "Tasks finished, by queue, task and outcome (succeeded, failed, retried).",
            ("queue", "task", "outcome"),
            registry=None,
        ),
        duration=prometheus_client.Histogram(
            "membrane_worker_task_duration_seconds",
            "Task run time, by queue and task.",
            ("queue", "task"),
            buckets=BUCKETS,
            registry=None,
        ),
        retries=prometheus_client.Counter(
            "membrane_worker_task_retries",
            "Retries a task asked for, by queue, task and the exception that caused it.",
            ("queue", "task", "reason"),
            registry=None,
        ),
        failures=prometheus_client.Counter(
            "membrane_worker_task_failures",
            "Tasks failed, by queue, task and exception.",
            ("queue", "task", "exception"),
            registry=None,
        ),
        queues=queues,
        started={},
    )


def check_listen(settings: Settings) -> str | None:
    """RFC 7.5, 14.2: refuse a pool's ``/metrics`` off loopback without the metrics token, or
    with the token in plaintext unless opted in; the opt-in's warning, else ``None``."""
    host = settings.worker_metrics_host
    if settings.metrics_token is None:
        if not listen.is_loopback(host):
            raise errors.Forbidden(
                f"a worker pool's /metrics on {host} needs MEMBRANE_METRICS_TOKEN "
                "(without it, set MEMBRANE_WORKER_METRICS_HOST to a loopback address)"
            )
        return None
    return listen.check_credentials(
        host,
        "the metrics token",
        tls=listen.tls_files(settings.tls_certfile, settings.tls_keyfile),
        allow_insecure=settings.allow_insecure_credentials,
    )


def prepare_dir() -> str | None:
    """The pool's multiprocess directory, emptied, set in the environment; the path of one
    made here (to remove at the end), or ``None`` when it was given."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        for stale in Path(given).glob("*.db"):
            stale.unlink(missing_ok=True)
        return None
    made = tempfile.mkdtemp(prefix="membrane-worker-metrics-")
    os.environ[MULTIPROC_ENV] = made
    return made


def _zeros(rec: Recorder, app: Any) -> None:
    # Every (queue, task) of the pool is exported from the start, at zero, so that a rate
    # or an increase counts the first task too; so is each retry reason a task declares
    # (its ``autoretry_for``). A failure's exception is known only once it happened.
    for name, route in (app.conf.task_routes or {}).items():
        queue = route.get("queue") if isinstance(route, dict) else None
        if queue not in rec.queues:
            continue
        for outcome in START_OUTCOMES:
            rec.tasks.labels(queue, name, outcome)
        rec.duration.labels(queue, name)
        task = app.tasks.get(name)
        for reason in getattr(task, "autoretry_for", None) or ():
            rec.retries.labels(queue, name, reason.__name__)


class _Handler(http.server.BaseHTTPRequestHandler):
    """``GET /metrics``: the sum over the pool's multiprocess directory."""

    #: The sha256 of the token a scrape must present, or ``None``.
    token_digest: bytes | None = None

    def do_GET(self) -> None:
        if self.path.split("?", 1)[0] != "/metrics":
            self._answer(404, b"not found\n", "text/plain")
            return
        if self.token_digest is not None and not self._authorized():
            self._answer(401, b"a bearer token is required\n", "text/plain", {"WWW-Authenticate": "Bearer"})
            return
        body = prometheus_client.generate_latest(
            MultiProcessCollector(None, path=os.environ[MULTIPROC_ENV])  # type: ignore[no-untyped-call]
        )
        self._answer(200, body, CONTENT_TYPE)

    def _authorized(self) -> bool:
        scheme, _, token = (self.headers.get("Authorization") or "").partition(" ")
        digest = hashlib.sha256(token.strip().encode()).digest()
        return scheme.lower() == "bearer" and hmac.compare_digest(digest, self.token_digest or b"")

    def _answer(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self.send_response(status)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """A scrape is not logged (RFC 14.3: probes and scrapes are quiet)."""


def serve(settings: Settings) -> http.server.ThreadingHTTPServer:
    """The pool's ``/metrics`` on its host and port, in a daemon thread (RFC 14.2)."""
    token = settings.metrics_token.get_secret_value() if settings.metrics_token else None
    handler = type(
        "MetricsHandler",
        (_Handler,),
        {"token_digest": hashlib.sha256(token.encode()).digest() if token else None},
    )
    port = settings.worker_metrics_port or 0
    server = http.server.ThreadingHTTPServer((settings.worker_metrics_host, port), handler)
    server.daemon_threads = True
    tls = listen.tls_files(settings.tls_certfile, settings.tls_keyfile)
    if tls is not None:
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(str(tls[0]), str(tls[1]))
        server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, name="metrics", daemon=True).start()
    return server


# Celery ships no type information: its signal decorators are untyped to mypy.


@worker_init.connect  # type: ignore[untyped-decorator]
def _start(sender: Any = None, **_: Any) -> None:
    # The pool's main process, before it forks its children: the directory and the metrics
    # they inherit. The refusals of RFC 7.5 stop the pool here, before it starts.
    s = config.settings()
    if s.worker_metrics_port is None:
        return
    try:
        warning = check_listen(s)
    except errors.MembraneError as exc:
        log.critical("worker metrics refused: %s", exc.message)
        raise SystemExit(2) from exc
    if warning:
        log.warning(warning)
    _state["exporter"] = _Exporter(settings=s, made=prepare_dir())
    app = getattr(sender, "app", None)
    consumed = getattr(getattr(getattr(app, "amqp", None), "queues", None), "consume_from", None) or {}
    rec = _state["recorder"] = _new_recorder(frozenset(consumed))
    if app is not None:
        _zeros(rec, app)


@worker_ready.connect  # type: ignore[untyped-decorator]  # as above
def _serve(**_: Any) -> None:
    # Bound once the pool has forked, so that its children do not hold the listening socket.
    exporter: _Exporter | None = _state["exporter"]
    if exporter is None:
        return
    s = exporter.settings
    try:
        exporter.server = serve(s)
    except OSError as exc:  # the port is taken: the pool runs on, and its target shows down
        log.error(
            "worker metrics not served",
            extra={"host": s.worker_metrics_host, "port": s.worker_metrics_port, "error": str(exc)},
        )
        return
    rec = recorder()
    log.info(
        "worker metrics served",
        extra={
            "host": s.worker_metrics_host,
            "port": exporter.server.server_address[1],
            "queues": sorted(rec.queues) if rec else [],
        },
    )


@worker_shutdown.connect  # type: ignore[untyped-decorator]  # as above
def _stop(**_: Any) -> None:
    exporter: _Exporter | None = _state["exporter"]
    _state["exporter"] = None
    if exporter is None:
        return
    if exporter.server is not None:
        exporter.server.shutdown()
        exporter.server.server_close()
    if exporter.made:
        shutil.rmtree(exporter.made, ignore_errors=True)


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # as above
def _child_exits(pid: int | None = None, **_: Any) -> None:
    # A child's counters stay in the totals; only its live gauges' files would go (none today).
    if recorder() is None:
        return
    mark_process_dead(pid or os.getpid())  # type: ignore[no-untyped-call]


@task_prerun.connect  # type: ignore[untyped-decorator]  # as above
def _task_started(task_id: str, **_: Any) -> None:
    rec = recorder()
    if rec is not None:
        rec.started[task_id] = time.perf_counter()


@task_postrun.connect  # type: ignore[untyped-decorator]  # as above
def _task_finished(task_id: str, task: Any, state: str | None = None, **_: Any) -> None:
    rec = recorder()
    if rec is None:
        return
    start = rec.started.pop(task_id, None)
    queue = rec.queue(task)
    outcome = OUTCOMES.get(state or "", (state or "unknown").lower())
    rec.tasks.labels(queue, task.name, outcome).inc()
    if start is not None:
        rec.duration.labels(queue, task.name).observe(time.perf_counter() - start)


@task_retry.connect  # type: ignore[untyped-decorator]  # as above
def _task_retried(sender: Any = None, reason: Any = None, **_: Any) -> None:
    rec = recorder()
    if rec is None or sender is None:
        return
    cause = getattr(reason, "exc", None) or reason
    rec.retries.labels(rec.queue(sender), sender.name, type(cause).__name__).inc()


@task_failure.connect  # type: ignore[untyped-decorator]  # as above
def _task_failed(sender: Any = None, exception: BaseException | None = None, **_: Any) -> None:
    rec = recorder()
    if rec is None or sender is None:
        return
    rec.failures.labels(rec.queue(sender), sender.name, type(exception).__name__).inc()
