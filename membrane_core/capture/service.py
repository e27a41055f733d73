"""Capture as a service: check, plan and write captures (RFC 3.3, 3.6, 7.1).

The pure planning lives in :mod:`membrane_core.capture.plan`; this service adds the trust
check, the configured policy and clock, and the one transaction that writes a batch.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

from pydantic import ValidationError

from membrane_core import errors
from membrane_core.capture.plan import CapturePlan, check_content, plan_capture
from membrane_core.clock import Clock
from membrane_core.enums import Sensitivity
from membrane_core.policy import Policy
from membrane_core.requests import CaptureRequest, parse
from membrane_core.results import CaptureResult
from membrane_core.storage import records
from membrane_core.storage.db import Database
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy


@contextlib.contextmanager
def _content_errors() -> Iterator[None]:
    """Payload validation errors as ``InvalidInput`` with fields under ``content`` (RFC 2.4)."""
    try:
        yield
    except ValidationError as exc:
        details = [
            {**d, "field": f"content.{d['field']}" if d["field"] else "content"}
            for d in errors.field_errors(exc)
        ]
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:5])
        raise errors.InvalidInput(f"invalid capture content: {summary}", details=details) from exc


class CaptureService:
    """Validate, authorise, plan and write captures (RFC 3); ``Membrane.captures``."""

    def __init__(self, db: Database, *, policy: Policy, clock: Clock, work: records.WorkOptions) -> None:
        self._db = db
        self._policy = policy
        self._clock = clock
        self._work = work

    def _authorised(self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy) -> CaptureRequest:
        req = parse(CaptureRequest, request)
        trust.require_write(req.scope)
        # the level the capture is written at, the configured default included: a writer
        # never writes (nor, by its fact's key, meets) what it may not read (RFC 3.4, 7.3)
        level = self._policy.sensitivity(req.sensitivity)
        if level.rank > trust.max_sensitivity.rank:
            raise errors.Forbidden(
                f"sensitivity {level.value!r} is above the caller's maximum"
                + ("" if req.sensitivity else " (it is the configured default)"),
                details=[{"field": "sensitivity", "message": "above policy", "type": "forbidden"}],
            )
        return req

    def check(
        self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy = DEVELOPMENT_POLICY
    ) -> CaptureRequest:
        """Validate and authorise one capture without building its records (RFC 2.4, 7.1).

        Accepts exactly what :meth:`plan` accepts; the cheap check the inbox runs at
        accept time (RFC 9.1).
        """
        req = self._authorised(request, trust)
        with _content_errors():
            check_content(req)
        return req

    def level(self, request: CaptureRequest) -> Sensitivity:
        """RFC 3.2: the sensitivity a capture is written at: its own, else the configured default."""
        return self._policy.sensitivity(request.sensitivity)

    def plan(
        self,
        request: CaptureRequest | Mapping[str, Any],
        trust: TrustPolicy = DEVELOPMENT_POLICY,
        *,
        record_id: uuid.UUID | None = None,
        operation_id: uuid.UUID | None = None,
    ) -> CapturePlan:
        """Validate and authorise one capture without writing it (RFC 3.3, 7.1)."""
        req = self._authorised(request, trust)
        with _content_errors():
            plan = plan_capture(
                req,
                self._policy,
                now=self._clock(),
                actor=trust.actor,
                record_id=record_id,
                operation_id=operation_id,
            )
        return plan.as_proposed() if trust.review_required else plan

    def capture_many(
        self,
        requests: Iterable[CaptureRequest | Mapping[str, Any]],
        trust: TrustPolicy = DEVELOPMENT_POLICY,
    ) -> list[CaptureResult]:
        """RFC 3.6: validate every capture first, then write them all in one transaction."""
        return self.write_plans([self.plan(r, trust) for r in requests])

    def write_plans(self, plans: Sequence[CapturePlan]) -> list[CaptureResult]:
        """Write already validated plans in one transaction (RFC 3.3, 3.6)."""
        if not plans:
            return []
        with self._db.transaction() as conn:
            outcomes = records.write_captures(conn, plans, now=self._clock(), opts=self._work)
        return [
            CaptureResult(
                record_ids=o.record_ids, fact=o.fact, entities=o.entities, proposal_id=o.proposal_id
            )
            for o in outcomes
        ]
