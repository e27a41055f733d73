"""Operators: maintenance runs, metrics, health and readiness (RFC 14.2, 6.5)."""

from __future__ import annotations

import logging
from typing import Any

from fastapi import APIRouter
from fastapi.responses import JSONResponse, PlainTextResponse, Response
from pydantic import Field

from api import metrics, schemas, writes
from api.deps import Scraper, Svc, Trust
from api.errors import RETRY_AFTER_SECONDS
from api.routes.captures import ACCEPTED, QUEUED, IdemKey, Wait
from membrane_core import errors, logs
from membrane_core.enums import Job, OperationKind
from membrane_core.inbox.submit import OperationView
from membrane_core.models import ClientInput

log = logging.getLogger(__name__)

router = APIRouter(tags=["operators"])


class MaintenanceRun(ClientInput):
    """``{"jobs": [...]}``: one batch of each job, now (RFC 6.5)."""

    jobs: list[Job] = Field(
        min_length=1, max_length=16, examples=[["decay", "prune", "consolidate", "embed", "extract"]]
    )


@router.post(
    "/v1/maintenance/run",
    status_code=202,
    response_model=OperationView,
    response_description=QUEUED,
    responses=ACCEPTED,
)
def run_maintenance(
    svc: Svc, policy: Trust, body: MaintenanceRun, wait: Wait = None, idempotency_key: IdemKey = None
) -> JSONResponse:
    """Queue one batch of each maintenance job (RFC 6.5)."""
    svc.admit(policy)
    view = svc.membrane.inbox.submit_maintenance(
        body.jobs, policy, idempotency_key=idempotency_key, request_id=logs.request_id()
    )
    return writes.answer_one(svc, OperationKind.MAINTENANCE, view, wait, policy)


@router.get("/v1/metrics", response_model=schemas.Metrics, responses=schemas.errors(401, 429))
def metrics_json(svc: Svc, policy: Trust) -> Any:
    """Totals, averages and audit counts; queue depths and backlog for an operator (RFC 14.2)."""
    svc.admit(policy)
    return svc.membrane.metrics(policy)


# A plain Response class: the errors are JSON, only the 200 is text (documented below).
@router.get(
    "/metrics",
    response_class=Response,
    dependencies=[Scraper],
    responses={
        200: {
            "content": {"text/plain": {"schema": {"type": "string"}}},
            "description": "Prometheus text format 0.0.4",
        },
        **schemas.errors(401, 403),
    },
)
def metrics_prometheus(svc: Svc) -> PlainTextResponse:
    """Prometheus text: requests and latency by route, operations accepted, rate-limit refusals
    over every API process, and the deployment gauges read from Postgres now (RFC 14.2).

    Postgres down: the process figures are still answered, without the gauges.
    """
    gauges = None
    try:
        gauges = svc.membrane.deployment_gauges()
    except errors.Unavailable as exc:
        log.warning("deployment gauges unavailable", extra={"error": exc.message})
    return PlainTextResponse(svc.registry.render(gauges), media_type=metrics.CONTENT_TYPE)


@router.get("/healthz", response_model=schemas.Health)
def healthz() -> dict[str, str]:
    """The process is up (RFC 14.2)."""
    return {"status": "ok"}


@router.get(
    "/readyz",
    response_model=schemas.Readiness,
    responses={503: {"model": schemas.NotReady, "description": "what is unreachable"}},
)
def readyz(svc: Svc) -> JSONResponse:
    """Postgres and the broker are reachable (RFC 14.2); 503 names what is not.

    The probes run side by side and the answer comes within ``READY_TIMEOUT_SECONDS`` (0.75 s),
    a hung service included: a probe that has not answered by then has failed. RFC 10.5: each
    probe's outcome also opens or closes that service's circuit, so the request path and
    readiness agree.
    """
    probes = {"postgres": svc.membrane.ping, "broker": getattr(svc.dispatcher, "ping", None)}
    checks = {name: "not checked" for name, probe in probes.items() if probe is None}
    failures: list[dict[str, Any]] = []
    outcome = svc.readiness.run({name: probe for name, probe in probes.items() if probe is not None})
    for name, error in outcome.items():
        if error is None:
            checks[name] = "ok"
            continue
        # the driver's text names hosts and ports; it goes to the log, not to the caller
        log.warning("readiness probe failed", extra={"probe": name, "error": error})
        checks[name] = "unavailable"
        failures.append({"field": name, "message": f"{name} unreachable", "type": "unavailable"})
    checks = {name: checks[name] for name in probes}  # in the probes' order
    # RFC 13.2: the replica's last sample, as information: reads fall back to the primary, so a
    # replica down or behind never makes the API unready
    replica = {"replica": state} if (state := svc.membrane.db.replica_state()) is not None else {}
    if failures:
        err = errors.Unavailable(
            "not ready: " + ", ".join(f["field"] for f in failures) + " unreachable", details=failures
        )
        return JSONResponse(
            {"error": err.to_dict(), "checks": checks, **replica},
            status_code=503,
            headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
        )  # RFC 10.5
    return JSONResponse({"status": "ready", "checks": checks, **replica})
