"""``Membrane``: the embeddable, synchronous library facade (RFC 1.2)."""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, TypeVar

from pydantic import ValidationError

from membrane_core import audit as audit_log
from membrane_core import errors, metrics
from membrane_core.capture import CapturePlan, check_content, plan_capture
from membrane_core.embedding import EmbeddingService
from membrane_core.enums import MemoryType, Sensitivity
from membrane_core.extraction import ExtractionService
from membrane_core.maintenance import Maintenance
from membrane_core.models import AuditHistory
from membrane_core.operations import Operations
from membrane_core.policy import Policy
from membrane_core.requests import CaptureRequest, RetrieveRequest
from membrane_core.results import CaptureResult, RecordView, RetrieveResult
from membrane_core.retrieval import Retriever
from membrane_core.revision import Revisions
from membrane_core.settings import Settings
from membrane_core.storage import db as storage_db
from membrane_core.storage import records
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

Clock = Callable[[], datetime]
M = TypeVar("M", CaptureRequest, RetrieveRequest)


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)


def policy_from_settings(settings: Settings) -> Policy:
    """RFC 3.2: the policy engine configured from settings."""
    return Policy(
        default_sensitivity=Sensitivity(settings.default_sensitivity),
        half_lives={
            MemoryType.EPISODIC: settings.half_life_episodic_seconds,
            MemoryType.WORKING: settings.half_life_working_seconds,
            MemoryType.SEMANTIC: settings.half_life_semantic_seconds,
            MemoryType.COMPETENCE: settings.half_life_competence_seconds,
            MemoryType.PLAN_GRAPH: settings.half_life_plan_graph_seconds,
            MemoryType.ENTITY: settings.half_life_entity_seconds,
        },
        reinforcement_gain=dict.fromkeys(MemoryType, settings.reinforcement_gain),
    )


def parse(model: type[M], data: M | Mapping[str, Any]) -> M:
    """Validate client input into ``model``; ``InvalidInput`` names every bad field (RFC 2.4)."""
    if isinstance(data, model):
        return data
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        details = errors.field_errors(exc)
        summary = "; ".join(f"{d['field'] or 'body'}: {d['message']}" for d in details[:5])
        raise errors.InvalidInput(f"invalid {model.__name__}: {summary}", details=details) from exc


@contextlib.contextmanager
def _content_errors() -> Iterator[None]:
    """Payload validation errors as ``InvalidInput`` with fields under ``content`` (RFC 2.4)."""
    try:
        yield
    except ValidationError as exc:
        details = [{**d, "field": f"content.{d['field']}" if d["field"] else "content"}
                   for d in errors.field_errors(exc)]
        summary = "; ".join(f"{d['field']}: {d['message']}" for d in details[:5])
        raise errors.InvalidInput(f"invalid capture content: {summary}", details=details) from exc


