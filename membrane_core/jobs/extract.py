"""The LLM pool's batch: triples from episodes become derived semantic facts (RFC 12.2, 6.4).

A batch claims due ``extract`` items under a lease, calls the extractor outside any
transaction (it is rate limited and may be slow), then in one transaction re-reads
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

from membrane_core import providers
from membrane_core.capture import new_id
from membrane_core.clock import Clock
from membrane_core.embedding import fail_items
from membrane_core.enums import MemoryType, ProvenanceKind, RevisionStatus, Sensitivity, WorkKind
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
from membrane_core.providers.base import ProviderError, Triple, TripleExtractor, normalise_predicate
from membrane_core.settings import Settings
from membrane_core.storage import db as storage_db
from membrane_core.storage import derived, records
from membrane_core.storage import workqueue as wq

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


class ExtractionService:
    """``Membrane.extraction``: batches of LLM triple extraction (RFC 12.2)."""

    def __init__(
        self, db: storage_db.Database, extractor_factory: Callable[[], TripleExtractor | None], *,
        policy: Policy, clock: Clock, work: records.WorkOptions, batch_size: int = 100,
        lease_seconds: int = 300, owner: Callable[[], str] | None = None,
    ) -> None:
        self._db = db
        self._factory = extractor_factory
        self._extractor: TripleExtractor | None = None
        self._built = False
        self._policy = policy
        self._clock = clock
        self._work = work
        self._batch_size = batch_size
        self._lease = lease_seconds
        self._owner = owner

    @classmethod
    def from_settings(cls, settings: Settings, db: storage_db.Database, *, policy: Policy,
                      clock: Clock, work: records.WorkOptions) -> ExtractionService:
        """RFC 12.2: the extractor named by the settings, built on first use."""
        def factory() -> TripleExtractor | None:
            key = settings.llm_api_key
            return providers.build_extractor(
                settings.llm_provider, base_url=settings.llm_base_url, model=settings.llm_model,
                api_key=key.get_secret_value() if key else None,
                rate_limit_per_second=settings.llm_rate_limit_per_second,
            )
        return cls(db, factory, policy=policy, clock=clock, work=work,
                   batch_size=min(settings.batch_size, 100), lease_seconds=settings.claim_seconds)

    @property
    def extractor(self) -> TripleExtractor | None:
        """The extractor, built once per process (RFC 12.2)."""
        if not self._built:
            self._extractor, self._built = self._factory(), True
        return self._extractor

    def _who(self) -> str:
        if self._owner is not None:
            return self._owner()
        return wq.worker_name()

    def run_batch(self, limit: int | None = None) -> dict[str, Any]:
        """RFC 12.2, 9.4: extract facts from up to ``limit`` due episodes; returns a summary."""
        extractor = self.extractor
        owner, now = self._who(), self._clock()
        with self._db.transaction() as conn:
            items = wq.claim(conn, WorkKind.EXTRACT, owner=owner, now=now,
                             limit=limit or self._batch_size, lease_seconds=self._lease)
        summary: dict[str, Any] = {"job": "extract", "claimed": len(items),
                                   "provider": extractor.name if extractor else "none"}
        if not items:
            return summary
        if extractor is None:
            with self._db.transaction() as conn:
                done = wq.complete(conn, [it.id for it in items], owner=owner)
            log.info("extraction skipped: no LLM provider", extra={"items": done})
            return {**summary, "skipped": done, "reason": "no LLM provider configured"}
        with self._db.transaction() as conn:
            sources = records.hydrate(conn, {it.target_id for it in items})
        texts = {rid: t for rid, r in sources.items()
                 if r.status is not RevisionStatus.RETRACTED and (t := source_text(r))}
        order = list(texts)
        try:
            found = extractor.extract([texts[r] for r in order]) if order else []
        except ProviderError as exc:
            log.warning("extraction batch failed: %s", exc)
            return {**summary, "error": str(exc),
                    **fail_items(self._db, items, str(exc), owner=owner, now=self._clock())}
        triples = dict(zip(order, found, strict=True))
        return {**summary, **self._write(items, triples, owner, extractor.name)}

    def _write(self, items: Sequence[wq.WorkItem], triples: dict[UUID, list[Triple]], owner: str,
               name: str) -> dict[str, Any]:
        now = self._clock()
        with self._db.transaction() as conn:
            held = derived.hold(conn, [it.id for it in items], owner=owner)
            labels = derived.lock_sources(conn, [t for t in set(held.values()) if t in triples])
            facts, invalid = self._facts(triples, labels, now, actor=f"extractor:{name}")
            out = derived.write_facts(conn, facts, now=now, opts=self._work)
            wq.complete(conn, list(held), owner=owner)
        return {"created": len(out.created), "reinforced": len(out.reinforced),
                "tombstoned": out.tombstoned, "invalid": invalid, "lost": len(items) - len(held)}

    def _facts(self, triples: dict[UUID, list[Triple]],
               labels: dict[UUID, tuple[str, Sensitivity, str]], now: datetime, *, actor: str,
               ) -> tuple[list[derived.DerivedFact], int]:
        groups: dict[_Key, tuple[Triple, list[UUID]]] = {}
        for source, found in triples.items():
            label = labels.get(source)
            if label is None or label[2] == RevisionStatus.RETRACTED.value:
                continue
            for t in found:
                pred = normalise_predicate(t.predicate)
                key = records.fact_key(label[0], t.subject, pred, t.object)
                if not pred:
                    continue
                best, srcs = groups.get(key, (t, []))
                if source not in srcs:
                    srcs.append(source)
                groups[key] = (best if best.confidence >= t.confidence else t, srcs)
        facts: list[derived.DerivedFact] = []
        invalid = 0
        for (scope, _, pred, _), (t, srcs) in groups.items():
            sens = Sensitivity.from_rank(max(labels[s][1].rank for s in srcs))
            try:
                record = self._fact_record(t, pred, scope, sens, srcs, now, actor)
            except ValidationError:
                invalid += 1
                continue
            facts.append(derived.DerivedFact(record=record, source_ids=srcs, actor=actor))
        return facts, invalid

    def _fact_record(self, t: Triple, predicate: str, scope: str, sensitivity: Sensitivity,
                     sources: list[UUID], now: datetime, actor: str) -> MemoryRecord:
        validity = Validity()
        payload = SemanticPayload(
            subject=t.subject, predicate=predicate, object=t.object, validity=validity,
            evidence=[ProvenanceRef(kind=ProvenanceKind.OBSERVATION, ref=str(s)) for s in sources],
        )
        return MemoryRecord(
            id=new_id(), type=MemoryType.SEMANTIC, scope=scope, sensitivity=sensitivity,
            confidence=t.confidence, salience=1.0,
            lifecycle=Lifecycle(
                decay=self._policy.decay_profile(MemoryType.SEMANTIC), base_salience=1.0,
                reinforced_at=now, deletion_policy=self._policy.deletion[MemoryType.SEMANTIC],
            ),
            payload=payload, summary=f"{t.subject} {predicate} {t.object}",
            provenance=[ProvenanceSource(kind=ProvenanceKind.ARTIFACT, ref=f"extraction:{s}",
                                         created_by=actor, timestamp=now) for s in sources],
            validity=validity, created_at=now, updated_at=now, recorded_at=now,
        )
