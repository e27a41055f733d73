"""The extract job: triples from episodes become derived semantic facts (RFC 12.2, 6.4).

The batch runner claims due ``extract`` items under a lease; the handler calls the
extractor outside any transaction (it is rate limited and may be slow), then in the
transaction that completes the items still held re-reads
the sources under lock and writes the facts: scope of the source, the maximum
sensitivity of the sources that state the fact, ``derived_from`` each source;
tombstoned keys are never re-created and a live fact is reinforced, not duplicated
(RFC 5.4, 7.4). Without an extractor the items are completed and reported skipped.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import datetime
from typing import Any
from uuid import UUID

from pydantic import ValidationError

from membrane_core import errors, providers
from membrane_core.capture.plan import new_id
from membrane_core.clock import Clock
from membrane_core.enums import MemoryType, ProvenanceKind, RevisionStatus, Sensitivity, WorkKind
from membrane_core.jobs.runner import BatchRunner, Outcome
from membrane_core.models import (
    EpisodicPayload,
    Lifecycle,
    MemoryRecord,
    ProvenanceRef,
    ProvenanceSource,
    SemanticPayload,
    Validity,
)
from membrane_core.policy import Policy
from membrane_core.providers.base import Triple, TripleExtractor, normalise_predicate
from membrane_core.settings import Settings
from membrane_core.storage import derived, records
from membrane_core.storage.db import Connection, Database
from membrane_core.storage.workqueue import WorkItem, WorkQueue, worker_name

log = logging.getLogger(__name__)

_Key = tuple[str, str, str, str]


def source_text(record: MemoryRecord) -> str | None:
    """RFC 12.2: what the extractor reads of an episode: its text and textual tool results."""
    p = record.payload
    if not isinstance(p, EpisodicPayload):
        return None
    parts = [p.text or ""] + [c.result for c in p.tool_calls if isinstance(c.result, str)]
    text = "\n".join(x for x in parts if x.strip())
    return text or None


#: RFC 5.4, 5.7: episodes extraction never reads: retracted ones, and proposed ones until approved
_UNREAD = (RevisionStatus.RETRACTED, RevisionStatus.PROPOSED)


class ExtractHandler:
    """RFC 12.2: the facts a batch's episodes state, from one extractor call."""

    kind = WorkKind.EXTRACT

    def __init__(
        self, db: Database, extractor: TripleExtractor | None, *, policy: Policy, work: records.WorkOptions
    ) -> None:
        self._db = db
        self._extractor = extractor
        self._policy = policy
        self._work = work
        #: RFC 7.6: sealed sources whose key the ring lacks, with the error naming it
        self._unopened: dict[UUID, str] = {}

    def prepare(self, items: Sequence[WorkItem]) -> dict[UUID, list[Triple]] | None:
        """The triples of each live episode's text; None without an extractor. A sealed
        episode is read only by an extractor that runs in the process (RFC 7.6)."""
        if self._extractor is None:
            return None
        sealer = self._work.sealer
        with self._db.transaction() as conn:
            rows = records.hydrate_rows(conn, {it.target_id for it in items})
        if providers.is_external(self._extractor.name):
            rows = {rid: row for rid, row in rows.items() if row["sealed"] is None}
        sources: dict[UUID, MemoryRecord] = {}
        for rid, row in rows.items():
            try:
                sources[rid] = records.row_to_record(sealer.open_row(row))
            except errors.EncryptionKeyUnavailable as exc:
                self._unopened[rid] = exc.message
        texts = {rid: t for rid, r in sources.items() if r.status not in _UNREAD and (t := source_text(r))}
        order = list(texts)
        found = self._extractor.extract([texts[r] for r in order]) if order else []
        return dict(zip(order, found, strict=True))

    def apply(
        self,
        conn: Connection,
        held: dict[int, UUID],
        prepared: dict[UUID, list[Triple]] | None,
        now: datetime,
    ) -> Outcome:
        """Write the held episodes' facts under a lock on their sources; complete the items. A
        source whose key the ring lacks fails the batch, and then (item by item, RFC 9.4) its
        own item only (RFC 7.6)."""
        unopened = [t for t in sorted(set(held.values())) if t in self._unopened]
        if unopened:
            raise errors.EncryptionKeyUnavailable(self._unopened[unopened[0]])
        out = Outcome(done=list(held))
        if prepared is None or self._extractor is None:
            return out
        labels = derived.lock_sources(conn, [t for t in set(held.values()) if t in prepared])
        facts, invalid = self._facts(prepared, labels, now, actor=f"extractor:{self._extractor.name}")
        written = derived.write_facts(conn, facts, now=now, opts=self._work, review=True)
        out.stats.update(
            created=len(written.created),
            reinforced=len(written.reinforced),
            corroborated=len(written.corroborated),
            tombstoned=written.tombstoned,
            invalid=invalid,
        )
        return out

    def _facts(
        self,
        triples: dict[UUID, list[Triple]],
        labels: dict[UUID, derived.SourceLabel],
        now: datetime,
        *,
        actor: str,
    ) -> tuple[list[derived.DerivedFact], int]:
        # RFC 7.6: a sealed source's key is blind, so its facts meet sealed facts only
        groups: dict[_Key, tuple[Triple, str, list[UUID]]] = {}
        sealer = self._work.sealer
        for source, found in triples.items():
            label = labels.get(source)
            if label is None or label.status in _UNREAD:
                continue
            for t in found:
                pred = normalise_predicate(t.predicate)
                if not pred:
                    continue
                key = records.fact_key(
                    label.scope, t.subject, pred, t.object, sealer=sealer, rank=label.sensitivity.rank
                )
                best, _, srcs = groups.get(key, (t, pred, []))
                if source not in srcs:
                    srcs.append(source)
                groups[key] = (best if best.confidence >= t.confidence else t, pred, srcs)
        facts: list[derived.DerivedFact] = []
        invalid = 0
        for (scope, _, _, _), (t, pred, srcs) in groups.items():
            sens = Sensitivity.from_rank(max(labels[s].sensitivity.rank for s in srcs))
            try:
                record = self._fact_record(t, pred, scope, sens, srcs, now, actor)
            except ValidationError:
                invalid += 1
                continue
            facts.append(derived.DerivedFact(record=record, source_ids=srcs, actor=actor))
        return facts, invalid

    def _fact_record(
        self,
        t: Triple,
        predicate: str,
        scope: str,
        sensitivity: Sensitivity,
        sources: list[UUID],
        now: datetime,
        actor: str,
    ) -> MemoryRecord:
        validity = Validity()
        payload = SemanticPayload(
            subject=t.subject,
            predicate=predicate,
            object=t.object,
            validity=validity,
            evidence=[ProvenanceRef(kind=ProvenanceKind.OBSERVATION, ref=str(s)) for s in sources],
        )
        return MemoryRecord(
            id=new_id(),
            type=MemoryType.SEMANTIC,
            scope=scope,
            sensitivity=sensitivity,
            confidence=t.confidence,
            salience=1.0,
            lifecycle=Lifecycle(
                decay=self._policy.decay_profile(MemoryType.SEMANTIC),
                base_salience=1.0,
                reinforced_at=now,
                deletion_policy=self._policy.deletion[MemoryType.SEMANTIC],
            ),
            payload=payload,
            summary=f"{t.subject} {predicate} {t.object}",
            provenance=[
                ProvenanceSource(
                    kind=ProvenanceKind.ARTIFACT, ref=f"extraction:{s}", created_by=actor, timestamp=now
                )
                for s in sources
            ],
            validity=validity,
            created_at=now,
            updated_at=now,
            recorded_at=now,
        )


