"""The review service (RFC 5.7): ``Membrane.review``: the queue, decisions and expiry."""

from __future__ import annotations

import uuid
from collections.abc import Mapping, Sequence
from datetime import datetime
from typing import Any

from membrane_core import errors
from membrane_core.clock import Clock
from membrane_core.enums import AuditAction, MemoryType, ProvenanceKind, RevisionStatus, Sensitivity
from membrane_core.listing import cursor
from membrane_core.models import ProvenanceRef
from membrane_core.requests import parse
from membrane_core.review import queue as pages
from membrane_core.review.requests import DecideRequest, DecisionRequest, QueueRequest
from membrane_core.review.results import (
    DecideResult,
    DecisionError,
    DecisionResult,
    ExpireResult,
    Outcome,
    ReviewPage,
)
from membrane_core.revision import writes
from membrane_core.revision.engine import Revisions
from membrane_core.storage import proposals, records, revisions
from membrane_core.storage.db import Connection, Database
from membrane_core.trust import TrustPolicy

#: RFC 5.7: the actor of an expiry.
EXPIRY_ACTOR = "review-expiry"

_OUTCOME: dict[str, Outcome] = {"approve": "approved", "reject": "rejected", "amend": "amended"}


class Review:
    """RFC 5.7: the queue of pending proposals and the decisions that settle them."""

    def __init__(
        self, db: Database, *, clock: Clock, work: records.WorkOptions, revisions: Revisions
    ) -> None:
        self.db = db
        self.clock = clock
        self.work = work
        self.revisions = revisions

    # -- the queue ------------------------------------------------------------------------

    def queue(self, request: QueueRequest | Mapping[str, Any], trust: TrustPolicy) -> ReviewPage:
        """RFC 5.7: a keyset page of the pending proposals the caller may decide."""
        _reviewer(trust)
        req = parse(QueueRequest, request)
        policy = trust.narrow(req.scopes)
        fp = cursor.fingerprint(trust.actor, req.model_dump(mode="json", exclude={"cursor", "limit"}))
        after = pages.position(req.cursor, fp) if req.cursor is not None else None
        with self.db.transaction() as conn:  # RFC 13.2: a reviewer reads what was just proposed
            rows = proposals.queue(
                conn,
                order=req.order,
                scopes=pages.decidable(policy),
                max_rank=policy.max_sensitivity.rank,
                actor=trust.actor,
                after=after,
                limit=req.limit + 1,
            )
            page = rows[: req.limit]
            entries = pages.entries(conn, page, policy, sealer=self.work.sealer, now=self.clock())
        last = page[-1] if page else None
        more = len(rows) > req.limit and last is not None
        return ReviewPage(
            entries=entries,
            next_cursor=cursor.encode(
                {"c": last.created_at.isoformat(), "i": str(last.id), "n": last.corroborations}, fp
            )
            if more and last is not None
            else None,
        )

    # -- decisions ------------------------------------------------------------------------

    def decide(self, request: DecideRequest | Mapping[str, Any], trust: TrustPolicy) -> DecideResult:
        """RFC 5.7: each decision in its own transaction; one that fails fails alone."""
        _reviewer(trust)
        req = parse(DecideRequest, request)
        return DecideResult(results=[self._decide_one(d, trust) for d in req.decisions])

    def _decide_one(self, d: DecisionRequest, trust: TrustPolicy) -> DecisionResult:
        try:
            with self.db.transaction() as conn:
                ids = self._decide(conn, d, trust, self.clock())
        except errors.Unavailable:
            raise
        except errors.MembraneError as exc:
            return DecisionResult(
                proposal_id=d.proposal_id,
                error=DecisionError(code=exc.code, message=exc.message, details=exc.details),
            )
        return DecisionResult(proposal_id=d.proposal_id, outcome=_OUTCOME[d.decision], record_ids=ids)

    def _decide(
        self, conn: Connection, d: DecisionRequest, trust: TrustPolicy, now: datetime
    ) -> list[uuid.UUID]:
        """One decision. Locks in the order every writer of a fact key takes them (RFC 5.4):
        the keys of the proposal's facts (and of the facts a replace retracts), then the
        proposal (a corroborating capture updates it under its key locks), then the rows."""
        rids = proposals.record_ids(conn, d.proposal_id)
        keys = revisions.fact_keys(conn, rids)
        conflicts: dict[uuid.UUID, list[uuid.UUID]] = {}
        if d.decision == "approve":  # read once: the check of mode, and what a replace retracts
            conflicts = proposals.conflicts(conn, keys, trust.max_sensitivity.rank)
        replaced = [c for ids in conflicts.values() for c in ids] if d.mode == "replace" else []
        revisions.lock_keys(conn, [*keys.values(), *revisions.fact_keys(conn, replaced).values()])
        p = proposals.lock(conn, d.proposal_id)
        _may_decide(p, d.proposal_id, trust)
        assert p is not None
        if p.status != "pending":
            raise errors.RevisionRefused(
                f"proposal {p.id} was already {p.status} by {p.decided_by} at "
                f"{p.decided_at.isoformat() if p.decided_at else 'an unknown time'}",
                details=[{"field": "proposal_id", "message": f"already {p.status}", "type": "decided"}],
            )
        # records that joined while the keys were taken bring no fact of their own (RFC 5.7)
        rids = proposals.record_ids(conn, p.id)
        locked = revisions.lock_targets(conn, sorted({*rids, *replaced}))
        batch = records.RowBatch(sealer=self.work.sealer)
        details: dict[str, Any] = {"operation": "review", "decision": d.decision, "proposal_id": str(p.id)}
        rationale = d.rationale or f"{_OUTCOME[d.decision]} in review"
        out = list(rids)
        if d.decision == "approve":
            details.update(
                self._approve(conn, d, trust, locked, rids, keys, conflicts, batch, rationale, now)
            )
            proposals.settle(conn, rids, RevisionStatus.ACTIVE.value, now)
        elif d.decision == "reject":
            self._reject(conn, locked, rids, trust.actor, rationale, now)
            details["reason"] = "rejected"
        else:
            new = self._amend(conn, d, trust, locked, rids, now)
            self._episode_work(conn, locked, rids, batch, now)
            proposals.settle(conn, rids, RevisionStatus.ACTIVE.value, now)
            details["amended_by"] = str(new)
            out.append(new)
        for rid in rids:
            t = locked[rid]
            batch.audit_entry(
                rid, t.scope, t.sensitivity.value, AuditAction.REVIEW, trust.actor, now, rationale, details
            )
        batch.flush(conn)
        proposals.decide(
            conn, p.id, outcome=_OUTCOME[d.decision], actor=trust.actor, rationale=d.rationale, now=now
        )
        return out

    def _approve(
        self,
        conn: Connection,
        d: DecisionRequest,
        trust: TrustPolicy,
        locked: Mapping[uuid.UUID, revisions.Target],
        rids: Sequence[uuid.UUID],
        keys: Mapping[uuid.UUID, revisions.FactKey],
        conflicts: Mapping[uuid.UUID, list[uuid.UUID]],
        batch: records.RowBatch,
        rationale: str,
        now: datetime,
    ) -> dict[str, Any]:
        """RFC 5.7: refuse a key tombstoned since; with a conflicting active fact, replace it
        or keep both as ``mode`` says; queue the episodes' work (RFC 6.4)."""
        replaced: list[str] = []
        for rid in rids:
            key = keys.get(rid)
            t = locked[rid]
            if key is None or t.status is not RevisionStatus.PROPOSED:
                continue
            # RFC 5.4: the rule every writer of a key follows; the proposed fact itself is live,
            # so only a tombstone binding its level blocks it
            if records.lock_and_match_facts(conn, [key], [t.sensitivity.rank])[0].blocked:
                raise errors.RevisionRefused(
                    f"the fact of proposal {d.proposal_id} was retracted since it was proposed; "
                    "re-assert it with a revision",
                    details=[{"field": "proposal_id", "message": "tombstoned", "type": "tombstoned"}],
                )
            found = conflicts.get(rid, [])
            if found and d.mode is None:
                raise errors.InvalidInput(
                    f"an active fact has the subject and predicate of proposal {d.proposal_id}: "
                    "approve with mode replace or beside",
                    details=[
                        {
                            "field": "mode",
                            "message": "replace or beside",
                            "type": "mode_required",
                            "conflicts": [str(c) for c in found],
                        }
                    ],
                )
            if found and d.mode == "replace":
                self._replace(conn, rid, found, trust, locked, batch, rationale, now)
                replaced += [str(c) for c in found]
        self._episode_work(conn, locked, rids, batch, now)
        return {"mode": d.mode, "replaced": replaced} if d.mode else {}

    def _episode_work(
        self,
        conn: Connection,
        locked: Mapping[uuid.UUID, revisions.Target],
        rids: Sequence[uuid.UUID],
        batch: records.RowBatch,
        now: datetime,
    ) -> None:
        """RFC 5.7, 6.4: an approved or amended proposal's episodes get the consolidation,
        extraction and compression items a trusted capture gets."""
        episodes = [r for r in rids if locked[r].type is MemoryType.EPISODIC]
        if episodes:
            for rec in records.hydrate(conn, episodes, sealer=self.work.sealer).values():
                batch.work.extend(records.episode_work(rec, now, self.work))

    def _replace(
        self,
        conn: Connection,
        fact_id: uuid.UUID,
        old_ids: Sequence[uuid.UUID],
        trust: TrustPolicy,
        locked: Mapping[uuid.UUID, revisions.Target],
        batch: records.RowBatch,
        rationale: str,
        now: datetime,
    ) -> None:
        """RFC 5.2.1, 5.7: the approved fact supersedes each conflicting one: retracted, linked
        both ways, its key tombstoned."""
        olds = [locked[o] for o in old_ids if o in locked and locked[o].status is RevisionStatus.ACTIVE]
        for o in olds:
            if trust.visibility(o.scope, o.sensitivity) != "full" or not trust.can_write_scope(o.scope):
                raise errors.Forbidden(f"record {o.id} may not be replaced by the caller")
        sealer = self.work.sealer
        writes.tombstone(conn, olds, None, trust.actor, rationale, now, sealer)
        revisions.mark_retracted(conn, [o.id for o in olds], now)
        hydrated = records.hydrate(conn, [o.id for o in olds], sealer=sealer)
        for o in olds:
            writes.set_superseded_by(conn, hydrated[o.id], fact_id, sealer)
            batch.relations.append((fact_id, "supersedes", o.id, None, now))
            batch.relations.append((o.id, "superseded_by", fact_id, None, now))
            batch.audit_entry(
                o.id,
                o.scope,
                o.sensitivity.value,
                AuditAction.REVISE,
                trust.actor,
                now,
                rationale,
                {"operation": "supersede", "superseded_by": str(fact_id), "review": True},
            )

    def _reject(
        self,
        conn: Connection,
        locked: Mapping[uuid.UUID, revisions.Target],
        rids: Sequence[uuid.UUID],
        actor: str,
        rationale: str,
        now: datetime,
    ) -> None:
        """RFC 5.4, 5.7: tombstone the proposed facts' keys and retract every record."""
        facts = [locked[r] for r in rids if locked[r].key and locked[r].status is RevisionStatus.PROPOSED]
        writes.tombstone(conn, facts, None, actor, rationale, now, self.work.sealer)
        proposals.settle(conn, rids, RevisionStatus.RETRACTED.value, now)

    def _amend(
        self,
        conn: Connection,
        d: DecisionRequest,
        trust: TrustPolicy,
        locked: Mapping[uuid.UUID, revisions.Target],
        rids: Sequence[uuid.UUID],
        now: datetime,
    ) -> uuid.UUID:
        """RFC 5.7: the reviewer's version supersedes the proposed fact (RFC 5.2.1)."""
        fact = next((r for r in rids if locked[r].key and locked[r].status is RevisionStatus.PROPOSED), None)
        if fact is None:
            raise errors.InvalidInput(
                f"proposal {d.proposal_id} has no fact to amend: approve or reject it",
                details=[{"field": "decision", "message": "no fact to amend", "type": "value_error"}],
            )
        body = {
            "record": d.record,
            "rationale": d.rationale or "amended in review",
            # the proposal itself is the amendment's evidence unless the reviewer cites other
            "evidence": d.evidence
            or [ProvenanceRef(kind=ProvenanceKind.EVENT, ref=f"proposal:{d.proposal_id}")],
            "force": True,
        }
        return self.revisions.supersede(fact, body, trust, conn=conn, review=True)

    # -- expiry ---------------------------------------------------------------------------

    def expire(self, limit: int) -> ExpireResult:
        """RFC 5.7, 6.5: reject, as ``expired``, up to ``limit`` pending proposals past their
        expiry, in one transaction (a proposal under a decision is skipped)."""
        now = self.clock()
        done = 0
        with self.db.transaction() as conn:
            due = proposals.expired(conn, now, limit)
            members = proposals.members(conn, due)
            # RFC 5.4: every key of the batch at once, in the global order, then each proposal
            keys = revisions.fact_keys(conn, [r for ids in members.values() for r in ids])
            revisions.lock_keys(conn, keys.values())
            for pid in due:
                p = proposals.lock(conn, pid)
                if p is None or p.status != "pending":  # decided meanwhile
                    continue
                rids = proposals.record_ids(conn, pid)
                locked = revisions.lock_targets(conn, rids)
                self._reject(conn, locked, rids, EXPIRY_ACTOR, "expired", now)
                batch = records.RowBatch(sealer=self.work.sealer)
                details = {
                    "operation": "review",
                    "decision": "expire",
                    "reason": "expired",
                    "proposal_id": str(pid),
                }
                for rid in rids:
                    t = locked[rid]
                    batch.audit_entry(
                        rid,
                        t.scope,
                        t.sensitivity.value,
                        AuditAction.REVIEW,
                        EXPIRY_ACTOR,
                        now,
                        "expired",
                        details,
                    )
                batch.flush(conn)
                proposals.decide(conn, pid, outcome="expired", actor=EXPIRY_ACTOR, rationale=None, now=now)
                done += 1
        return ExpireResult(expired=done)


def _reviewer(trust: TrustPolicy) -> None:
    if not trust.reviewer:
        raise errors.Forbidden(
            "review needs a reviewer key",
            details=[{"field": "reviewer", "message": "not a reviewer", "type": "forbidden"}],
        )


def _may_decide(p: proposals.ProposalRow | None, proposal_id: uuid.UUID, trust: TrustPolicy) -> None:
    """RFC 5.7: a proposal the caller does not see is not found; one it sees but may not
    write, or that it proposed or corroborated, is forbidden."""
    if p is None or trust.visibility(p.scope, Sensitivity(p.sensitivity)) == "hidden":
        raise errors.NotFound(f"proposal {proposal_id} not found")
    if trust.visibility(p.scope, Sensitivity(p.sensitivity)) != "full" or not trust.can_write_scope(p.scope):
        raise errors.Forbidden(f"proposal {proposal_id} is outside the caller's scopes or level")
    if trust.actor in p.actors:
        raise errors.Forbidden(
            f"proposal {proposal_id} was proposed or corroborated by the caller ({trust.actor}); "
            "another reviewer decides it",
            details=[{"field": "proposal_id", "message": "own proposal", "type": "own_proposal"}],
        )
