"""Revision operations: supersede, fork, merge, retract, contest, reinforce, penalize (RFC 5.2).

Each operation is ONE transaction that re-reads and locks its targets, re-checks the
caller's trust against what it locked, writes its changes and its audit entries, and
never changes the salience of what it retracts or contests (RFC 5.3).
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Callable, Iterator, Mapping
from datetime import datetime, timedelta
from typing import Any

from membrane_core import decay, errors
from membrane_core.enums import AuditAction, MemoryType, OperationKind, ValidityMode
from membrane_core.models import DecayProfile, SemanticPayload, Validity
from membrane_core.policy import Policy
from membrane_core.revision import targets, writes
from membrane_core.revision.derive import Derivation, check_inferred, derived_record, new_fact_key
from membrane_core.revision.rules import (
    ContestBody,
    ForkBody,
    MergeBody,
    PenalizeBody,
    ReinforceBody,
    RetractBody,
    SupersedeBody,
    parse,
    parse_body,
)
from membrane_core.storage import records, revisions
from membrane_core.storage.db import Connection, Database
from membrane_core.trust import TrustPolicy


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
        review: bool = False,
    ) -> uuid.UUID:
        """RFC 5.2.1: replace a record with a new one; the old one is retracted and linked.
        ``review``: a reviewer's amend of a proposed fact (RFC 5.7), the one revision of one."""
        b = parse(SupersedeBody, body)
        change = Derivation(
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
            review=review,
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
        change = Derivation(
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
        change = Derivation(
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

    def _derive(self, d: Derivation, trust: TrustPolicy, conn: Connection | None) -> uuid.UUID:
        """RFC 5.2.1-5.2.3: the one transaction of a supersede, fork or merge. Lock the fact keys
        it retracts or creates (5.4), then its sources; build the new record; retract what it
        replaces; queue the record with its create entry and one entry per source."""
        sealer = self.work.sealer
        with self._tx(conn) as c:
            now = self.clock()
            peek = revisions.fact_key_levels(c, d.ids)
            rank = max((lv for _, lv in peek.values()), default=0)
            new_key = new_fact_key(d.record, peek.get(d.ids[0]), rank, sealer)
            retired = [k for k, _ in peek.values()] if d.replaces else []
            revisions.lock_keys(c, [*retired, *([new_key] if new_key else [])])
            locked = targets.lock(c, d.ids, trust, review=d.review)
            # RFC 5.2.3: a merge's sources share one scope and one type (one source always does)
            if len({t.scope for t in locked.values()}) > 1 or len({t.type for t in locked.values()}) > 1:
                raise errors.RevisionRefused("merged records must share one scope and one type")
            sources = targets.hydrate(c, d.ids, sealer)
            new = derived_record(d, sources, trust, now, self.policy)
            if d.replaces:
                check_inferred(sources, new, trust, d.force)
            batch = records.RowBatch(sealer=sealer)
            reasserted = writes.reassert(c, new, sealer)
            if d.replaces:
                writes.tombstone(c, [locked[i] for i in d.ids], new, trust.actor, d.rationale, now, sealer)
                revisions.mark_retracted(c, d.ids, now)
            if d.points_back:
                old = sources[0]
                if isinstance(old.payload, SemanticPayload):
                    writes.set_superseded_by(c, old, new.id, sealer)
                batch.relations.append((old.id, "superseded_by", new.id, None, now))
            created = {**d.created, "reasserted": reasserted}
            writes.queue_new(batch, new, trust.actor, d.rationale, created, self.work)
            for i in d.ids:
                batch.audit_entry(
                    i,
                    locked[i].scope,
                    locked[i].sensitivity,
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
            target = targets.lock(c, [target_id], trust)[target_id]
            writes.tombstone(c, [target], None, trust.actor, b.rationale, now, self.work.sealer)
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
            target = targets.lock(c, [target_id], trust)[target_id]
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
            t = targets.lock(c, [target_id], trust, allow_episodic=True, allow_retracted=penalty is not None)[
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