class ExtractionService:
    """``Membrane.extraction``: batches of LLM triple extraction (RFC 12.2)."""

    def __init__(
        self,
        db: Database,
        extractor_factory: Callable[[], TripleExtractor | None],
        *,
        policy: Policy,
        clock: Clock,
        work: records.WorkOptions,
        batch_size: int = 100,
        lease_seconds: int = 300,
        owner: Callable[[], str] = worker_name,
    ) -> None:
        self._db = db
        self._factory = extractor_factory
        self._extractor: TripleExtractor | None = None
        self._built = False
        self._policy = policy
        self._work = work
        self._batch_size = batch_size
        self._clock, self._owner, self._lease = clock, owner, lease_seconds
        self._queue = WorkQueue(db)
        self._runner = BatchRunner(self._queue, clock=clock, owner=owner, lease_seconds=lease_seconds)

    @classmethod
    def from_settings(
        cls, settings: Settings, db: Database, *, policy: Policy, clock: Clock, work: records.WorkOptions
    ) -> ExtractionService:
        """RFC 12.2: the extractor named by the settings, built on first use."""

        def factory() -> TripleExtractor | None:
            key = settings.llm_api_key
            return providers.build_extractor(
                settings.llm_provider,
                base_url=settings.llm_base_url,
                model=settings.llm_model,
                api_key=key.get_secret_value() if key else None,
                rate_limit_per_second=settings.llm_rate_limit_per_second,
            )

        return cls(
            db,
            factory,
            policy=policy,
            clock=clock,
            work=work,
            batch_size=min(settings.batch_size, 100),
            lease_seconds=settings.claim_seconds,
        )

    @property
    def extractor(self) -> TripleExtractor | None:
        """The extractor, built once per process (RFC 12.2)."""
        if not self._built:
            self._extractor, self._built = self._factory(), True
        return self._extractor

    def run_batch(self, limit: int | None = None) -> dict[str, Any]:
        """RFC 12.2, 9.4: extract facts from up to ``limit`` due episodes; returns a summary.

        Without an extractor the items are completed and reported ``skipped``.
        """
        extractor = self.extractor
        n = limit or self._batch_size
        if extractor is None:
            return self._skip(n)
        handler = ExtractHandler(self._db, extractor, policy=self._policy, work=self._work)
        return {"job": "extract", "provider": extractor.name, **self._runner.run(handler, n)}

    def _skip(self, limit: int) -> dict[str, Any]:
        """Complete due items that no extractor will read (RFC 12.2)."""
        owner = self._owner()
        items = self._queue.claim(
            WorkKind.EXTRACT, owner=owner, limit=limit, now=self._clock(), lease_seconds=self._lease
        )
        summary: dict[str, Any] = {"job": "extract", "claimed": len(items), "provider": "none"}
        if not items:
            return summary
        _, done = self._queue.apply(
            [it.id for it in items], owner=owner, work=lambda conn, held: Outcome(done=list(held))
        )
        log.info("extraction skipped: no LLM provider", extra={"items": done})
        return {**summary, "skipped": done, "reason": "no LLM provider configured"}
