"""The FastAPI application factory (RFC 10).

``create_app`` builds nothing heavy: the :class:`Membrane` (pools, migrations) and the
dispatcher are built once per process in the lifespan, from :class:`Settings`.
Run with ``uvicorn --factory api.app:create_app`` or ``python -m api`` (which also
refuses a non-loopback host without API keys, RFC 7.5).
"""

from __future__ import annotations

import contextlib
import logging
import os
from collections.abc import AsyncIterator, Sequence
from typing import Any
from uuid import UUID

from fastapi import FastAPI

from api import console, docs, tracing
from api import errors as api_errors
from api.access import RequestContext
from api.deps import Services
from api.keyfile import key_ring, reload_on_sighup
from api.limits import MAX_BATCH_BODY_BYTES, MAX_BODY_BYTES, BodyLimitMiddleware
from api.metrics import MetricsMiddleware, Registry, process_exited
from api.ratelimit import Limiter, RedisLimiter
from api.readiness import READY_TIMEOUT_SECONDS
from api.routes import captures, lists, operators, reads, review, revisions, transfer
from membrane_core import Membrane, Settings
from membrane_core.heap import freeze_heap
from membrane_core.inbox.submit import Dispatcher

log = logging.getLogger(__name__)


class CeleryBroker:
    """The workers' Celery dispatcher plus a readiness probe of the broker (RFC 9.5, 14.2)."""

    def __init__(self, settings: Settings) -> None:
        # Imported here: only a served API needs Celery; tests inject their own dispatcher.
        from workers.app import make_app
        from workers.dispatch import PUBLISH_TRANSPORT_OPTIONS, CeleryDispatcher

        self.celery = make_app(settings)
        # RFC 10.5: this app only publishes, and a write waits on it: the short timeouts
        self.celery.conf.broker_transport_options = {
            **self.celery.conf.broker_transport_options,
            **PUBLISH_TRANSPORT_OPTIONS,
        }
        self.dispatcher = CeleryDispatcher(self.celery)

    def publish(self, kind: Any, operation_ids: Sequence[UUID]) -> bool:
        """Send the ids to their queue; False while the broker is down (RFC 9.5, 10.5)."""
        return bool(self.dispatcher.publish(kind, operation_ids))

    def ping(self, timeout: float = READY_TIMEOUT_SECONDS) -> None:
        """Raise unless the broker accepts a connection and answers within about ``timeout``.

        RFC 14.2: one attempt, without kombu's retries (the first waits 2 s), with ``timeout``
        as the connect and read timeouts: a stopped Redis accepts the connection and never
        answers. RFC 10.5: the outcome also closes or opens the publishing circuit.
        """
        options = {"socket_connect_timeout": timeout, "socket_timeout": timeout}
        try:
            with self.celery.connection_for_write(transport_options=options) as conn:
                conn.ensure_connection(max_retries=0)
        except Exception:
            self.dispatcher.failed()
            raise
        self.dispatcher.succeeded()

    def close(self) -> None:
        """Release the broker connection pool."""
        self.celery.close()


def create_app(
    settings: Settings | None = None,
    *,
    membrane: Membrane | None = None,
    dispatcher: Dispatcher | None = None,
    max_body_bytes: int = MAX_BODY_BYTES,
    max_batch_body_bytes: int = MAX_BATCH_BODY_BYTES,
    rate_limiter: Limiter | None = None,
) -> FastAPI:
    """RFC 10.1: the HTTP API. ``membrane``, ``dispatcher`` and ``rate_limiter`` may be injected
    (tests); the rate limiter is otherwise the deployment's Redis (RFC 10.6)."""
    registry = Registry()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        s = settings or (membrane.settings if membrane else Settings())
        keys = key_ring(s)  # RFC 10.3: refuses a key file that does not load
        owned = membrane is None
        m = membrane or Membrane(s)
        m.retriever.warm()  # RFC 8.1.1: the query embedder is loaded before the first request
        try:
            d = dispatcher or CeleryBroker(s)
            app.state.broker = d
            # RFC 10.6: the buckets live in the broker's Redis, shared by every API process
            limiter = app.state.limiter = rate_limiter or RedisLimiter(_broker_url(s))
            app.state.services = Services(
                membrane=m, dispatcher=d, keys=keys, registry=registry, limiter=limiter, rate_fail=s.rate_fail
            )
            unhook = reload_on_sighup(keys)
            freeze_heap()
            try:
                log.info("api ready", extra={"api_keys": keys.enabled})
                yield
            finally:
                unhook()
        finally:
            app.state.services = None
            process_exited(os.getpid())  # RFC 14.2: its counters stay in the totals
            if rate_limiter is None and isinstance(getattr(app.state, "limiter", None), RedisLimiter):
                app.state.limiter.close()
            if owned:
                m.close()
            if dispatcher is None and isinstance(getattr(app.state, "broker", None), CeleryBroker):
                app.state.broker.close()

    app = FastAPI(
        title="Membrane",
        version="1",
        summary="A memory substrate for LLM agents (rfc.md).",
        lifespan=lifespan,
        # operation ids are the handlers' names (capture, retrieve, supersede ...), which
        # client generators turn into method names
        generate_unique_id_function=lambda route: route.name,
        docs_url=None,  # RFC 10.1: /docs and /redoc come from api.docs, without a CDN
        redoc_url=None,
    )
    app.state.services = None
    api_errors.install(app)
    docs.install(app)
    console.install(app)  # RFC 10.8: /console, outside /openapi.json
    for router in (
        captures.router,
        revisions.router,
        reads.router,
        lists.router,
        review.router,
        transfer.router,
        operators.router,
    ):
        app.include_router(router)
    app.add_middleware(BodyLimitMiddleware, max_bytes=max_body_bytes, max_batch_bytes=max_batch_body_bytes)
    app.add_middleware(MetricsMiddleware, registry=registry)
    app.add_middleware(api_errors.CatchAll)  # nothing escapes it (RFC 10.2)
    # outermost: the request id covers every line of the request, CatchAll's too (RFC 14.3)
    app.add_middleware(RequestContext)
    # RFC 14.4: set before the lifespan builds the Membrane, whose pooled connections it traces
    tracing.instrument(app, settings or (membrane.settings if membrane else Settings()))
    return app


def _broker_url(settings: Settings) -> str:
    # Imported here, as in CeleryBroker: the broker's URL is the workers' to define.
    from workers.app import broker_url

    return broker_url(settings)


def __getattr__(name: str) -> Any:
    # ``api.app:app`` for plain ``uvicorn api.app:app``: built on first access only.
    if name == "app":
        built = create_app()
        globals()["app"] = built
        return built
    raise AttributeError(name)
