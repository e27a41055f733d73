"""``Membrane``: the embeddable, synchronous library facade (RFC 1.2)."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Any

from membrane_core import errors, metrics
from membrane_core.capture.plan import CapturePlan
from membrane_core.capture.service import CaptureService
from membrane_core.clock import Clock, utcnow
from membrane_core.inbox.submit import Inbox
from membrane_core.inbox.worker import InboxWorker
from membrane_core.jobs.embed import EmbeddingService, model_id
from membrane_core.jobs.extract import ExtractionService
from membrane_core.jobs.maintenance import Maintenance
from membrane_core.jobs.seal import Sealing
from membrane_core.listing.service import Listing
from membrane_core.metrics import DeploymentGauges
from membrane_core.models import AuditHistory
from membrane_core.policy import Policy, policy_from_settings
from membrane_core.providers import is_external
from membrane_core.providers.base import Reranker
from membrane_core.requests import CaptureRequest, RetrieveRequest, parse
from membrane_core.results import CaptureResult, RecordView, RetrieveResult
from membrane_core.retrieval.retriever import Retriever
from membrane_core.review.service import Review
from membrane_core.revision import history
from membrane_core.revision.engine import Revisions
from membrane_core.sealing import Sealer
from membrane_core.settings import Settings
from membrane_core.storage import migrate, records
from membrane_core.storage.db import Database, resolve_dsn
from membrane_core.storage.replica import format_lsn
from membrane_core.transfer.erasure import Erasure
from membrane_core.transfer.service import Transfer
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

__all__ = ["Membrane"]


def _reranker_factory(s: Settings) -> Callable[[], Reranker] | None:
    """RFC 8.2.4: the cross-encoder of ``reranker_path``, loaded on the first retrieve that
    asks a question (None: no reranker)."""
    path = s.reranker_path
    if path is None:
        return None

    def build() -> Reranker:
        from membrane_core.providers.rerank_local import LocalCrossEncoder

        return LocalCrossEncoder(path, cache_dir=s.data_dir / "models", quantized=s.reranker_int8)

    return build


def _record_id(value: uuid.UUID | str) -> uuid.UUID:
    try:
        return uuid.UUID(str(value))
    except ValueError as exc:
        raise errors.InvalidInput(f"record id {value!r} is not a UUID") from exc


class Membrane:
    """The memory substrate as a library: capture, get, retrieve (RFC 1.2).

    Without ``database`` it reads :class:`Settings`, when ``MEMBRANE_DATABASE_URL`` is
    unset starts the embedded Postgres under ``MEMBRANE_DATA_DIR`` (RFC 11.2), and applies
    pending migrations (RFC 11.1) unless ``run_migrations`` is false, in which case it
    only checks that none is pending. A given ``database`` is used as it is.

    The embedded server outlives this object and its process: :meth:`close` releases
    connections only. ``membrane db stop`` stops the server (``membrane db status`` shows it).

    With ``MEMBRANE_ENCRYPTION_KEYS`` every write seals the records at or above
    ``MEMBRANE_ENCRYPT_AT_OR_ABOVE`` (RFC 7.6); a ``work`` without a sealer of its own gets it.
    """

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        database: Database | None = None,
        policy: Policy | None = None,
        clock: Clock = utcnow,
        work: records.WorkOptions | None = None,
        run_migrations: bool = True,
    ) -> None:
        self.settings = settings or Settings()
        if database is None:
            s = self.settings
            dsn = resolve_dsn(s.database_dsn(), s.data_dir)
            read = s.read_database_url.get_secret_value() if s.read_database_url else None
            # RFC 11.1: migrating is this entry point's explicit step; a process that must
            # not migrate (a worker) only checks that the schema is current
            if run_migrations:
                migrate.migrate(dsn, s.embedding_dim)
            else:
                migrate.require_current(dsn)
            # RFC 10.5: a request waits at most request_pool_timeout_seconds for a
            # connection, and none at all while Postgres is known to be down
            database = Database(
                dsn,
                embedding_dim=s.embedding_dim,
                read_dsn=read,
                min_size=s.pool_min_size,
                max_size=s.pool_max_size,
                timeout=s.request_pool_timeout_seconds,
                outage_retry_seconds=s.outage_retry_seconds,
                role=s.database_role,
                replica_wait_seconds=s.replica_wait_seconds,
                replica_max_lag_seconds=s.replica_max_lag_seconds,
            )
        self.db = database
        self.policy = policy or policy_from_settings(self.settings)
        self.clock = clock
        s = self.settings
        ring = s.encryption_ring()
        sealer = Sealer(ring, at_or_above=s.encrypt_at_or_above)
        # RFC 7.6: sealed records go only to providers in the process, unless allowed
        embed_sealed = s.embed_encrypted_externally or not is_external(s.embedding_provider)
        extract_sealed = not is_external(s.llm_provider)
        if work is None:
            work = records.WorkOptions(
                embed=s.embedding_provider != "none",
                extract=s.llm_provider != "none",
                policy=self.policy,
                sealer=sealer,
                embed_sealed=embed_sealed,
                extract_sealed=extract_sealed,
                review_ttl=timedelta(seconds=s.review_ttl),
                review_extractions=s.review_extractions,
            )
        elif ring is not None and not work.sealer.enabled:
            work = dataclasses.replace(
                work, sealer=sealer, embed_sealed=embed_sealed, extract_sealed=extract_sealed
            )
        self.work = work
        sealer = self.work.sealer
        # Built in dependency order; each service gets exactly what it uses.
        self.captures = CaptureService(self.db, policy=self.policy, clock=clock, work=self.work)
        self.embedding = EmbeddingService.from_settings(s, self.db, clock=clock, sealer=sealer)
        self.extraction = ExtractionService.from_settings(
            s, self.db, policy=self.policy, clock=clock, work=self.work
        )
        embedding = self.embedding
        self.retriever = Retriever(
            self.db,
            clock=clock,
            settings=s,
            embedder=lambda: embedding.query_provider,
            sealer=sealer,
            late_interaction=s.late_interaction,
            reranker=_reranker_factory(s),
            rerank_pool=s.reranker_pool,
            rerank_weight=s.reranker_weight,
        )
        self.revisions = Revisions(self.db, policy=self.policy, clock=clock, work=self.work)
        self.review = Review(self.db, clock=clock, work=self.work, revisions=self.revisions)
        self.maintenance = Maintenance(
            self.db,
            clock=clock,
            policy=self.policy,
            work=self.work,
            batch_size=s.batch_size,
            lease_seconds=s.claim_seconds,
            embedding=self.embedding,
            extraction=self.extraction,
        )
        self.inbox = Inbox(self.db, clock=clock, captures=self.captures, sealer=sealer)
        self.inbox_worker = InboxWorker(
            self.db,
            clock=clock,
            captures=self.captures,
            work=self.work,
            revisions=self.revisions,
            maintenance=self.maintenance,
            lease_seconds=s.claim_seconds,
            retention_seconds=s.operations_retention_seconds,
            sealer=sealer,
        )
        #: RFC 10.7: lists of records, lineage, operations, the work queue and scopes
        self.listing = Listing(self.db, clock=clock, sealer=sealer)
        #: RFC 7.6: rotation's side of the store (``membrane rotate-encryption-key``)
        self.sealing = Sealing(self.db, sealer, clock=clock)
        #: RFC 15: export and import
        self.transfer = Transfer(
            self.db, clock=clock, embedding_model=self._embedding_model, sealer=self.work.sealer
        )
        #: RFC 15.4: erasure
        self.erasure = Erasure(self.db, clock=clock)

    # -- capture (RFC 3) ------------------------------------------------------

    def check(
        self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy = DEVELOPMENT_POLICY
    ) -> CaptureRequest:
        """Validate and authorise one capture without building its records (RFC 2.4, 7.1)."""
        return self.captures.check(request, trust)

    def plan(
        self,
        request: CaptureRequest | Mapping[str, Any],
        trust: TrustPolicy = DEVELOPMENT_POLICY,
        *,
        record_id: uuid.UUID | None = None,
        operation_id: uuid.UUID | None = None,
    ) -> CapturePlan:
        """Validate and authorise one capture without writing it (RFC 3.3, 7.1)."""
        return self.captures.plan(request, trust, record_id=record_id, operation_id=operation_id)

    def capture(
        self, request: CaptureRequest | Mapping[str, Any], trust: TrustPolicy = DEVELOPMENT_POLICY
    ) -> CaptureResult:
        """RFC 3.3: write one capture, its audit entry and work items in one transaction."""
        return self.captures.capture_many([request], trust)[0]

    def capture_many(
        self,
        requests: Iterable[CaptureRequest | Mapping[str, Any]],
        trust: TrustPolicy = DEVELOPMENT_POLICY,
    ) -> list[CaptureResult]:
        """RFC 3.6: validate every capture first, then write them all in one transaction."""
        return self.captures.capture_many(requests, trust)

    def write_plans(self, plans: Sequence[CapturePlan]) -> list[CaptureResult]:
        """Write already validated plans in one transaction (RFC 3.3, 3.6)."""
        return self.captures.write_plans(plans)

    # -- reads (RFC 8) --------------------------------------------------------

    def get(
        self,
        record_id: uuid.UUID | str,
        trust: TrustPolicy = DEVELOPMENT_POLICY,
        *,
        as_of: datetime | None = None,
        valid_at: datetime | None = None,
    ) -> RecordView:
        """RFC 5.1, 5.6: one record by id with its status; redacted or ``NotFound`` per trust."""
        return self.retriever.get(_record_id(record_id), trust, as_of=as_of, valid_at=valid_at)

    def retrieve(
        self, request: RetrieveRequest | Mapping[str, Any], trust: TrustPolicy = DEVELOPMENT_POLICY
    ) -> RetrieveResult:
        """RFC 8: bounded, trust-aware retrieval."""
        return self.retriever.retrieve(parse(RetrieveRequest, request), trust)

    def consistency(self) -> str:
        """RFC 13.2: a consistency token covering every write committed before this call (the
        primary's WAL position): a read given it sees those writes, on a replica or not."""
        return format_lsn(self.db.position())

    def ping(self, timeout: float = 2.0) -> None:
        """RFC 14.2: raise ``errors.Unavailable`` unless the primary answers (readiness).

        RFC 10.5: the outcome feeds the request path's outage circuit, so readiness and
        requests agree on whether Postgres is down.
        """
        self.db.ping(timeout)

    # -- correction (RFC 5) ----------------------------------------------------

    def audit(self, record_id: uuid.UUID | str, trust: TrustPolicy = DEVELOPMENT_POLICY) -> AuditHistory:
        """RFC 5.5: a record's audit history with ``chain_valid``, also after deletion."""
        return history.history(self.db, _record_id(record_id), trust, self.work.sealer)

    def delete(
        self,
        record_id: uuid.UUID | str,
        trust: TrustPolicy = DEVELOPMENT_POLICY,
        rationale: str = "deleted",
    ) -> None:
        """RFC 5.5: hard-delete a record its deletion policy allows; its audit log stays."""
        history.delete(
            self.db, _record_id(record_id), trust, rationale, now=self.clock(), sealer=self.work.sealer
        )

    def metrics(self, trust: TrustPolicy = DEVELOPMENT_POLICY) -> dict[str, Any]:
        """RFC 14.2: memory metrics over what ``trust`` may read, queue depths, work backlog."""
        return metrics.collect(self.db, trust, now=self.clock())

    def deployment_gauges(self) -> DeploymentGauges:
        """RFC 14.2: inbox depth, due work, its oldest item and the embedding lag (an operator's
        Prometheus figures: the caller checks who asks)."""
        return metrics.deployment(self.db, now=self.clock())

    def _embedding_model(self) -> str | None:
        """RFC 15.2: the model the store's vectors name (``None`` without a provider)."""
        provider = self.embedding.provider
        return model_id(provider) if provider is not None else None

    def close(self) -> None:
        """Release the connection pools."""
        self.db.close()

    def __enter__(self) -> Membrane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
