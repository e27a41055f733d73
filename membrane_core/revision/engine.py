"""Revision operations: supersede, fork, merge, retract, contest, reinforce, penalize (RFC 5.2).

Each operation is ONE transaction that re-reads and locks its targets, re-checks the
caller's trust against what it locked, writes its changes and its audit entries, and
never changes the salience of what it retracts or contests (RFC 5.3).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from pydantic import ValidationError

from membrane_core import decay, errors
from membrane_core.capture.plan import new_id
from membrane_core.enums import (
    AuditAction,
    MemoryType,
    OperationKind,
    ProvenanceKind,
    RevisionStatus,
    Sensitivity,
    ValidityMode,
    WorkKind,
)
from membrane_core.models import (
    DecayProfile,
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
    ContestBody,
    ForkBody,
    MergeBody,
    PenalizeBody,
    ReinforceBody,
    RetractBody,
    RevisedRecord,
    SupersedeBody,
    is_inferred,
    is_inferring_actor,
    parse,
    parse_body,
    require_level,
    require_revisable,
    revised_content,
    revised_validity,
)
from membrane_core.storage import records, revisions
from membrane_core.storage.db import Connection, Database
from membrane_core.trust import TrustPolicy

#: RFC 7.6: what a tombstone at a sealed level says of its rationale (sealed in the audit log).
SEALED_TOMBSTONE = "sealed: see the audit log"


@dataclass(frozen=True)
class _Derivation:
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


class Revisions:
    """RFC 5.2: the revision operations, each one transaction with its audit entries."""

    def __init__(
        self,
        db: Database,
        *,
        policy: Policy,
        clock: Callable[[], datetime],
        work: records.WorkOptions,
    ) -> None:
        self.db = db
        self.policy = policy
        self.clock = clock
        self.work = work

    # -- entry point of the revision worker -----------------------------------

    def apply(
        self,
        kind: OperationKind | str,
        target_id: uuid.UUID | None,
        body: Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> list[uuid.UUID]:
        """RFC 5.2: run one revision; returns the new record's id, else the target's.

        With ``conn`` the revision runs inside the caller's transaction (the worker's, so
        the operation's status commits with it); otherwise in its own.
        """
        parsed = parse_body(kind, body)
        op = OperationKind(kind)
        if op is OperationKind.MERGE:
            merge = parse(MergeBody, parsed)
            if target_id is not None and target_id not in merge.record_ids:
                raise errors.InvalidInput(
                    "merge target must be one of record_ids",
                    details=[{"field": "record_ids", "message": "target missing", "type": "value_error"}],
                )
            return [self.merge(merge, trust, conn=conn)]
        if target_id is None:
            raise errors.InvalidInput(f"{op.value} needs a target record id")
        handlers: dict[OperationKind, Callable[..., uuid.UUID]] = {
            OperationKind.SUPERSEDE: self.supersede,
            OperationKind.FORK: self.fork,
            OperationKind.RETRACT: self.retract,
            OperationKind.CONTEST: self.contest,
            OperationKind.REINFORCE: self.reinforce,
            OperationKind.PENALIZE: self.penalize,
        }
        return [handlers[op](target_id, parsed, trust, conn=conn)]

    # -- content revisions (RFC 5.2.1-5.2.3) --------------------------------------

    def supersede(
        self,
        target_id: uuid.UUID,
        body: SupersedeBody | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> uuid.UUID:
        """RFC 5.2.1: replace a record with a new one; the old one is retracted and linked."""
        b = parse(SupersedeBody, body)
        change = _Derivation(
            OperationKind.SUPERSEDE,
            [target_id],
            b.record,
            b.rationale,
            b.evidence,
            relation="supersedes",
            created={"operation": "supersede", "supersedes": str(target_id)},
            source_action=AuditAction.REVISE,
            source_key="superseded_by",
            force=b.force,
            points_back=True,
        )
        return self._derive(change, trust, conn)

    def fork(
        self,
        target_id: uuid.UUID,
        body: ForkBody | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> uuid.UUID:
        """RFC 5.2.2: a conditional variant beside the original; both stay active."""
        b = parse(ForkBody, body)
        conditions = (
            b.condition
            if isinstance(b.condition, dict)
            else ({"condition": b.condition} if b.condition else {})
        )
        base = b.record.validity or Validity()
        validity = base.model_copy(
            update={"mode": ValidityMode.CONDITIONAL, "conditions": {**base.conditions, **conditions}}
        )
        change = _Derivation(
            OperationKind.FORK,
            [target_id],
            b.record,
            b.rationale,
            b.evidence,
            relation="derived_from",
            created={"operation": "fork", "forked_from": str(target_id)},
            source_action=AuditAction.FORK,
            source_key="variant_id",
            replaces=False,
            validity=validity,
        )
        return self._derive(change, trust, conn)

    def merge(
        self,
        body: MergeBody | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> uuid.UUID:
        """RFC 5.2.3: one new record from several sources; the sources are retracted."""
        b = parse(MergeBody, body)
        ids = list(dict.fromkeys(b.record_ids))
        if len(ids) < 2:
            raise errors.InvalidInput(
                "merge needs at least two distinct records",
                details=[
                    {"field": "record_ids", "message": "fewer than two distinct ids", "type": "value_error"}
                ],
            )
        change = _Derivation(
            OperationKind.MERGE,
            ids,
            b.record,
            b.rationale,
            b.evidence,
            relation="derived_from",
            created={"operation": "merge", "merged_from": [str(i) for i in ids]},
            source_action=AuditAction.MERGE,
            source_key="merged_into",
            force=b.force,
        )
        return self._derive(change, trust, conn)

    def _derive(self, d: _Derivation, trust: TrustPolicy, conn: Connection | None) -> uuid.UUID:
        """RFC 5.2.1-5.2.3: the one transaction of a supersede, fork or merge. Lock the fact keys
        it retracts or creates (5.4), then its sources; build the new record; retract what it
        replaces; queue the record with its create entry and one entry per source."""
        with self._tx(conn) as c:
            now = self.clock()
            peek = revisions.fact_key_levels(c, d.ids)
            rank = max((lv for _, lv in peek.values()), default=0)
            new_key = self._new_key(d.record, peek.get(d.ids[0]), rank)
            retired = [k for k, _ in peek.values()] if d.replaces else []
            revisions.lock_keys(c, [*retired, *([new_key] if new_key else [])])
            targets = self._lock(c, d.ids, trust)
            # RFC 5.2.3: a merge's sources share one scope and one type (one source always does)
            if len({t.scope for t in targets.values()}) > 1 or len({t.type for t in targets.values()}) > 1:
                raise errors.RevisionRefused("merged records must share one scope and one type")
            hydrated = self._hydrate(c, d.ids)
            sources = [hydrated[i] for i in d.ids]
            new = self._build(
                d.op,
                sources[0],
                d.record,
                d.evidence,
                trust,
                now,
                sources=sources,
                relations=[Relation(predicate=d.relation, target_id=i) for i in d.ids],
                validity=d.validity,
            )
            if d.replaces:
                self._check_inferred(sources, new, trust, d.force)
            batch = records.RowBatch(sealer=self.work.sealer)
            reasserted = self._reassert(c, new)
            if d.replaces:
                self._tombstone(c, [targets[i] for i in d.ids], new, trust.actor, d.rationale, now)
                revisions.mark_retracted(c, d.ids, now)
            if d.points_back:
                old = sources[0]
                if isinstance(old.payload, SemanticPayload):
                    self._set_superseded_by(c, old, new.id)
                batch.relations.append((old.id, "superseded_by", new.id, None, now))
            self._add_new(batch, new, trust.actor, d.rationale, {**d.created, "reasserted": reasserted})
            for i in d.ids:
                batch.audit_entry(
                    i,
                    targets[i].scope,
                    targets[i].sensitivity,
                    d.source_action,
                    trust.actor,
                    now,
                    d.rationale,
                    {"operation": d.op.value, d.source_key: str(new.id)},
                )
            batch.flush(c)
        return new.id

    # -- status revisions (RFC 5.2.4, 5.2.5) ------------------------------------------

    def retract(
        self,
        target_id: uuid.UUID,
        body: RetractBody | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> uuid.UUID:
        """RFC 5.2.4: withdraw a record and tombstone its fact key; salience is untouched."""
        b = parse(RetractBody, body)
        with self._tx(conn) as c:
            now = self.clock()
            revisions.lock_keys(c, revisions.fact_keys(c, [target_id]).values())
            target = self._lock(c, [target_id], trust)[target_id]
            self._tombstone(c, [target], None, trust.actor, b.rationale, now)
            revisions.mark_retracted(c, [target_id], now)
            batch = records.RowBatch(sealer=self.work.sealer)
            batch.audit_entry(
                target_id,
                target.scope,
                target.sensitivity,
                AuditAction.REVISE,
                trust.actor,
                now,
                b.rationale,
                {"operation": "retract"},
            )
            batch.flush(c)
        return target_id

    def contest(
        self,
        target_id: uuid.UUID,
        body: ContestBody | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> uuid.UUID:
        """RFC 5.2.5: mark a record contested; link the contesting record only if visible."""
        b = parse(ContestBody, body)
        with self._tx(conn) as c:
            now = self.clock()
            target = self._lock(c, [target_id], trust)[target_id]
            other = b.contesting_record_id
            linked = None
            if other is not None and other != target_id:
                acc = revisions.access(c, [other]).get(other)
                if acc and trust.visibility(acc.scope, acc.sensitivity) == "full":
                    linked = other
            revisions.mark_contested(c, target_id, now)
            batch = records.RowBatch(sealer=self.work.sealer)
            details: dict[str, Any] = {"operation": "contest"}
            if linked is not None:
                # a repeated contest by the same record is audited again, linked once
                if not revisions.has_relation(c, linked, "contests", target_id):
                    batch.relations.append((linked, "contests", target_id, None, now))
                    batch.relations.append((target_id, "contested_by", linked, None, now))
                details["contesting_record_id"] = str(linked)
            batch.audit_entry(
                target_id,
                target.scope,
                target.sensitivity,
                AuditAction.REVISE,
                trust.actor,
                now,
                b.rationale,
                details,
            )
            batch.flush(c)
        return target_id

    # -- salience (RFC 5.2.6, 5.2.7) ------------------------------------------------

    def reinforce(
        self,
        target_id: uuid.UUID,
        body: ReinforceBody | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> uuid.UUID:
        """RFC 5.2.6: current salience plus the type's gain; the decay clock restarts."""
        b = parse(ReinforceBody, body)
        return self._adjust(target_id, trust, b.rationale, None, conn)

    def penalize(
        self,
        target_id: uuid.UUID,
        body: PenalizeBody | Mapping[str, Any],
        trust: TrustPolicy,
        *,
        conn: Connection | None = None,
    ) -> uuid.UUID:
        """RFC 5.2.7: current salience minus ``amount`` (not below 0); the decay clock restarts."""
        b = parse(PenalizeBody, body)
        return self._adjust(target_id, trust, b.rationale, b.amount, conn)

    def _adjust(
        self,
        target_id: uuid.UUID,
        trust: TrustPolicy,
        rationale: str,
        penalty: float | None,
        conn: Connection | None,
    ) -> uuid.UUID:
        with self._tx(conn) as c:
            now = self.clock()
            t = self._lock(c, [target_id], trust, allow_episodic=True, allow_retracted=penalty is not None)[
                target_id
            ]
            profile = DecayProfile(half_life_seconds=t.half_life_seconds, min_salience=t.min_salience)
            current = decay.salience_at(t.base_salience, t.reinforced_at, profile, now, pinned=t.pinned)
            if penalty is None:
                gain = self.policy.reinforcement_gain[MemoryType(t.type)]
                base = decay.reinforced(current, gain)
                action, details = AuditAction.REINFORCE, {"operation": "reinforce", "gain": gain}
            else:
                base = max(0.0, current - penalty)
                action, details = AuditAction.DECAY, {"operation": "penalize", "amount": penalty}
            revisions.set_salience(c, target_id, base, now, now + timedelta(seconds=t.half_life_seconds))
            batch = records.RowBatch(sealer=self.work.sealer)
            batch.audit_entry(
                target_id,
                t.scope,
                t.sensitivity,
                action,
                trust.actor,
                now,
                rationale,
                {**details, "before": current, "after": base},
            )
            batch.flush(c)
        return target_id

    # -- helpers ------------------------------------------------------------------

    @contextlib.contextmanager
    def _tx(self, conn: Connection | None) -> Iterator[Connection]:
        if conn is not None:
            yield conn
            return
        with self.db.transaction() as c:
            yield c

    def _lock(
        self,
        conn: Connection,
        ids: Sequence[uuid.UUID],
        trust: TrustPolicy,
        *,
        allow_episodic: bool = False,
        allow_retracted: bool = False,
    ) -> dict[uuid.UUID, revisions.Target]:
        """RFC 5.2: lock the targets, then check existence, trust, type and status."""
        locked = revisions.lock_targets(conn, ids)
        for i in ids:
            t = locked.get(i)
            if t is None:
                raise errors.NotFound(f"record {i} not found")
            require_revisable(i, trust.visibility(t.scope, t.sensitivity), trust.can_write_scope(t.scope))
            if t.type == MemoryType.EPISODIC.value and not allow_episodic:
                raise errors.RevisionRefused(f"record {i} is episodic; episodes are immutable")
            if t.status is RevisionStatus.RETRACTED and not allow_retracted:
                raise self._already_retracted(conn, i, trust)
        return locked

    @staticmethod
    def _already_retracted(
        conn: Connection,
        record_id: uuid.UUID,
        trust: TrustPolicy,
    ) -> errors.RevisionRefused:
        """RFC 5.2: the refusal names the revision that won (a supersede or merge names its
        successor when the caller sees that record in full, as an audit read would, 5.5)."""
        won = revisions.retracted_by(conn, record_id)
        if won is None:
            return errors.RevisionRefused(f"record {record_id} is retracted")
        operation, successor, actor, at = won.operation, won.successor, won.actor, won.at
        verb = {"supersede": "superseded", "merge": "merged"}.get(operation, "retracted")
        detail: dict[str, Any] = {
            "field": "record_id",
            "message": f"already {verb}",
            "type": f"already_{verb}",
            "actor": actor,
            "at": at.isoformat(),
        }
        message = f"record {record_id} was already {verb} by {actor} at {at.isoformat()}"
        if successor is not None:
            seen = revisions.access(conn, [successor]).get(successor)
            if seen is not None and trust.visibility(seen.scope, seen.sensitivity) == "full":
                detail["successor_id"] = str(successor)
                message += f"; its successor is record {successor}"
        return errors.RevisionRefused(message, details=[detail])

    def _hydrate(self, conn: Connection, ids: Sequence[uuid.UUID]) -> dict[uuid.UUID, MemoryRecord]:
        found = records.hydrate(conn, ids, sealer=self.work.sealer)
        missing = [i for i in ids if i not in found]
        if missing:
            raise errors.NotFound(f"record {missing[0]} not found")
        return found

    def _new_key(
        self, rec: RevisedRecord, template: tuple[revisions.FactKey, int] | None, rank: int = 0
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
        return records.stored_key(key, self.work.sealer, level)

    def _build(
        self,
        op: OperationKind,
        template: MemoryRecord,
        rec: RevisedRecord,
        evidence: list[ProvenanceRef],
        trust: TrustPolicy,
        now: datetime,
        *,
        sources: Sequence[MemoryRecord],
        relations: list[Relation],
        validity: Validity | None = None,
    ) -> MemoryRecord:
        """RFC 5.2: the new record of a supersede, fork or merge."""
        require_level(rec.sensitivity, trust.max_sensitivity.rank)
        rank = max([s.sensitivity.rank for s in sources] + [rec.sensitivity.rank if rec.sensitivity else 0])
        validity = revised_validity(validity or rec.validity or Validity(), rec)
        cited = list(dict.fromkeys([*evidence, *rec.evidence]))
        provenance = [
            ProvenanceSource(kind=e.kind, ref=e.ref, created_by=trust.actor, timestamp=now) for e in cited
        ]
        provenance += [p.model_copy(update={"created_by": trust.actor}) for p in rec.provenance]
        if not provenance:
            provenance = [
                ProvenanceSource(
                    kind=ProvenanceKind.EVENT,
                    created_by=trust.actor,
                    ref=f"revision:{op.value}:{template.id}",
                    timestamp=now,
                )
            ]
        confidence = rec.confidence
        if confidence is None:  # a user's or tool's correction is an assertion (RFC 5.2)
            confidence = max(s.confidence for s in sources)
            if not is_inferring_actor(trust.actor):
                confidence = max(confidence, ASSERTED_CONFIDENCE)
        try:
            payload, summary = revised_content(op, template, rec, cited, sources, validity)
            return MemoryRecord.model_validate(
                {
                    "id": new_id(),
                    "type": template.type,
                    "scope": template.scope,
                    "sensitivity": Sensitivity.from_rank(rank),
                    "confidence": confidence,
                    "salience": 1.0,
                    "lifecycle": Lifecycle(
                        decay=self.policy.decay_profile(template.type),
                        base_salience=1.0,
                        reinforced_at=now,
                        deletion_policy=self.policy.deletion[template.type],
                    ),
                    "payload": payload,
                    "summary": summary,
                    "tags": rec.tags if rec.tags is not None else template.tags,
                    "metadata": rec.metadata if rec.metadata is not None else template.metadata,
                    "provenance": provenance,
                    "relations": relations,
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
                details=[{**d, "field": f"record.{d['field']}"} for d in errors.field_errors(exc)],
            ) from exc

    @staticmethod
    def _check_inferred(
        olds: Sequence[MemoryRecord], new: MemoryRecord, trust: TrustPolicy, force: bool
    ) -> None:
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

    def _reassert(self, conn: Connection, new: MemoryRecord) -> bool:
        """RFC 5.4: an explicit revision re-asserting a tombstoned key removes the tombstones
        that bind the new record's level (RFC 3.4). A supersede that keeps its target's key
        re-asserts too: a retracted variant of the same key may have tombstoned it while the
        target stayed active."""
        if not isinstance(new.payload, SemanticPayload):
            return False
        key = records.record_fact_key(new, self.work.sealer)
        return bool(revisions.clear_tombstones(conn, [(key, new.sensitivity.rank)]))

    def _tombstone(
        self,
        conn: Connection,
        targets: Sequence[revisions.Target],
        new: MemoryRecord | None,
        actor: str,
        rationale: str,
        now: datetime,
    ) -> None:
        """RFC 5.4: tombstone each retracted fact key the new record does not carry on; at a sealed
        level the rationale stays in the audit log, sealed (RFC 7.6)."""
        keep = None
        if new is not None and isinstance(new.payload, SemanticPayload):
            keep = records.record_fact_key(new, self.work.sealer)
        sealer = self.work.sealer
        rows = [
            (
                t.key,
                t.id,
                actor,
                SEALED_TOMBSTONE if sealer.seals(t.sensitivity) else rationale,
                t.sensitivity.rank,
            )
            for t in targets
            if t.key and t.key != keep
        ]
        revisions.insert_tombstones(conn, rows, now)

    def _set_superseded_by(self, conn: Connection, old: MemoryRecord, new_id: uuid.UUID) -> None:
        """RFC 5.2.1: point a superseded fact's payload at its replacement; a sealed payload is
        sealed again with the pointer (RFC 7.6)."""
        if revisions.set_superseded_by(conn, old.id, new_id):
            return
        payload = old.payload.model_copy(update={"superseded_by": new_id})
        content = records.sealed_content(payload.model_dump_json(), old.summary, old.metadata, old.tags)
        revisions.set_sealed(conn, old.id, *self.work.sealer.seal_content(old.id, content))

    def _add_new(
        self,
        batch: records.RowBatch,
        rec: MemoryRecord,
        actor: str,
        rationale: str,
        details: dict[str, Any],
    ) -> None:
        """Queue a new record through the capture write path, its create entry with details."""
        batch.add_record(rec, actor=actor, rationale=rationale, details=details)
        batch.work.append(
            (
                WorkKind.DECAY.value,
                rec.id,
                rec.created_at + timedelta(seconds=rec.lifecycle.decay.half_life_seconds),
            )
        )
        if self.work.embeds(rec):
            batch.work.append((WorkKind.EMBED.value, rec.id, rec.created_at))
