"""Per-process services and the request dependencies that hand them to routes."""

from __future__ import annotations

import ipaddress
import logging
from dataclasses import dataclass, field
from typing import Annotated

from fastapi import Depends, Request, Security
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from api import access
from api.auth import KeyRing
from api.metrics import Registry
from api.ratelimit import Limit, Limiter, RateFail, Unchecked, Unlimited
from api.readiness import Probes
from membrane_core import Membrane, errors
from membrane_core.inbox.submit import Dispatcher
from membrane_core.trust import TrustPolicy

log = logging.getLogger(__name__)


@dataclass
class Services:
    """What one API process builds once (lifespan) and every route shares."""

    membrane: Membrane
    dispatcher: Dispatcher
    keys: KeyRing
    registry: Registry = field(default_factory=Registry)
    limiter: Limiter = field(default_factory=Unlimited)
    #: RFC 10.6: ``MEMBRANE_RATE_FAIL``, what a request gets while the limiter cannot ask Redis
    rate_fail: RateFail = "open"
    #: RFC 14.2: the readiness probes, under one deadline
    readiness: Probes = field(default_factory=Probes)

    def admit(self, policy: TrustPolicy, *, captures: int | None = None) -> None:
        """RFC 10.6: spend one request, or ``captures`` captures, from the caller's bucket.

        Called by each ``/v1`` route before its core call, on the handler's thread: the
        Redis round trip never blocks the event loop. Over the limit: ``RateLimited``
        (429 with ``Retry-After``), counted by the caller's key id. No limit without keys.
        While Redis does not answer, ``rate_fail`` decides: ``open`` admits the request,
        ``closed`` refuses it with ``Unchecked`` (503 with ``Retry-After``); either is counted.
        """
        limits = self.keys.limits(policy.actor)
        if limits is None:
            return
        limit, units = (Limit.REQUESTS, 1) if captures is None else (Limit.CAPTURES, captures)
        try:
            wait = self.limiter.spend(policy.actor, limits, limit, units)
        except Unchecked:
            admitted = self.rate_fail == "open"
            self.registry.unchecked(limit.value, admitted=admitted)
            if admitted:
                return
            raise
        if wait is None:
            return
        self.registry.refused(policy.actor, limit.value)
        field_name = limits.field(limit)
        raise errors.RateLimited(
            f"this API key is over its {field_name} (burst {limits.burst:g} s); retry later",
            retry_after=wait,
            details=[
                {"field": field_name, "message": f"{limits.rate(limit):g} per second", "type": "rate_limited"}
            ],
        )


# The two dependencies below are ``async`` only so that FastAPI runs them on the event
# loop instead of a thread-pool hop each: their only I/O is the key file's ``stat``, at most
# once a second, and its reading when it changed (the handlers stay plain ``def``).


async def services(request: Request) -> Services:
    """The process's services; 503 while the app is starting or stopping."""
    svc: Services | None = getattr(request.app.state, "services", None)
    if svc is None:
        raise errors.Unavailable("the API is not ready (starting or stopping)")
    return svc


#: RFC 10.3: the bearer scheme in ``/openapi.json`` (the Authorize button of ``/docs``). It
#: only documents: the key ring reads the header itself, so its own messages answer.
BEARER = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    description="an API key of MEMBRANE_API_KEYS (none without keys, on loopback)",
)
Bearer = Annotated[HTTPAuthorizationCredentials | None, Security(BEARER)]


async def trust(request: Request, _: Bearer) -> TrustPolicy:
    """RFC 10.3: the caller's policy from its bearer key.

    RFC 7.5, enforced per request as well as at start-up: without keys, a request that
    reached the server on a non-loopback local address is refused, however the server
    was started (``uvicorn --host 0.0.0.0 api.app:app`` included).
    """
    svc = await services(request)
    svc.keys.refresh()  # RFC 10.3: a changed key file is re-read, at most once a second
    if not svc.keys.enabled:
        server = request.scope.get("server")
        if server is not None and _is_public_ip(str(server[0])):
            raise errors.Forbidden(
                "this server has no API keys configured and serves only loopback "
                "addresses (set MEMBRANE_API_KEYS to serve other addresses)"
            )
    policy = svc.keys.authenticate(request.headers.get("authorization"))
    if svc.keys.enabled:
        access.identify(policy.actor)  # RFC 14.3: the access line names the key's actor
    return policy


async def scraper(request: Request, _: Bearer) -> None:
    """RFC 10.1, 14.2: with keys configured, Prometheus text only for an operator's key or the
    metrics token."""
    keys = (await services(request)).keys
    keys.refresh()
    keys.authenticate_scraper(request.headers.get("authorization"))


def _is_public_ip(host: str) -> bool:
    # A unix socket path or a test transport's name is not a network address.
    try:
        return not ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


#: Route parameter types: the process's services and the caller's policy.
Svc = Annotated[Services, Depends(services)]
Trust = Annotated[TrustPolicy, Depends(trust)]
#: A route dependency: the caller may scrape the deployment's Prometheus figures.
Scraper = Depends(scraper)
