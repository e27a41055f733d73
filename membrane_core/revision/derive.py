"""Derivations: the new record of a supersede, fork or merge (RFC 5.2.1-5.2.3).

What a derivation is (a frozen :class:`Derivation`), the fact key its record will have,
the record itself and the inferred/asserted check; :mod:`membrane_core.revision.engine`
writes them in one transaction.
"""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from pydantic import ValidationError

from membrane_core import errors
from membrane_core.capture.plan import new_id
from membrane_core.enums import AuditAction, OperationKind, ProvenanceKind, Sensitivity
from membrane_core.models import (
    Lifecycle,
    MemoryRecord,
    ProvenanceRef,
    ProvenanceSource,
    Relation,
    SemanticPayload,
    Validity,
)
from membrane_core.policy import Policy
from membrane_core.providers.base import normalise_predicate
from membrane_core.revision.rules import (
    ASSERTED_CONFIDENCE,
    RevisedRecord,
    is_inferred,
    is_inferring_actor,
    require_level,
    require_prunable,
    revised_content,
    revised_validity,
)
from membrane_core.sealing import Sealer
from membrane_core.storage import records, revisions
from membrane_core.trust import TrustPolicy


@dataclass(frozen=True)
class Derivation:
    """What one supersede, fork or merge writes beyond the steps they share (RFC 5.2.1-5.2.3)."""

    op: OperationKind
    ids: list[uuid.UUID]  #: the sources in the body's order; the first is the template
    record: RevisedRecord
    rationale: str
    evidence: list[ProvenanceRef]
    relation: str  #: the new record's relation to each source
    created: dict[str, Any]  #: details of the new record's create entry, ``reasserted`` aside
    source_action: AuditAction  #: the entry each source gets
    source_key: str  #: the detail of that entry naming the new record
    replaces: bool = True  #: the sources are checked, tombstoned and retracted (not a fork)
    force: bool = False  #: an inferred record may replace an asserted one
    points_back: bool = False  #: the source's payload and a relation point at the new record
    validity: Validity | None = None  #: overrides ``record.validity``
    review: bool = False  #: RFC 5.7: a reviewer's amend of a proposed fact


def new_fact_key(
    rec: RevisedRecord, template: tuple[revisions.FactKey, int] | None, rank: int, sealer: Sealer
) -> revisions.FactKey | None:
    """Fact key of the record a revision will create (template values fill the gaps), as
    stored at its level: the template's, the revision's or ``rank``, whichever is highest
    (RFC 7.4), blind when that level is sealed (RFC 7.6)."""
    if template is None:
        return None
    (scope, s, p, o), level = template
    level = max(level, rank, rec.sensitivity.rank if rec.sensitivity else 0)
    key = (
        scope,
        records.norm_term(rec.subject) if rec.subject else s,
        normalise_predicate(rec.predicate) if rec.predicate else p,
        records.norm_term(rec.object) if rec.object else o,
    )
    return records.stored_key(key, sealer, level)


def derived_record(
    d: Derivation,
    sources: Sequence[MemoryRecord],
    trust: TrustPolicy,
    now: datetime,
    policy: Policy,
) -> MemoryRecord:
    """RFC 5.2: the new record of a supersede, fork or merge; the first source is its template."""
    template, rec = sources[0], d.record
    require_level(rec.sensitivity, trust.max_sensitivity.rank)
    rank = max([s.sensitivity.rank for s in sources] + [rec.sensitivity.rank if rec.sensitivity else 0])
    validity = revised_validity(d.validity or rec.validity or Validity(), rec)
    cited = list(dict.fromkeys([*d.evidence, *rec.evidence]))
    provenance = [
        ProvenanceSource(kind=e.kind, ref=e.ref, created_by=trust.actor, timestamp=now) for e in cited
    ]
    provenance += [p.model_copy(update={"created_by": trust.actor}) for p in rec.provenance]
    if not provenance:
        provenance = [
            ProvenanceSource(
                kind=ProvenanceKind.EVENT,
                created_by=trust.actor,
                ref=f"revision:{d.op.value}:{template.id}",
                timestamp=now,
            )
        ]
    decay = policy.decay_profile(template.type)
    deletion = policy.deletion[template.type]
    if rec.max_age_seconds is not None:
        require_prunable(deletion, template.type)
        decay = decay.model_copy(update={"max_age_seconds": rec.max_age_seconds})
    confidence = rec.confidence
    if confidence is None:  # a user's or tool's correction is an assertion (RFC 5.2)
        confidence = max(s.confidence for s in sources)
        if not is_inferring_actor(trust.actor):
            confidence = max(confidence, ASSERTED_CONFIDENCE)
    try:
        payload, summary = revised_content(d.op, template, rec, cited, sources, validity)
        return MemoryRecord.model_validate(
            {
                "id": new_id(),
                "type": template.type,
                "scope": template.scope,
                "sensitivity": Sensitivity.from_rank(rank),
                "confidence": confidence,
                "salience": 1.0,
                "lifecycle": Lifecycle(
                    decay=decay, base_salience=1.0, reinforced_at=now, deletion_policy=deletion
                ),
                "payload": payload,
                "summary": summary,
                "tags": rec.tags if rec.tags is not None else template.tags,
                "metadata": rec.metadata if rec.metadata is not None else template.metadata,
                "provenance": provenance,
                "relations": [Relation(predicate=d.relation, target_id=i) for i in d.ids],
                "validity": validity if isinstance(payload, SemanticPayload) else rec.validity,
                "occurred_at": now,
                "created_at": now,
                "updated_at": now,
                "recorded_at": now,
            }
        )
    except ValidationError as exc:
        raise errors.InvalidInput(
            "invalid revised record",
            details=[{**e, "field": f"record.{e['field']}"} for e in errors.field_errors(exc)],
        ) from exc


def check_inferred(olds: Sequence[MemoryRecord], new: MemoryRecord, trust: TrustPolicy, force: bool) -> None:
    """RFC 5.2: an inferred record does not replace an asserted one unless forced."""
    if force:
        return
    new_inferred = is_inferring_actor(trust.actor) or is_inferred(
        new.confidence, [p.created_by for p in new.provenance]
    )
    asserted = [o.id for o in olds if not is_inferred(o.confidence, [p.created_by for p in o.provenance])]
    if new_inferred and asserted:
        raise errors.RevisionRefused(
            f"an inferred record cannot replace asserted record {asserted[0]} without force",
            details=[{"field": "force", "message": "required", "type": "revision_refused"}],
        )
