"""Traces: OpenTelemetry spans of each process, an optional extra (RFC 14.4).

Each entry point calls :func:`configure` once, where it sets up its logging and before it
builds its Membrane (a pooled connection's statements are traced only if it was opened
after): the API's app factory, each Celery pool process and beat. Off (``MEMBRANE_OTEL_EXPORTER``
is ``none``, the default) it imports nothing of OpenTelemetry and changes nothing. On, the
first call in a process sets the process's tracer provider (its service name, the exporter
the settings name, and whatever the SDK reads from the ``OTEL_*`` variables), the spans of
Postgres statements (``membrane_core.storage.tracing``) and of outbound HTTP calls (httpx:
the embedding and LLM providers), and the trace and span ids of every log line. The entry
points add their framework's spans (``api.tracing``, ``workers.tracing``).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from membrane_core import logs

if TYPE_CHECKING:
    from opentelemetry.sdk.trace import SpanProcessor, TracerProvider
    from opentelemetry.sdk.trace.export import SpanExporter

    from membrane_core.settings import Settings

log = logging.getLogger(__name__)

#: RFC 14.4: the path of the traces on an OTLP/HTTP collector, after ``otel_endpoint``.
TRACES_PATH = "/v1/traces"

#: RFC 14.4: the longest a pool process waits, as it exits, for its last spans to be sent.
FLUSH_MILLIS = 5000

#: This process's tracing, once :func:`configure` turned it on: ``provider``, ``service``.
_state: dict[str, Any] = {}


def configure(settings: Settings, service_name: str, *, processor: SpanProcessor | None = None) -> bool:
    """RFC 14.4: turn tracing on in this process when the settings name an exporter; True if on.

    The first call that turns it on decides the service name and the exporter; later ones
    only answer. ``processor`` takes the place of the exporter the settings name (a test's
    in-memory exporter). Without the ``otel`` extra it logs a warning and stays off.
    """
    if settings.otel_exporter == "none":
        return False
    if "provider" in _state:
        return True
    try:
        from opentelemetry import trace
        from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor
        from opentelemetry.sdk.resources import OTELResourceDetector, Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import BatchSpanProcessor

        from membrane_core.storage import tracing as storage_tracing

        spans = processor or BatchSpanProcessor(_exporter(settings))
    except ImportError as exc:
        log.warning(
            "MEMBRANE_OTEL_EXPORTER=%s, but the otel extra is not installed "
            "(pip install 'membrane[otel]'): tracing stays off (%s)",
            settings.otel_exporter,
            exc,
        )
        return False
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES win over the entry point's name
    resource = Resource.create({"service.name": service_name}).merge(OTELResourceDetector().detect())
    provider = TracerProvider(resource=resource)  # its sampler from OTEL_TRACES_SAMPLER
    provider.add_span_processor(spans)
    trace.set_tracer_provider(provider)
    storage_tracing.instrument(provider)
    HTTPXClientInstrumentor().instrument(tracer_provider=provider)

    def span_ids() -> Mapping[str, str]:
        context = trace.get_current_span().get_span_context()
        if not context.is_valid:
            return {}
        return {
            "trace_id": trace.format_trace_id(context.trace_id),
            "span_id": trace.format_span_id(context.span_id),
        }

    logs.span_ids(span_ids)
    _state.update(provider=provider, service=resource.attributes.get("service.name", service_name))
    log.info("tracing on", extra={"exporter": settings.otel_exporter, "service": _state["service"]})
    return True


def _exporter(settings: Settings) -> SpanExporter:
    """The span exporter ``otel_exporter`` names (RFC 14.4)."""
    if settings.otel_exporter == "console":
        from opentelemetry.sdk.trace.export import ConsoleSpanExporter

        return ConsoleSpanExporter()
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

    if not settings.otel_endpoint:  # the SDK's OTEL_EXPORTER_OTLP_* variables, or its default
        return OTLPSpanExporter()
    return OTLPSpanExporter(endpoint=traces_url(settings.otel_endpoint))


def traces_url(endpoint: str) -> str:
    """RFC 14.4: ``MEMBRANE_OTEL_ENDPOINT`` is the collector's base URL, as
    ``OTEL_EXPORTER_OTLP_ENDPOINT`` is; a URL that already ends in ``/v1/traces`` is kept."""
    base = endpoint.rstrip("/")
    return base if base.endswith(TRACES_PATH) else base + TRACES_PATH


def provider() -> TracerProvider | None:
    """This process's tracer provider, while tracing is on."""
    found: TracerProvider | None = _state.get("provider")
    return found


def flush() -> None:
    """Send the spans not yet exported (a pool process, as it exits: RFC 14.4)."""
    found = provider()
    if found is not None:
        found.force_flush(FLUSH_MILLIS)


def shutdown() -> None:
    """Undo :func:`configure`: stop the spans of statements and HTTP calls and of the log
    lines, send what is left and close the exporter. The process's global tracer provider
    stays set (OpenTelemetry sets it once), and a new :func:`configure` makes another."""
    found = _state.pop("provider", None)
    _state.clear()
    if found is None:
        return
    from opentelemetry.instrumentation.httpx import HTTPXClientInstrumentor

    from membrane_core.storage import tracing as storage_tracing

    logs.span_ids(None)
    HTTPXClientInstrumentor().uninstrument()
    storage_tracing.uninstrument()
    found.shutdown()
