"""The review rules of the correction machine (RFC 5.7), kept beside it as a mixin.

``tests/integration/test_correction_invariants.py`` mixes :class:`ReviewRules` into its machine:
its captures take a ``trust`` (a key whose writes need review proposes), and these rules add
proposals of its own kinds of capture, corroboration of a pending proposal by either kind of
key, the three decisions of a reviewer (approve beside or replacing, reject, amend) with a
decider drawn among keys that may and may not decide, and expiry after the TTL. The model keeps
each proposal (its records, actors, corroborations and outcome) and every record's status,
and after each step checks that ``proposals``, ``proposal_records`` and the reviewer's queue
(its facts, conflicts and corroboration) equal it; the machine's own invariants check that no
proposed or rejected record is on a default read path and that approved ones are.

The machine provides the model this mixin reads and writes (``recs``, ``tombstones``,
``tick``, ``withdraw``, ``tombstone``, ``superseded``...): see its class.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Any

from hypothesis import strategies as st

from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

if TYPE_CHECKING:
    from membrane_core.review.results import DecisionResult

#: RFC 5.7: keys whose writes need review
PROPOSERS = {
    "model": TrustPolicy(actor="model", review_required=True),
    "model-2": TrustPolicy(actor="model-2", review_required=True),
}
#: who decides: a reviewer that never writes, the development policy (a reviewer that writes
#: the machine's trusted captures) and the proposer's own actor made a reviewer (never its own)
DECIDERS = {
    "reviewer": TrustPolicy(actor="reviewer", reviewer=True),
    "development": DEVELOPMENT_POLICY,
    "model": TrustPolicy(actor="model", reviewer=True),
}
REVIEWER = DECIDERS["reviewer"]
#: the machine's MEMBRANE_REVIEW_TTL: the clock's larger jumps pass it
REVIEW_TTL = timedelta(days=2)
REVIEW = [
    "propose_observations",
    "propose_observations",
    "propose_fact_event",
    "corroborate",
    "approve",
    "approve",
    "approve",
    "reject",
    "reject",
    "amend",
    "expire",
]
DECISIONS = ("approve", "reject", "amend")


def review_args(args: dict[str, dict[str, st.SearchStrategy[Any]]]) -> dict[str, dict[str, Any]]:
    """What each review operation draws, from the machine's own strategies ``args``."""
    who = st.sampled_from(["reviewer", "reviewer", "reviewer", "development", "model"])
    proposer = st.sampled_from(["model", "model", "model-2"])
    # mostly a pending proposal; sometimes one decided already, which is refused
    again = st.sampled_from([False, False, False, False, False, True])
    pick = args["retract"]["i"]
    return {
        "propose_observations": {
            **args["capture_observations"],
            "proposer": proposer,
            # an active fact's key with its other object: a proposal that conflicts with it
            "flip": st.booleans(),
        },
        "propose_fact_event": {**args["capture_fact_event"], "proposer": proposer},
        "corroborate": {
            "i": pick,
            "by": st.sampled_from(["development", "model", "model-2"]),
            "spelling": args["capture_fact_event"]["spelling"],
        },
        "approve": {
            "i": pick,
            "who": who,
            "mode": st.sampled_from([None, "replace", "beside"]),
            "again": again,
        },
        "reject": {"i": pick, "who": who, "again": again},
        "amend": {
            "i": pick,
            "who": who,
            "t": args["supersede"]["t"],
            "mask": args["supersede"]["mask"],
            "retarget": args["supersede"]["retarget"],
            "again": again,
        },
        "expire": {"wait": st.sampled_from([False, True, True])},
    }


@dataclass
class Proposal:
    """What the model knows of one proposal (RFC 5.7)."""

    id: uuid.UUID
    scope: str
    created_at: datetime
    proposer: str
    actors: set[str]
    records: set[uuid.UUID] = field(default_factory=set)
    fact: uuid.UUID | None = None
    corroborations: int = 0
    status: str = "pending"


