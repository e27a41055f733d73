"""The API's spans, once tracing is on (RFC 14.4).

OpenTelemetry's FastAPI instrumentation makes one server span of each request, named by
its method and route (``POST /v1/captures``), around every middleware, so the request's log
lines, its access line included, carry its trace id. FastAPI's own telemetry, which would
start a second server span under a configured tracer provider, stands aside when it finds
that instrumentation in the app. The tasks a request publishes carry its trace in their
headers (``workers.tracing``).
"""

from __future__ import annotations

import os

from fastapi import FastAPI

from api.access import QUIET_PATHS
from membrane_core import Settings, tracing

#: RFC 14.4: the service name of the API's spans (``OTEL_SERVICE_NAME`` overrides it).
SERVICE_NAME = "membrane-api"

#: RFC 14.4: probes and scrapes make no span (the instrumentation matches the URL without
#: its query); ``OTEL_PYTHON_FASTAPI_EXCLUDED_URLS`` replaces this.
EXCLUDED_URLS = rf"^[a-z]+://[^/]+/({'|'.join(sorted(p.strip('/') for p in QUIET_PATHS))})$"


def instrument(app: FastAPI, settings: Settings) -> bool:
    """RFC 14.4: trace ``app``'s requests when tracing is on in this process (``settings``
    turn it on, once per process); True if they are."""
    if not tracing.configure(settings, SERVICE_NAME):
        return False
    from opentelemetry.instrumentation.fastapi import FastAPIInstrumentor

    from workers import tracing as worker_tracing

    given = os.environ.get("OTEL_PYTHON_FASTAPI_EXCLUDED_URLS") or os.environ.get("OTEL_PYTHON_EXCLUDED_URLS")
    FastAPIInstrumentor.instrument_app(
        app,
        tracer_provider=tracing.provider(),
        excluded_urls=None if given else EXCLUDED_URLS,
        # one span per request, not one more per ASGI message
        exclude_spans=["receive", "send"],
    )
    worker_tracing.instrument()  # the publish spans of the tasks a request sends
    return True
