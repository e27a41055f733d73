"""The Celery processes' spans, once tracing is on (RFC 14.4).

Each pool process (``worker_process_init``, which the solo pool sends too) and beat
(``beat_init``) turns tracing on from its settings, before the pool process builds its
Membrane (``workers.app`` connects its own receiver after this module's). OpenTelemetry's
Celery instrumentation then makes a span of each task published (``apply_async/<task>``)
and run (``run/<task>``): the publisher writes its trace context into the message headers
beside ``membrane_request_id`` (RFC 14.3), and the run span continues that trace, so a
capture's task is one trace with the request that sent it. The pool's main process, which
runs no task, is not traced. A pool process sends its last spans as it exits.
"""

from __future__ import annotations

from typing import Any

from celery.signals import beat_init, worker_process_init, worker_process_shutdown

from membrane_core import tracing
from workers import config

#: RFC 14.4: the service names of a pool process's and of beat's spans.
WORKER_SERVICE_NAME = "membrane-worker"
BEAT_SERVICE_NAME = "membrane-beat"


def instrument() -> None:
    """RFC 14.4: spans of the tasks this process publishes and runs (tracing must be on)."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    # its constructor carries no annotations
    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]
    if not instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.instrument(tracer_provider=tracing.provider())


def uninstrument() -> None:
    """Undo :func:`instrument`."""
    from opentelemetry.instrumentation.celery import CeleryInstrumentor

    instrumentor = CeleryInstrumentor()  # type: ignore[no-untyped-call]  # as above
    if instrumentor.is_instrumented_by_opentelemetry:
        instrumentor.uninstrument()


# Celery ships no type information: its signal decorators are untyped to mypy.


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _trace_pool_process(**_: Any) -> None:
    if tracing.configure(config.settings(), WORKER_SERVICE_NAME):
        instrument()


@beat_init.connect  # type: ignore[untyped-decorator]  # as above
def _trace_beat(**_: Any) -> None:
    if tracing.configure(config.settings(), BEAT_SERVICE_NAME):
        instrument()


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # as above
def _flush(**_: Any) -> None:
    tracing.flush()