class ReviewRules:
    """RFC 5.7 on the correction machine: proposals, corroboration, decisions, expiry."""

    # provided by the machine (tests/integration/test_correction_invariants.py)
    m: Any
    clock: Any
    sql: Any
    recs: dict[uuid.UUID, Any]
    tombstones: dict[Any, uuid.UUID]
    dirty: set[uuid.UUID]
    tick: Any
    mark: Any
    withdraw: Any
    tombstone: Any
    superseded: Any
    link: Any
    triple: Any
    other_object: Any
    revised: Any
    retargeted: Any
    revised_key: Any
    capture_observations: Any
    capture_fact_event: Any

    def init_review(self) -> None:
        self.proposals: dict[uuid.UUID, Proposal] = {}
        #: RFC 5.4, 5.7: the keys of rejected and expired facts, never revived by a capture
        self.rejected: set[Any] = set()

    # -- proposing (RFC 5.7 "What is proposed") -----------------------------------------

    def propose_observations(
        self, items: list[tuple[str, int, int, int, int | None]], proposer: str, flip: bool
    ) -> None:
        active = sorted({r.key for r in self.recs.values() if r.type == "semantic" and r.status == "active"})
        if flip and active:
            flipped = []
            for scope, t, sp, pp, reuse in items:
                if reuse is not None:  # an active fact's key with its other object
                    key = active[reuse % len(active)]
                    scope, t, reuse = key[0], self.other_object(self.triple(key)), None
                flipped.append((scope, t, sp, pp, reuse))
            items = flipped
        self.capture_observations(items, trust=PROPOSERS[proposer])

    def propose_fact_event(self, proposer: str, **drawn: Any) -> None:
        self.capture_fact_event(trust=PROPOSERS[proposer], **drawn)

    def corroborate(self, i: int, by: str, spelling: int) -> None:
        """The key of a pending proposed fact captured again, by a trusted key or one whose
        writes need review: its evidence, never a second proposal."""
        facts = self.pending_facts()
        fact = facts[i % len(facts)]
        trust = PROPOSERS.get(by)  # None: the machine's trusted key
        self.capture_observations([(fact.key[0], self.triple(fact.key), spelling, 0, None)], trust=trust)

    def opened(self, pid: uuid.UUID, scope: str, actor: str, records: list[uuid.UUID]) -> Proposal:
        """A capture's new proposal (RFC 5.7)."""
        assert pid not in self.proposals, f"proposal {pid} returned twice"
        p = Proposal(pid, scope, self.clock(), actor, {actor}, set(records))
        self.proposals[pid] = p
        return p

    def corroborated(self, pid: uuid.UUID, actor: str, joining: list[uuid.UUID]) -> None:
        """RFC 5.7: one corroboration of a pending proposal; a proposed capture's records join it."""
        p = self.proposals[pid]
        assert p.status == "pending", (pid, p.status)
        p.actors.add(actor)
        p.corroborations += 1
        p.records.update(joining)

    def pending(self) -> list[Proposal]:
        """The pending proposals, in the order they were made (the ids of one batch are in
        no order a draw may depend on)."""
        return [p for p in self.proposals.values() if p.status == "pending"]

    def pending_facts(self) -> list[Any]:
        """The proposed facts of pending proposals, in the order they were proposed."""
        facts = [self.recs[p.fact] for p in self.pending() if p.fact is not None]
        return [f for f in facts if f.status == "proposed"]

    def members(self, p: Proposal) -> set[uuid.UUID]:
        """The records of ``p`` that still exist (prune deletes an approved episode)."""
        return {r for r in p.records if not self.recs[r].deleted}

    def proposal_of(self, rid: uuid.UUID) -> uuid.UUID | None:
        """The proposal a record the model learns (an entity) belongs to, by ``proposal_records``;
        the model then decides it with its proposal."""
        row = self.sql.execute(
            "SELECT proposal_id FROM proposal_records WHERE record_id = %s", (rid,)
        ).fetchone()
        if row is None:
            return None
        p = self.proposals.get(row[0])
        assert p is not None, f"record {rid} joined a proposal the model does not know"
        p.records.add(rid)
        return p.id

    # -- decisions (RFC 5.7 "Decisions") ------------------------------------------------

    def chosen(self, i: int, again: bool) -> Proposal:
        """A pending proposal, two times in three one with a proposed fact when there is one,
        or with ``again`` (or none pending) one decided already."""
        decided = [p for p in self.proposals.values() if p.status != "pending"]
        with_fact = [
            p for p in self.pending() if p.fact is not None and self.recs[p.fact].status == "proposed"
        ]
        if (again and decided) or not self.pending():
            pool = decided
        else:
            pool = with_fact if with_fact and i % 3 else self.pending()
        return pool[i // 3 % len(pool)]

    def decide(self, p: Proposal, who: str, decision: str, **extra: Any) -> DecisionResult | None:
        """Decide ``p`` as ``who``; asserts the refusals of RFC 5.7 (its own proposal, one
        decided already) and returns the result of a decision that may go on, else None."""
        body = {"proposal_id": p.id, "decision": decision, "rationale": f"{decision} in review", **extra}
        out = self.m.review.decide({"decisions": [body]}, DECIDERS[who]).results[0]
        assert out.proposal_id == p.id, out
        if DECIDERS[who].actor in p.actors:  # no key decides what it proposed or corroborated
            assert out.error is not None and out.error.code == "forbidden", (out, p.actors)
            return None
        if p.status != "pending":
            assert out.error is not None and out.error.code == "revision_refused", out
            assert out.error.details[0]["message"] == f"already {p.status}", out
            return None
        return out

    def approve(self, i: int, who: str, mode: str | None, again: bool) -> None:
        """RFC 5.7: every proposed record becomes active; an active fact with the subject and
        predicate and another object needs ``mode``: replace supersedes it, beside keeps both;
        a key tombstoned since the proposal is refused."""
        now = self.tick()
        p = self.chosen(i, again)
        out = self.decide(p, who, "approve", **({"mode": mode} if mode else {}))
        if out is not None:
            fact = self.recs[p.fact] if p.fact else None
            live = fact is not None and fact.status == "proposed"
            conflicts = self.conflicts(fact) if live else []
            if live and fact.key in self.tombstones:
                assert out.error is not None and out.error.code == "revision_refused", out
            elif conflicts and mode is None:
                assert out.error is not None and out.error.code == "invalid_input", out
                assert out.error.details[0]["field"] == "mode", out.error
                assert set(out.error.details[0]["conflicts"]) == {str(c.id) for c in conflicts}
            else:
                assert out.error is None and out.outcome == "approved", out
                assert set(out.record_ids) == self.members(p), (out.record_ids, p.records)
                if conflicts and mode == "replace":
                    for old in sorted(conflicts, key=lambda r: r.id):  # RFC 5.2.1
                        self.tombstone(old.key, old.id)
                        self.withdraw(old)
                        self.link(fact.id, "supersedes", old.id)
                        self.link(old.id, "superseded_by", fact.id)
                self.settle(p, "approved", "active", now)
        self.mark()

    def reject(self, i: int, who: str, again: bool) -> None:
        """RFC 5.7: every proposed record is retracted and the fact's key tombstoned."""
        now = self.tick()
        p = self.chosen(i, again)
        out = self.decide(p, who, "reject")
        if out is not None:
            assert out.error is None and out.outcome == "rejected", out
            assert set(out.record_ids) == self.members(p), (out.record_ids, p.records)
            self.settle(p, "rejected", "retracted", now)
        self.mark()

    def amend(self, i: int, who: str, t: int, mask: int, retarget: bool, again: bool) -> None:
        """RFC 5.7: the reviewer's version supersedes the proposed fact (RFC 5.2.1); the
        proposal's other records are approved."""
        now = self.tick()
        p = self.chosen(i, again)
        fact = self.recs[p.fact] if p.fact else None
        record = self.revised(*self.retargeted(p.scope, t, mask, retarget))
        out = self.decide(p, who, "amend", record=record)
        if out is not None:
            if fact is None or fact.status != "proposed":
                assert out.error is not None and out.error.code == "invalid_input", out
            else:
                assert out.error is None and out.outcome == "amended", out
                new_id = out.record_ids[-1]
                assert set(out.record_ids[:-1]) == self.members(p) and new_id not in self.recs, out
                self.superseded(fact, new_id, self.revised_key(fact.key, record), now)
                self.settle(p, "amended", "active", now)
        self.mark()

    def expire(self, wait: bool) -> None:
        """RFC 5.7, 6.5: the pending proposals past their TTL are rejected as expired, by
        the actor review-expiry; the others are left as they are."""
        if wait:
            self.clock.now += REVIEW_TTL
        now = self.tick()
        due = [p for p in self.pending() if p.created_at + REVIEW_TTL <= now]
        assert self.m.review.expire(100).expired == len(due)
        for p in sorted(due, key=lambda p: (p.created_at + REVIEW_TTL, p.id)):
            self.settle(p, "expired", "retracted", now)
            for rid in p.records:
                last = self.m.audit(rid).entries[-1]
                assert (last.action, last.actor, last.details["reason"]) == (
                    "review",
                    "review-expiry",
                    "expired",
                )
        self.mark()

    def settle(self, p: Proposal, outcome: str, status: str, now: datetime) -> None:
        """A decided proposal's records: those still proposed take ``status``; every one reads
        proposed before ``now`` (RFC 5.6). A rejected fact's key is tombstoned (RFC 5.4)."""
        p.status = outcome
        for rid in sorted(p.records):
            rec = self.recs[rid]
            if rec.status == "proposed":
                if status == "retracted":
                    if rec.key is not None:
                        self.tombstone(rec.key, rec.id)
                        self.rejected.add(rec.key)
                    self.withdraw(rec)
                else:
                    rec.status = status
                    rec.trusted_from(now)
            if rec.proposed_until is None:
                rec.proposed_until = now
            self.dirty.add(rid)

    def conflicts(self, fact: Any) -> list[Any]:
        """RFC 5.7: the active facts of ``fact``'s scope with its subject and predicate and
        another object."""
        scope, s, p, o = fact.key
        return [
            r
            for r in self.recs.values()
            if r.type == "semantic"
            and r.status == "active"
            and r.key is not None
            and r.key[:3] == (scope, s, p)
            and r.key[3] != o
        ]

    # -- the invariant ------------------------------------------------------------------

    def review_equals_the_model(self) -> None:
        """``proposals`` and ``proposal_records`` are the model's; the reviewer's queue holds the
        pending ones, oldest first, each with its fact, corroboration and conflicts (RFC 5.7)."""
        if not self.proposals:
            return
        stored = {
            pid: (status, corroborations, set(actors))
            for pid, status, corroborations, actors in self.sql.execute(
                "SELECT id, status, corroborations, actors FROM proposals"
            ).fetchall()
        }
        model = {p.id: (p.status, p.corroborations, p.actors) for p in self.proposals.values()}
        assert stored == model, (stored, model)
        members: dict[uuid.UUID, set[uuid.UUID]] = {}
        for rid, pid in self.sql.execute("SELECT record_id, proposal_id FROM proposal_records").fetchall():
            members.setdefault(pid, set()).add(rid)
        model_members = {p.id: self.members(p) for p in self.proposals.values()}
        assert members == {pid: ids for pid, ids in model_members.items() if ids}, members
        waiting = self.pending()
        queue = self.m.review.queue({"limit": 200}, REVIEWER)
        assert [e.proposal_id for e in queue.entries] == [
            p.id for p in sorted(waiting, key=lambda p: (p.created_at, p.id))
        ]
        for e in queue.entries:  # positive control: every pending proposal, with its fact
            p = self.proposals[e.proposal_id]
            assert e.proposed_by == p.proposer and set(e.corroborators) == p.actors - {p.proposer}
            assert e.corroborations == p.corroborations, (e, p)
            assert {r.id for r in e.records} == self.members(p)
            assert (e.fact.id if e.fact else None) == p.fact
            if p.fact is not None:
                assert e.fact is not None and e.fact.status.value == "proposed", e.fact
                fact = self.recs[p.fact]
                assert {c.id for c in e.conflicts} == {c.id for c in self.conflicts(fact)}, e.conflicts

    def not_revived(self, key: Any, state: str) -> None:
        """RFC 5.4, 5.7: no capture revives the key of a rejected or expired fact; only a
        revision that re-asserted it (a live fact of the key) lets a capture meet it again."""
        if key in self.rejected and not any(
            r.key == key and r.status in ("active", "contested") for r in self.recs.values()
        ):
            assert state == "tombstoned", (key, state)