def _record_id(value: uuid.UUID | str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise errors.InvalidInput(f"record id {value!r} is not a UUID") from exc


class Membrane:
    """The memory substrate as a library: capture, get, retrieve (RFC 1.2).

    Without ``database`` it reads :class:`Settings` and, when ``MEMBRANE_DATABASE_URL``
    is unset, starts the embedded Postgres under ``MEMBRANE_DATA_DIR`` (RFC 11.2).
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        database: storage_db.Database | None = None,
        policy: Policy | None = None,
        clock: Clock = utcnow,
        work: records.WorkOptions | None = None,
    ) -> None:
        self.settings = settings or Settings()
        if database is None:
            s = self.settings
            dsn = storage_db.resolve_dsn(s.database_dsn(), s.data_dir)
            read = s.read_database_url.get_secret_value() if s.read_database_url else None
            # RFC 10.5: a request waits at most request_pool_timeout_seconds for a
            # connection, and none at all while Postgres is known to be down
            database = storage_db.Database(
                dsn, embedding_dim=s.embedding_dim, read_dsn=read,
                min_size=s.pool_min_size, max_size=s.pool_max_size,
                timeout=s.request_pool_timeout_seconds,
                outage_retry_seconds=s.outage_retry_seconds,
            )
        self.db = database
        self.policy = policy or policy_from_settings(self.settings)
        self.clock = clock
        self.work = work or records.WorkOptions(
            embed=self.settings.embedding_provider != "none",
            extract=self.settings.llm_provider != "none",
            policy=self.policy,
        )
        self.retriever = Retriever(self.db, clock=clock, settings=self.settings,
                                   embedder=lambda: self.embedding.provider)
        self.operations = Operations(self)
        self.embedding = EmbeddingService.from_settings(self.settings, self.db, clock=clock)
        self.extraction = ExtractionService.from_settings(self.settings, self.db, policy=self.policy,
                                                          clock=clock, work=self.work)
        self.revisions = Revisions(self.db, policy=self.policy, clock=clock, work=self.work)
        self.maintenance = Maintenance(self)

    # -- capture (RFC 3) ------------------------------------------------------

    def _authorised(self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy
                    ) -> CaptureRequest:
        req = parse(CaptureRequest, request)
        trust.require_write(req.scope)
        # the level the capture is written at, the configured default included: a writer
        # never writes (nor, by its fact's key, meets) what it may not read (RFC 3.4, 7.3)
        level = self.policy.sensitivity(req.sensitivity)
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

    def plan(
        self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy = DEVELOPMENT_POLICY,
        *, record_id: uuid.UUID | None = None, operation_id: uuid.UUID | None = None,
    ) -> CapturePlan:
        """Validate and authorise one capture without writing it (RFC 3.3, 7.1)."""
        req = self._authorised(request, trust)
        with _content_errors():
            return plan_capture(req, self.policy, now=self.clock(), actor=trust.actor,
                                record_id=record_id, operation_id=operation_id)

    def capture(
        self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy = DEVELOPMENT_POLICY
    ) -> CaptureResult:
        """RFC 3.3: write one capture, its audit entry and work items in one transaction."""
        return self.capture_many([request], trust)[0]

    def capture_many(
        self, requests: Iterable[CaptureRequest | Mapping[str, Any]],
        trust: TrustPolicy = DEVELOPMENT_POLICY,
    ) -> list[CaptureResult]:
        """RFC 3.6: validate every capture first, then write them all in one transaction."""
        plans = [self.plan(r, trust) for r in requests]
        return self.write_plans(plans)

    def write_plans(self, plans: Sequence[CapturePlan]) -> list[CaptureResult]:
        """Write already validated plans in one transaction (RFC 3.3, 3.6)."""
        if not plans:
            return []
        with self.db.transaction() as conn:
            outcomes = records.write_captures(conn, plans, now=self.clock(), opts=self.work)
        return [CaptureResult(record_ids=o.record_ids, fact=o.fact, entities=o.entities)
                for o in outcomes]

    # -- reads (RFC 8) --------------------------------------------------------

    def get(self, record_id: uuid.UUID | str, trust: TrustPolicy = DEVELOPMENT_POLICY, *,
            as_of: datetime | None = None, valid_at: datetime | None = None) -> RecordView:
        """RFC 5.1, 5.6: one record by id with its status; redacted or ``NotFound`` per trust."""
        try:
            rid = uuid.UUID(str(record_id))
        except ValueError as exc:
            raise errors.InvalidInput(f"record id {record_id!r} is not a UUID") from exc
        return self.retriever.get(rid, trust, as_of=as_of, valid_at=valid_at)

    def retrieve(
        self, request: RetrieveRequest | Mapping[str, Any], trust: TrustPolicy = DEVELOPMENT_POLICY
    ) -> RetrieveResult:
        """RFC 8: bounded, trust-aware retrieval."""
        return self.retriever.retrieve(parse(RetrieveRequest, request), trust)

    def ping(self, timeout: float = 2.0) -> None:
        """RFC 14.2: raise ``errors.Unavailable`` unless the primary answers (readiness).

        RFC 10.5: the outcome feeds the request path's outage circuit, so readiness and
        requests agree on whether Postgres is down.
        """
        self.db.ping(timeout)

    # -- correction (RFC 5) ----------------------------------------------------

    def audit(
        self, record_id: uuid.UUID | str, trust: TrustPolicy = DEVELOPMENT_POLICY
    ) -> AuditHistory:
        """RFC 5.5: a record's audit history with ``chain_valid``, also after deletion."""
        return audit_log.history(self.db, _record_id(record_id), trust)

    def delete(
        self, record_id: uuid.UUID | str, trust: TrustPolicy = DEVELOPMENT_POLICY,
        rationale: str = "deleted",
    ) -> None:
        """RFC 5.5: hard-delete a record its deletion policy allows; its audit log stays."""
        audit_log.delete(self.db, _record_id(record_id), trust, rationale, now=self.clock())

    def metrics(self, trust: TrustPolicy = DEVELOPMENT_POLICY) -> dict[str, Any]:
        """RFC 14.2: memory metrics over what ``trust`` may read, queue depths, work backlog."""
        return metrics.collect(self.db, trust, now=self.clock())

    def close(self) -> None:
        """Release the connection pools."""
        self.db.close()

    def __enter__(self) -> Membrane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
