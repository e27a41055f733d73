"""Stateful property: correction semantics hold under any sequence of writes (RFC 5, 6.1-6.4).

A ``hypothesis.stateful`` machine drives the real store (the ``Membrane`` library on a
database cloned from the migrated template for every example, a ``FakeClock`` for time)
with observations, events, tool episodes and working state in two scopes, by a trusted key
and by keys whose writes need review, supersede, fork, merge, retract, contest, reinforce
and penalize through the revision service (RFC 5.2), decay, prune and consolidation batches
through the maintenance service (RFC 6.1, 6.3, 6.4), reviewers' decisions and expiry
(RFC 5.7), clock jumps and as-of reads (RFC 5.6). A reference model keeps what must be
true, and after every step the machine checks:

- no retracted (superseded, merged, retracted) record on a default read path: retrieval
  roots, one-hop neighbours and edges, the entity arm, the selector, by-id reads (which
  return it marked with its status, never as active) (RFC 5.1, 8.4, 8.5);
- a tombstoned key is never re-created by capture or consolidation, the capture reports
  what RFC 5.4 says, and ``fact_tombstones`` holds exactly the model's keys and first
  authors (RFC 3.4, 5.4);
- prune deletes exactly the due, active, auto_prune records at their floor, never a
  retracted, contested or manual_only one (RFC 5.3, 6.3);
- every audit chain that gained an entry is valid (RFC 5.5);
- every view's salience is the closed form of RFC 6.1 from the model's base and
  reinforcement time, and the stored ``base_salience`` and ``reinforced_at`` are the
  model's: only reinforcement, penalty and compression move them (RFC 5.2.6, 5.2.7, 5.3,
  6.2, 6.4.1);
- reads as of an earlier moment equal the model at that moment (RFC 5.6);
- review (RFC 5.7, the rules in ``review_rules.py``): what a key whose writes need review
  captures is proposed (corroborating a pending proposal of its key instead of a second
  one), no proposed, rejected or expired record is on a default read path (retrieval roots,
  neighbours, the entity arm, the list without a status filter), an approved one is, a
  proposed one is returned flagged when asked for, no revision settles a proposal, and no
  capture revives the key of a rejected or expired fact; ``proposals`` and the reviewer's
  queue equal the model.

Every "must not appear" assertion sits beside a positive one on the same result (the
live replacement, the expected roots and neighbours, the entity, the selection), so an
empty answer never passes.

Three minimal sequences are kept as plain tests at the end of the file: a supersede that
keeps its key while a retracted same-key fork has tombstoned it (RFC 5.4), a second
contest naming the same contesting record (RFC 5.2.5), and a query as of a moment before
the retraction of the only record that holds its word (RFC 5.6, 8.1.2).

CI runs 25 examples of 20 steps (about 25 s); MEMBRANE_STATEFUL_EXAMPLES and
MEMBRANE_STATEFUL_STEPS (at most 40) change that. A longer run is one command::

    MEMBRANE_STATEFUL_EXAMPLES=500 MEMBRANE_STATEFUL_STEPS=40 .venv/bin/python -m pytest \\
        tests/integration/test_correction_invariants.py -q -p no:cacheprovider --basetemp=$(mktemp -d)
"""

from __future__ import annotations

import contextlib
import math
import os
import re
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import partial
from itertools import product
from pathlib import Path
from typing import Any, ClassVar

import psycopg
import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    invariant,
    rule,
    run_state_machine_as_test,
)

from membrane_core import Membrane, Settings, errors
from membrane_core.results import RecordView, RetrieveResult
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy
from tests.integration.review_rules import DECISIONS, REVIEW, REVIEW_TTL, ReviewRules, review_args
from tests.support import services
from tests.support.services import EMBEDDING_DIM

EXAMPLES = int(os.environ.get("MEMBRANE_STATEFUL_EXAMPLES", "25"))
STEPS = int(os.environ.get("MEMBRANE_STATEFUL_STEPS", "20"))
# the listings below read a whole scope in one retrieval of at most 200 rows; a step
# writes at most four records per scope, plus four entities per scope in all
assert STEPS <= 40, "MEMBRANE_STATEFUL_STEPS above 40 outgrows the 200-row listings"

ME = TrustPolicy(actor="user")
EVIDENCE = [{"kind": "observation", "ref": "user said so"}]
SCOPES = ("alpha", "beta")
SUBJECTS = ("Ada", "Grace")
PREDICATES = ("works at", "lives in")
OBJECTS = ("Paris", "Berlin")
TRIPLES = list(product(SUBJECTS, PREDICATES, OBJECTS))
# spellings that normalise to the same key (RFC 3.4); the lower-case one is not entity-like
SPELLINGS: tuple[Callable[[str], str], ...] = (lambda w: w, str.upper, str.lower, lambda w: f"  {w}  ")
PREDICATE_SPELLINGS = ("{}", "{}", "  {}  ")
SIGNATURES = {"short": ("search", "fetch"), "long": ("search", "fetch", "summarise")}

# RFC 3.2 defaults (half-lives, salience floors, reinforcement gain), but for working
# records' half-life, set to two hours so that they reach their floor within a run
WORKING_HALF_LIFE = 2 * 3600
HALF_LIFE = {
    "episodic": 3600.0,
    "working": float(WORKING_HALF_LIFE),
    "semantic": 30 * 86400.0,
    "competence": 30 * 86400.0,
    "plan_graph": 30 * 86400.0,
    "entity": 90 * 86400.0,
}
FLOOR = {
    "episodic": 0.01,
    "working": 0.01,
    "semantic": 0.05,
    "competence": 0.05,
    "plan_graph": 0.05,
    "entity": 0.05,
}
GAIN = 0.1
PRUNE_EPSILON = 0.001  # RFC 6.3: at or below max(floor, 0.001)
COMPRESS_AGE = timedelta(hours=24)  # RFC 6.4.1: an episode this old is compressed ...
COMPRESSION = 0.5  # ... to half its base salience, not below its floor
EXPAND = {"hops": 1, "max_nodes": 500, "max_edges": 2000}

Key = tuple[str, str, str, str]

# what each operation draws; the rules below pick operations from these lists (the
# repetitions weight them)
IDX = st.integers(0, 10**6)
TRIPLE = st.integers(0, len(TRIPLES) - 1)
TARGET = st.sampled_from(["fact", "fact", "fact", "procedure", "working", "working", "episode"])
# most writes meet in one scope; the other one checks that keys and reads stay scoped
SCOPE = st.sampled_from(["alpha", "alpha", "alpha", "beta"])
# a capture that names the key of a fact already stored (live, contested or retracted),
# and a revision aimed at a tombstoned key: the paths of RFC 5.4 a fresh key never takes
REUSE = st.one_of(st.none(), IDX)
RETARGET = st.sampled_from([False, False, True])
ARGS: dict[str, dict[str, st.SearchStrategy[Any]]] = {
    "capture_observations": {
        "items": st.lists(
            st.tuples(
                SCOPE,
                TRIPLE,
                st.integers(0, len(SPELLINGS) - 1),
                st.integers(0, len(PREDICATE_SPELLINGS) - 1),
                REUSE,
            ),
            min_size=1,
            max_size=2,
        )
    },
    "capture_fact_event": {
        "scope": SCOPE,
        "triples": st.lists(TRIPLE, min_size=1, max_size=2, unique=True),
        "spelling": st.integers(0, len(SPELLINGS) - 1),
        "outcome": st.sampled_from(["success", "success", "failure"]),
        "reuse": REUSE,
    },
    "capture_working": {"scope": SCOPE, "thread": st.integers(0, 2)},
    "capture_tool_episode": {
        "scope": SCOPE,
        "signature": st.sampled_from(sorted(SIGNATURES)),
        # a batch of one or two: a competence record needs two successes (RFC 4.4)
        "outcomes": st.lists(
            st.sampled_from(["success", "success", "failure", "partial"]), min_size=1, max_size=2
        ),
    },
    "supersede": {
        "i": IDX,
        "aim": st.sampled_from(["fact", "fact", "fact", "episode"]),
        "t": TRIPLE,
        "mask": st.integers(0, 7),
        "retarget": RETARGET,
    },
    "fork": {
        "i": IDX,
        "aim": st.sampled_from(["fact", "fact", "fact", "episode"]),
        "t": TRIPLE,
        "mask": st.integers(0, 7),
        "retarget": RETARGET,
    },
    "merge": {
        "i": IDX,
        "j": IDX,
        "t": st.one_of(st.none(), TRIPLE),
        "retarget": RETARGET,
        "across": st.sampled_from([False, False, False, True]),
    },
    "retract": {"i": IDX, "aim": TARGET},
    "contest": {"i": IDX, "j": st.one_of(st.none(), IDX), "aim": TARGET},
    "reinforce": {
        "i": IDX,
        "aim": st.sampled_from(["fact", "fact", "procedure", "working", "episode", "entity"]),
    },
    "penalize": {
        "i": IDX,
        "amount": st.sampled_from([0.1, 0.35, 1.0]),
        "aim": st.sampled_from(["fact", "procedure", "working", "episode", "entity"]),
    },
    "advance": {
        "delta": st.sampled_from(
            [
                timedelta(seconds=30),
                timedelta(hours=1),
                timedelta(hours=7),
                timedelta(hours=25),
                timedelta(days=3),
                timedelta(days=31),
            ]
        )
    },
    "decay": {},
    "decay_and_prune": {
        "stale": st.sampled_from([False, True, True]),
        "wait": st.sampled_from([timedelta(0), timedelta(days=1)]),
    },
    "consolidate": {},
    "as_of_read": {
        "scope": st.sampled_from(SCOPES),
        "i": IDX,
        "offset": st.sampled_from([timedelta(0), timedelta(milliseconds=-500)]),
        "subject": st.sampled_from(SUBJECTS),
    },
    "sweep": {},
}
CAPTURES = [
    "capture_observations",
    "capture_observations",
    "capture_fact_event",
    "capture_fact_event",
    "capture_tool_episode",
    "capture_working",
    "capture_working",
]
REVISIONS = [
    "supersede",
    "supersede",
    "fork",
    "merge",
    "retract",
    "retract",
    "contest",
    "reinforce",
    "penalize",
]
MAINTENANCE = [
    "consolidate",
    "consolidate",
    "decay_and_prune",
    "decay_and_prune",
    "decay",
    "advance",
    "advance",
    "as_of_read",
    "sweep",
]
ARGS.update(review_args(ARGS))
OPERATIONS = CAPTURES * 2 + REVISIONS + MAINTENANCE + REVIEW


def norm(term: str) -> str:
    """RFC 3.4: a fact term compared case-folded with whitespace collapsed."""
    return " ".join(term.split()).casefold()


def norm_predicate(term: str) -> str:
    """RFC 3.4: the predicate also in snake case (the tombstone table stores it so)."""
    return re.sub(r"[^0-9a-z]+", "_", term.casefold()).strip("_")


def fact_key(scope: str, s: str, p: str, o: str) -> Key:
    return (scope, norm(s), norm_predicate(p), norm(o))


# a normalised (subject, predicate, object) back to its index in TRIPLES
TRIPLE_OF = {fact_key("", *triple)[1:]: i for i, triple in enumerate(TRIPLES)}


def closed_form(base: float, reinforced_at: datetime, kind: str, at: datetime) -> float:
    """RFC 6.1, written out again rather than imported: the model's own arithmetic."""
    elapsed = max(0.0, (at - reinforced_at).total_seconds())
    return max(min(base, FLOOR[kind]), base * math.pow(2.0, -elapsed / HALF_LIFE[kind]))


@dataclass
class Rec:
    """What the model knows of one record."""

    id: uuid.UUID
    type: str
    scope: str
    at: datetime  # created_at = recorded_at = occurred time of the write (RFC 5.6)
    base: float = 1.0
    reinforced_at: datetime | None = None
    key: Key | None = None
    subject: str | None = None  # normalised subject: which subject queries find it
    entity_like: bool = False  # an observation whose subject resolves to an entity
    status: str = "active"
    retracted_at: datetime | None = None
    contested_at: datetime | None = None
    deleted: bool = False
    compressed: bool = False
    pending: bool = False  # has a consolidate item not yet processed (RFC 3.3)
    outcome: str | None = None
    facts: list[tuple[Key, str]] = field(default_factory=list)  # (key, subject) of an event
    signature: tuple[str, ...] | None = None
    name: str | None = None  # an entity's normalised canonical name
    proposal: uuid.UUID | None = None  # RFC 5.7: the proposal it was written in
    proposed_until: datetime | None = None  # RFC 5.7: when its proposal was decided
    compress_due: datetime | None = None  # an episode's compress item (RFC 6.4.1)

    def __post_init__(self) -> None:
        if self.reinforced_at is None:
            self.reinforced_at = self.at
        if self.type == "episodic" and self.status != "proposed":
            self.compress_due = self.at + COMPRESS_AGE

    def trusted_from(self, at: datetime) -> None:
        """RFC 5.7: an approved episode gets the work a trusted capture gets, from ``at``."""
        if self.type == "episodic":
            self.compress_due = at + COMPRESS_AGE
            self.pending = self.outcome == "success" or self.signature is not None

    def salience(self, at: datetime) -> float:
        assert self.reinforced_at is not None
        return closed_form(self.base, self.reinforced_at, self.type, at)

    def reinforce(self, at: datetime, n: int = 1) -> None:
        """RFC 5.2.6, 6.2: ``max(s, min(1, s + gain x n))`` from the closed form; clock restarted."""
        s = self.salience(at)
        self.base, self.reinforced_at = max(s, min(1.0, s + GAIN * n)), at

    def status_as_of(self, t: datetime) -> str:
        """RFC 5.6, 5.7: retracted when retracted_at <= T, else proposed before its decision,
        else contested when contested_at <= T."""
        if self.retracted_at is not None and self.retracted_at <= t:
            return "retracted"
        if self.status == "proposed" or (self.proposed_until is not None and self.proposed_until > t):
            return "proposed"
        if self.contested_at is not None and self.contested_at <= t:
            return "contested"
        return "active"


@dataclass
class Signature:
    """RFC 6.4.3: the counts of one (scope, tool signature) and the records mined from it."""

    successes: int = 0
    failures: int = 0
    competence: uuid.UUID | None = None
    plan: uuid.UUID | None = None


def expect(exc: type[Exception] | None, call: Callable[[], Any]) -> Any:
    """Run ``call``; with ``exc`` it must raise exactly that error class."""
    if exc is None:
        return call()
    with pytest.raises(exc):
        call()
    return None


class CorrectionMachine(ReviewRules, RuleBasedStateMachine):
    """The store under random corrections and reviews, against a reference model."""

    admin_url: ClassVar[str]
    data_dir: ClassVar[Path]

    def __init__(self) -> None:
        super().__init__()
        self._stack = contextlib.ExitStack()
        url = self._stack.enter_context(services.fresh_database(self.admin_url))
        self.db = Database(url, embedding_dim=EMBEDDING_DIM, run_migrations=False, min_size=1, max_size=4)
        self._stack.callback(self.db.close)
        self.clock = FakeClock()
        self.m = Membrane(
            Settings(
                data_dir=self.data_dir,
                embedding_dim=EMBEDDING_DIM,
                half_life_working_seconds=WORKING_HALF_LIFE,
                review_ttl=int(REVIEW_TTL.total_seconds()),
            ),
            database=self.db,
            clock=self.clock,
        )
        self.sql = self._stack.enter_context(psycopg.connect(url, autocommit=True))
        self.recs: dict[uuid.UUID, Rec] = {}
        self.edges: dict[tuple[uuid.UUID, str, uuid.UUID], datetime] = {}
        self.tombstones: dict[Key, uuid.UUID] = {}  # key -> first retracted record (RFC 5.4)
        self.signatures: dict[tuple[str, tuple[str, ...]], Signature] = {}
        self.moments: list[datetime] = []
        self.dirty: set[uuid.UUID] = set()
        self.audit_seen = 0
        self.steps = 0
        self.init_review()

    def teardown(self) -> None:
        self._stack.close()

    # -- the model ----------------------------------------------------------------

    def now(self) -> datetime:
        return self.clock()

    def tick(self) -> datetime:
        """Every write happens one second after the previous step, so that creation times
        never tie and as-of moments separate the steps."""
        self.steps += 1
        return self.clock.advance(seconds=1)

    def mark(self) -> None:
        if not self.moments or self.moments[-1] != self.now():
            self.moments.append(self.now())

    def add(self, rec: Rec) -> Rec:
        assert rec.id not in self.recs, f"id {rec.id} returned twice for new records"
        self.recs[rec.id] = rec
        self.dirty.add(rec.id)
        return rec

    def link(self, src: uuid.UUID, pred: str, dst: uuid.UUID) -> None:
        self.edges.setdefault((src, pred, dst), self.now())

    def existing(self, *types: str) -> list[Rec]:
        return [r for r in self.recs.values() if not r.deleted and (not types or r.type in types)]

    def pick(self, pool: list[Rec], i: int) -> Rec:
        return pool[i % len(pool)]

    def facts_of(self, key: Key) -> list[Rec]:
        return [r for r in self.recs.values() if r.type == "semantic" and r.key == key]

    def match(self, key: Key, *, proposed: bool = False) -> tuple[str, list[Rec]]:
        """RFC 5.4 "Matching": a live active fact is reinforced, a live contested one is left
        alone, a tombstoned key or one carried only by retracted facts is not re-created.
        RFC 5.7: a pending proposed fact is corroborated (consolidation leaves it alone), and
        a ``proposed`` capture reinforces nothing: a live active fact makes it "known".

        With several live active facts of one key (a fork that kept its key) the RFC does
        not say which is reinforced; the caller accepts any of them. A key can also be
        tombstoned while a live fact carries it (a same-key fork, then one of the two
        retracted): the live fact is reinforced, as "Matching" orders it ("a tombstoned key
        is not created", RFC 3.4, is about creating one).
        """
        facts = self.facts_of(key)
        active = [f for f in facts if f.status == "active"]
        if active:
            return ("known" if proposed else "reinforced"), active
        if any(f.status == "contested" for f in facts):
            return "contested", []
        pending = [f for f in facts if f.status == "proposed"]
        if pending:
            return "corroborated", pending
        if key in self.tombstones or any(f.status == "retracted" for f in facts):
            return "tombstoned", []
        return "created", []

    def withdraw(self, rec: Rec) -> None:
        rec.status, rec.retracted_at = "retracted", self.now()
        self.dirty.add(rec.id)

    def tombstone(self, key: Key | None, record_id: uuid.UUID) -> None:
        if key is not None:
            self.tombstones.setdefault(key, record_id)  # the first author stays (RFC 5.4)

    def reassert(self, key: Key | None) -> bool:
        """RFC 5.4: a revision whose new record has a tombstoned key clears its tombstone."""
        return key is not None and self.tombstones.pop(key, None) is not None

    def revisable(
        self, rec: Rec, *, episodic: bool = False, retracted: bool = False
    ) -> type[Exception] | None:
        """RFC 5.2: the error a revision of ``rec`` must answer with, in the order checked."""
        if rec.deleted:
            return errors.NotFound
        if rec.status == "proposed":  # RFC 5.7: settled by its review only
            return errors.RevisionRefused
        if rec.type == "episodic" and not episodic:
            return errors.RevisionRefused
        if rec.status == "retracted" and not retracted:
            return errors.RevisionRefused
        return None

    def created_entry(self, rid: uuid.UUID) -> dict[str, Any]:
        entries = self.m.audit(rid).entries
        assert entries and entries[0].action == "create", entries
        return dict(entries[0].details)

    # -- the rule ----------------------------------------------------------------------
    # One rule that draws its operation from a weighted list: hypothesis enables a random
    # subset of a machine's rules in each example (swarm testing), and with a rule per
    # operation few examples combined captures, corrections and consolidation.

    @rule(op=st.sampled_from(OPERATIONS), data=st.data())
    def step(self, op: str, data: st.DataObject) -> None:
        facts = sum(r.type == "semantic" for r in self.recs.values())
        if op in REVISIONS and facts < (2 if op == "merge" else 1):
            op = "capture_observations"  # nothing to correct yet
        if op == "as_of_read" and not self.moments:
            op = "sweep"
        if (op in DECISIONS and not self.proposals) or (
            op in ("corroborate", "expire") and not self.pending_facts()
        ):
            op = "propose_observations"  # nothing to decide, corroborate or expire yet
        getattr(self, op)(
            **{name: data.draw(strategy, label=f"{op}.{name}") for name, strategy in ARGS[op].items()}
        )

    # -- captures (RFC 3.3, 3.4) -----------------------------------------------------

    def known(self, i: int | None, scope: str, t: int) -> tuple[str, int]:
        """The scope and triple of the ``i``-th key stored (a fact's or a tombstone's, so
        that tombstoned keys come up often), else ``scope`` and ``t``."""
        keys = sorted({*self.tombstones, *(r.key for r in self.recs.values() if r.key)})
        if i is None or not keys:
            return scope, t
        key = keys[i % len(keys)]
        return key[0], self.triple(key)

    @staticmethod
    def triple(key: Key) -> int:
        """The index in TRIPLES of a key's subject, predicate and object."""
        return TRIPLE_OF[key[1:]]

    @staticmethod
    def other_object(t: int) -> int:
        """The index in TRIPLES of ``TRIPLES[t]`` with the other object."""
        s, p, o = TRIPLES[t]
        return TRIPLES.index((s, p, next(other for other in OBJECTS if other != o)))

    def capture_observations(
        self, items: list[tuple[str, int, int, int, int | None]], trust: TrustPolicy | None = None
    ) -> None:
        """Observations derive facts: created, reinforced, or refused by a tombstone (RFC 3.4).
        With a ``trust`` whose writes need review, proposed, or corroborating the pending
        proposal of their key; by either kind of key, a pending proposed fact of the key is
        corroborated, never reinforced or proposed again (RFC 5.7)."""
        now = self.tick()
        trust = trust or DEVELOPMENT_POLICY
        proposed = trust.review_required
        bodies: list[dict[str, Any]] = []
        keys: list[Key] = []
        for scope_drawn, t_drawn, sp, pp, reuse in items:
            scope, t = self.known(reuse, scope_drawn, t_drawn)
            s, p, o = TRIPLES[t]
            spell = SPELLINGS[sp]
            content = {
                "subject": spell(s),
                "predicate": PREDICATE_SPELLINGS[pp].format(p),
                "object": spell(o),
            }
            bodies.append({"source_kind": "observation", "scope": scope, "content": content})
            keys.append(fact_key(scope, s, p, o))
        # every key of the batch is matched against the store as it was before it (RFC 3.6)
        before = {k: self.match(k, proposed=proposed) for k in keys}
        results = self.m.capture_many(bodies, trust)
        created: dict[Key, uuid.UUID] = {}
        reinforced: dict[uuid.UUID, int] = {}
        status = "proposed" if proposed else "active"
        for body, key, res in zip(bodies, keys, results, strict=True):
            scope = body["scope"]
            episode = self.add(
                Rec(
                    res.record_ids[0],
                    "episodic",
                    scope,
                    now,
                    subject=key[1],
                    entity_like=body["content"]["subject"].strip()[:1].isupper(),
                    status=status,
                )
            )
            state, live = before[key]
            if key in created:  # a second capture of a key this batch created (RFC 3.4, 5.7)
                state, live = ("corroborated" if proposed else "created"), [self.recs[created[key]]]
            assert res.fact == state, (key, res, state)
            self.not_revived(key, state)
            assert (res.proposal_id is not None) is proposed, res
            own = [episode.id]  # the records the capture adds to a proposal
            if state in ("contested", "tombstoned", "known"):
                # RFC 5.4, 5.7: nothing is created or reinforced; a known fact is only named
                if state == "known":  # the live fact it names, neither linked nor reinforced
                    assert res.record_ids[1:] and res.record_ids[1] in {f.id for f in live}, res
                else:
                    assert res.record_ids == [episode.id], res
                if proposed:
                    self.opened(res.proposal_id, scope, trust.actor, own)
                    episode.proposal = res.proposal_id
                continue
            assert len(res.record_ids) == 2, res
            fid = res.record_ids[1]
            if state == "reinforced":
                assert fid in {f.id for f in live}, (key, fid, [f.id for f in live])
                reinforced[fid] = reinforced.get(fid, 0) + 1
            elif state == "corroborated":
                assert fid in {f.id for f in live}, (key, fid, [f.id for f in live])
                pid = self.recs[fid].proposal
                assert pid is not None and res.proposal_id == (pid if proposed else None), (res, pid)
                self.corroborated(pid, trust.actor, own if proposed else [])
                episode.proposal = pid if proposed else None
            elif key in created:
                assert fid == created[key], "one new fact per key and batch (RFC 3.4)"
            else:
                created[key] = fid
                fact = self.add(Rec(fid, "semantic", scope, now, key=key, subject=key[1], status=status))
                if proposed:
                    self.opened(res.proposal_id, scope, trust.actor, [*own, fid]).fact = fid
                    episode.proposal = fact.proposal = res.proposal_id
            self.link(fid, "derived_from", episode.id)
        for fid, n in reinforced.items():
            # RFC 6.2: once per new source, all of one batch in one statement
            self.recs[fid].reinforce(now, n)
            self.dirty.add(fid)
        self.mark()

    def capture_fact_event(
        self,
        scope: str,
        triples: list[int],
        spelling: int,
        outcome: str,
        reuse: int | None,
        trust: TrustPolicy | None = None,
    ) -> None:
        """A successful event's facts are promoted by consolidation later (RFC 6.4.2); a
        proposed event's only once approved (RFC 5.7)."""
        now = self.tick()
        trust = trust or DEVELOPMENT_POLICY
        scope, first = self.known(reuse, scope, triples[0])
        triples = list(dict.fromkeys([first, *triples[1:]]))
        spell = SPELLINGS[spelling]
        facts = [
            {"subject": spell(TRIPLES[t][0]), "predicate": TRIPLES[t][1], "object": spell(TRIPLES[t][2])}
            for t in triples
        ]
        res = self.m.capture(
            {
                "source_kind": "event",
                "scope": scope,
                "content": {"text": "status report", "outcome": outcome, "facts": facts},
            },
            trust,
        )
        assert res.fact is None and len(res.record_ids) == 1, res
        assert (res.proposal_id is not None) is trust.review_required, res
        episode = self.add(
            Rec(
                res.record_ids[0],
                "episodic",
                scope,
                now,
                outcome=outcome,
                pending=outcome == "success" and not trust.review_required,
                facts=[(fact_key(scope, *TRIPLES[t]), norm(TRIPLES[t][0])) for t in triples],
                status="proposed" if trust.review_required else "active",
                proposal=res.proposal_id,
            )
        )
        if res.proposal_id is not None:
            self.opened(res.proposal_id, scope, trust.actor, [episode.id])
        self.mark()

    def capture_tool_episode(self, scope: str, signature: str, outcomes: list[str]) -> None:
        """Episodes with tool calls feed competence records and plan graphs (RFC 6.4.3)."""
        now = self.tick()
        calls = [
            {"tool": tool, "args": {"step": i + 2}, "result": {"status": "done"}}
            for i, tool in enumerate(SIGNATURES[signature])
        ]
        results = self.m.capture_many(
            [
                {
                    "source_kind": "event",
                    "scope": scope,
                    "content": {"text": "ran the tools", "outcome": outcome, "tool_calls": calls},
                }
                for outcome in outcomes
            ]
        )
        for outcome, res in zip(outcomes, results, strict=True):
            self.add(
                Rec(
                    res.record_ids[0],
                    "episodic",
                    scope,
                    now,
                    outcome=outcome,
                    pending=True,
                    signature=SIGNATURES[signature],
                )
            )
        self.mark()

    def capture_working(self, scope: str, thread: int) -> None:
        """Working records are auto_prune and revisable: prune must spare the retracted and
        contested ones at their floor (RFC 4.2, 5.3, 6.3)."""
        now = self.tick()
        res = self.m.capture(
            {
                "source_kind": "working_state",
                "scope": scope,
                "content": {
                    "thread_id": f"thread {thread}",
                    "task_state": "executing",
                    "context_summary": "halfway through the task",
                },
            }
        )
        assert res.fact is None and len(res.record_ids) == 1, res
        self.add(Rec(res.record_ids[0], "working", scope, now))
        self.mark()

    # -- revisions (RFC 5.2) ------------------------------------------------------------

    def content_target(self, i: int, aim: str) -> Rec:
        facts = [r for r in self.recs.values() if r.type == "semantic"]
        episodes = [r for r in self.recs.values() if r.type == "episodic"]
        return self.pick(episodes if aim == "episode" and episodes else facts, i)

    def retargeted(self, scope: str, t: int, mask: int, retarget: bool) -> tuple[int, int]:
        """``(t, mask)``, or with ``retarget`` the whole triple of a tombstoned key of
        ``scope`` (a re-assertion, RFC 5.4) when there is one."""
        stones = sorted(k for k in self.tombstones if k[0] == scope)
        if retarget and stones:
            return TRIPLE_OF[stones[t % len(stones)][1:]], 7
        return t, mask

    @staticmethod
    def revised(t: int, mask: int) -> dict[str, str]:
        """The ``record`` of a revision: the fields of ``TRIPLES[t]`` that ``mask`` selects."""
        s, p, o = TRIPLES[t]
        return {
            name: value
            for bit, (name, value) in enumerate((("subject", s), ("predicate", p), ("object", o)))
            if mask & (1 << bit)
        }

    def supersede(self, i: int, aim: str, t: int, mask: int, retarget: bool) -> None:
        """RFC 5.2.1: the target is retracted and linked; its key tombstoned unless kept."""
        now = self.tick()
        old = self.content_target(i, aim)
        record = self.revised(*self.retargeted(old.scope, t, mask, retarget))
        body = {"record": record, "rationale": "corrected", "evidence": EVIDENCE}
        err = self.revisable(old)
        if err is not None:
            expect(err, lambda: self.m.revisions.supersede(old.id, body, ME))
            self.mark()
            return
        assert old.key is not None
        new_id = self.m.revisions.supersede(old.id, body, ME)
        self.superseded(old, new_id, self.revised_key(old.key, record), now)
        self.mark()

    def revised_key(self, key: Key, record: dict[str, str]) -> Key:
        """The key of a revision's new record: ``key`` with the fields ``record`` names."""
        scope, s, p, o = key
        return (
            scope,
            norm(record.get("subject", s)),
            norm_predicate(record.get("predicate", p)),
            norm(record.get("object", o)),
        )

    def superseded(self, old: Rec, new_id: uuid.UUID, key: Key, now: datetime) -> None:
        """RFC 5.2.1, 5.4: ``old`` is retracted and linked both ways to its replacement; a
        tombstoned new key is re-asserted, the target's own included (a retracted same-key
        fork tombstones it while the target stays active), else the old key is tombstoned
        unless the new record keeps it."""
        assert old.key is not None
        reasserted = self.reassert(key)
        if key != old.key:
            self.tombstone(old.key, old.id)
        self.withdraw(old)
        self.add(Rec(new_id, "semantic", old.scope, now, key=key, subject=key[1]))
        self.link(new_id, "supersedes", old.id)
        self.link(old.id, "superseded_by", new_id)
        details = self.created_entry(new_id)
        assert details["supersedes"] == str(old.id) and details["reasserted"] is reasserted, details

    def fork(self, i: int, aim: str, t: int, mask: int, retarget: bool) -> None:
        """RFC 5.2.2: a conditional variant beside the target; both stay as they were."""
        now = self.tick()
        target = self.content_target(i, aim)
        record = self.revised(*self.retargeted(target.scope, t, mask, retarget))
        body = {"record": record, "condition": "in summer", "rationale": "varies", "evidence": EVIDENCE}
        err = self.revisable(target)
        new_id = expect(err, lambda: self.m.revisions.fork(target.id, body, ME))
        if err is None:
            assert target.key is not None
            key = self.revised_key(target.key, record)
            reasserted = self.reassert(key)
            self.add(Rec(new_id, "semantic", target.scope, now, key=key, subject=key[1]))
            self.link(new_id, "derived_from", target.id)
            self.dirty.add(target.id)
            details = self.created_entry(new_id)
            assert details["forked_from"] == str(target.id), details
            assert details["reasserted"] is reasserted, details
        self.mark()

    def merge(self, i: int, j: int, t: int | None, retarget: bool, across: bool) -> None:
        """RFC 5.2.3: sources of one scope and type are retracted into one merged record."""
        now = self.tick()
        facts = [r for r in self.recs.values() if r.type == "semantic"]
        a = self.pick(facts, i)
        # mostly a partner of the same scope; ``across`` lets the refusal of two scopes come up
        others = [f for f in facts if f.id != a.id and (across or f.scope == a.scope)]
        b = self.pick(others or [f for f in facts if f.id != a.id], j)
        if t is not None or retarget:
            t, _ = self.retargeted(a.scope, t or 0, 7, retarget)
        record = self.revised(t, 7) if t is not None else {}
        body = {
            "record_ids": [str(a.id), str(b.id)],
            "record": record,
            "rationale": "same",
            "evidence": EVIDENCE,
        }
        err = self.revisable(a) or self.revisable(b)
        if err is None and a.scope != b.scope:
            err = errors.RevisionRefused
        new_id = expect(err, lambda: self.m.revisions.merge(body, ME))
        if err is None:
            assert a.key is not None and b.key is not None
            key = fact_key(a.scope, *TRIPLES[t]) if t is not None else a.key
            reasserted = self.reassert(key)
            for src in (a, b):
                if src.key != key:
                    self.tombstone(src.key, src.id)
                self.withdraw(src)
                self.link(new_id, "derived_from", src.id)
            self.add(Rec(new_id, "semantic", a.scope, now, key=key, subject=key[1]))
            details = self.created_entry(new_id)
            assert details["merged_from"] == [str(a.id), str(b.id)], details
            assert details["reasserted"] is reasserted, details
        self.mark()

    def status_target(self, i: int, aim: str) -> Rec | None:
        pools = {
            "fact": [r for r in self.recs.values() if r.type == "semantic"],
            "procedure": [r for r in self.recs.values() if r.type in ("competence", "plan_graph")],
            "episode": [r for r in self.recs.values() if r.type == "episodic"],
            "working": [r for r in self.recs.values() if r.type == "working"],
            "entity": [r for r in self.recs.values() if r.type == "entity"],
        }
        pool = pools[aim] or pools["fact"] or pools["episode"]
        return self.pick(pool, i) if pool else None

    def retract(self, i: int, aim: str) -> None:
        """RFC 5.2.4: retracted, salience untouched, a fact's key tombstoned."""
        self.tick()
        rec = self.status_target(i, aim)
        assert rec is not None
        err = self.revisable(rec)
        expect(err, lambda: self.m.revisions.retract(rec.id, {"rationale": "wrong"}, ME))
        if err is None:
            self.tombstone(rec.key, rec.id)
            self.withdraw(rec)
        self.mark()

    def contest(self, i: int, j: int | None, aim: str) -> None:
        """RFC 5.2.5: contested, ranked below active, the first contest time kept."""
        self.tick()
        rec = self.status_target(i, aim)
        assert rec is not None
        other = self.pick(list(self.recs.values()), j) if j is not None else None
        body: dict[str, Any] = {"rationale": "disputed"}
        if other is not None:
            body["contesting_record_id"] = str(other.id)
        err = self.revisable(rec)
        linked = other if other is not None and other.id != rec.id and not other.deleted else None
        expect(err, lambda: self.m.revisions.contest(rec.id, body, ME))
        if err is None:
            rec.status = "contested"
            if rec.contested_at is None:
                rec.contested_at = self.now()
            self.dirty.add(rec.id)
            if linked:  # RFC 5.2.5: written once, however often the same record contests
                self.link(linked.id, "contests", rec.id)
                self.link(rec.id, "contested_by", linked.id)
        self.mark()

    def reinforce(self, i: int, aim: str) -> None:
        """RFC 5.2.6: every class but a retracted record; the clock restarts."""
        now = self.tick()
        rec = self.status_target(i, aim)
        assert rec is not None
        err = self.revisable(rec, episodic=True)
        expect(err, lambda: self.m.revisions.reinforce(rec.id, {}, ME))
        if err is None:
            rec.reinforce(now)
            self.dirty.add(rec.id)
        self.mark()

    def penalize(self, i: int, amount: float, aim: str) -> None:
        """RFC 5.2.7: ``max(0, s - amount)``, retracted records included; the clock restarts."""
        now = self.tick()
        rec = self.status_target(i, aim)
        assert rec is not None
        err = self.revisable(rec, episodic=True, retracted=True)
        expect(err, lambda: self.m.revisions.penalize(rec.id, {"amount": amount}, ME))
        if err is None:
            rec.base, rec.reinforced_at = max(0.0, rec.salience(now) - amount), now
            self.dirty.add(rec.id)
        self.mark()

    # -- maintenance (RFC 6) ------------------------------------------------------------

    def advance(self, delta: timedelta) -> None:
        self.steps += 1
        self.clock.now += delta
        self.mark()

    def decay(self) -> None:
        """RFC 6.1: a decay batch moves checkpoints only; reads never change by it."""
        self.tick()
        out = self.m.maintenance.run("decay")
        assert not out.get("failed"), out
        self.mark()

    def decay_and_prune(self, stale: bool, wait: timedelta) -> None:
        """RFC 6.3: prune deletes exactly the due, active, auto_prune records at the floor.

        ``wait`` lets episodes and working records reach their floor first. With ``stale``
        every record also gets a prune item due now, as a stale schedule may hold (an item
        scheduled before its record was retracted, contested or reinforced): the prune
        statement must re-check every condition itself.
        """
        self.clock.now += wait
        now = self.tick()
        self.m.maintenance.run("decay")
        if stale:
            self.sql.execute(
                "INSERT INTO work_items (kind, target_id, due_at) SELECT 'prune', unnest(%s::uuid[]), "
                "%s ON CONFLICT DO NOTHING",
                ([r.id for r in self.existing()], now),
            )
        due = {
            r[0]
            for r in self.sql.execute(
                "SELECT target_id FROM work_items WHERE kind = 'prune' AND due_at <= %s AND NOT dead", (now,)
            ).fetchall()
        }
        eligible, unsure = set(), set()
        for rid in due:
            rec = self.recs.get(rid)
            assert rec is not None, f"a prune item for a record the model does not know: {rid}"
            # RFC 6.3: only unpinned, auto_prune (episodic, working), active records go
            if rec.deleted or rec.type not in ("episodic", "working") or rec.status != "active":
                continue
            bar = max(FLOOR[rec.type], PRUNE_EPSILON)
            s = rec.salience(now)
            if abs(s - bar) <= 1e-9:
                unsure.add(rid)  # on the boundary both answers are the closed form's
            elif s <= bar:
                eligible.add(rid)
        out = self.m.maintenance.run("prune")
        assert not out.get("failed"), out
        ids = [r.id for r in self.existing()]
        left = {
            r[0]
            for r in self.sql.execute("SELECT id FROM memory_records WHERE id = ANY(%s)", (ids,)).fetchall()
        }
        gone = set(ids) - left
        assert eligible <= gone <= eligible | unsure, (
            f"pruned {gone}, expected {eligible} (RFC 6.3: never a protected record)"
        )
        assert out.get("deleted", 0) == len(gone), out
        for rid in gone:
            self.recs[rid].deleted = True
            self.dirty.add(rid)
        self.edges = {e: at for e, at in self.edges.items() if not ({e[0], e[2]} & gone)}
        self.mark()

    def consolidate(self) -> None:
        """RFC 6.4.1-6.4.3: compression, then promotion and procedures of the pending episodes."""
        now = self.tick()
        # an episode's compress item falls due a day after it was trusted: captured, or its
        # proposal approved (RFC 5.7); a proposed or rejected one has none
        compress = [
            r
            for r in self.existing("episodic")
            if not r.compressed and r.compress_due is not None and r.compress_due <= now
        ]
        batch = sorted((r for r in self.existing("episodic") if r.pending), key=lambda r: r.at)
        # promotion: every key of the batch's successful episodes, matched before the batch
        sources: dict[Key, list[Rec]] = {}
        subjects: dict[Key, str] = {}
        for ep in batch:
            if ep.outcome == "success":
                for key, subject in ep.facts:
                    sources.setdefault(key, []).append(ep)
                    subjects[key] = subject
        plan = {key: self.match(key) for key in sources}
        known_procedures = {r.id for r in self.existing("competence", "plan_graph")}
        out = self.m.maintenance.run("consolidate")
        # RFC 6.4.1: halved, not below the floor, reinforcement time kept
        assert out["compress"].get("compressed", 0) == len(compress), (out, len(compress))
        for r in compress:
            r.base, r.compressed = max(min(r.base, FLOOR["episodic"]), r.base * COMPRESSION), True
            self.dirty.add(r.id)
        stats = out["consolidate"]
        assert stats.get("claimed", 0) == len(batch), (stats, len(batch))
        assert not stats.get("failed"), stats
        for ep in batch:
            ep.pending = False
        self._promoted(now, batch, sources, subjects, plan, stats)
        self._procedures(now, batch, known_procedures, stats)
        self.mark()

    def _promoted(
        self,
        now: datetime,
        batch: list[Rec],
        sources: dict[Key, list[Rec]],
        subjects: dict[Key, str],
        plan: dict[Key, tuple[str, list[Rec]]],
        stats: dict[str, Any],
    ) -> None:
        """RFC 6.4.2, 5.4: the facts consolidation created and reinforced are the model's."""
        known = [r.id for r in self.recs.values() if r.type == "semantic"]
        new = self.sql.execute(
            "SELECT id, scope, fact_subject, fact_predicate, fact_object FROM memory_records "
            "WHERE type = 'semantic' AND NOT (id = ANY(%s))",
            (known,),
        ).fetchall()
        created = {(s, su, p, o): rid for rid, s, su, p, o in new}
        assert len(created) == len(new), "two new facts of one key in one batch"
        expected = {k for k, (state, _) in plan.items() if state == "created"}
        # RFC 5.4: a tombstoned key, or one whose facts are all retracted, is never re-created
        assert set(created) == expected, (
            f"consolidation created {sorted(created)}, expected {sorted(expected)}"
        )
        assert stats.get("facts_created", 0) == len(expected), stats
        for key, rid in created.items():
            self.add(Rec(rid, "semantic", key[0], now, key=key, subject=subjects[key]))
            for ep in sources[key]:
                self.link(rid, "derived_from", ep.id)
        links = self.sql.execute(
            "SELECT l.source_id, l.target_id FROM relations l JOIN memory_records r "
            "ON r.id = l.source_id WHERE l.predicate = 'derived_from' AND r.type = 'semantic' "
            "AND l.target_id = ANY(%s)",
            ([ep.id for ep in batch],),
        ).fetchall()
        counts: dict[uuid.UUID, int] = {}
        for fid, eid in links:
            fact = self.recs[fid]
            assert fact.key is not None
            if fact.key in created:
                continue
            state, live = plan.get(fact.key, ("absent", []))
            # RFC 6.2, 5.4: only a live active fact of the episode's key gains the source
            assert state == "reinforced" and fact in live, (fact.key, state, fid)
            counts[fid] = counts.get(fid, 0) + 1
            self.link(fid, "derived_from", eid)
        reinforced_keys = {k for k, (state, _) in plan.items() if state == "reinforced"}
        assert {self.recs[f].key for f in counts} == reinforced_keys, (counts, reinforced_keys)
        assert stats.get("facts_reinforced", 0) == len(counts), stats
        for fid, n in counts.items():
            assert n == len(sources[self.recs[fid].key]), (fid, n)  # type: ignore[index]
            self.recs[fid].reinforce(now, n)
            self.dirty.add(fid)

    def _procedures(
        self, now: datetime, batch: list[Rec], known: set[uuid.UUID], stats: dict[str, Any]
    ) -> None:
        """RFC 6.4.3, 4.4: competence at two successes, a plan graph for three calls or more;
        a retracted one is never re-created; only active ones are reinforced."""
        groups: dict[tuple[str, tuple[str, ...]], list[Rec]] = {}
        for ep in batch:
            if ep.signature is not None:
                groups.setdefault((ep.scope, ep.signature), []).append(ep)
        want: dict[tuple[str, str, tuple[str, ...]], bool] = {}
        reinforced = 0
        for (scope, sig), eps in groups.items():
            g = self.signatures.setdefault((scope, sig), Signature())
            wins = sum(ep.outcome == "success" for ep in eps)
            g.successes += wins
            g.failures += len(eps) - wins
            for existing in (g.competence, g.plan):
                if existing is not None and wins and self.recs[existing].status == "active":
                    self.recs[existing].reinforce(now, wins)
                    self.dirty.add(existing)
                    reinforced += 1
            if g.competence is None and g.successes >= 2:
                want[("competence", scope, sig)] = True
            if g.plan is None and len(sig) >= 3 and wins:
                want[("plan_graph", scope, sig)] = True
        rows = self.sql.execute(
            "SELECT r.id, r.type, r.scope, p.body FROM memory_records r JOIN record_payloads p "
            "ON p.record_id = r.id WHERE r.type IN ('competence', 'plan_graph') "
            "AND NOT (r.id = ANY(%s))",
            (list(known),),
        ).fetchall()
        got = {}
        for rid, kind, scope, body in rows:
            sig = tuple(body["signature"]) if kind == "competence" else tuple(n["op"] for n in body["nodes"])
            assert (kind, scope, sig) not in got, "two records for one signature"
            got[(kind, scope, sig)] = rid
        assert set(got) == set(want), (sorted(got), sorted(want))
        assert stats.get("procedures_reinforced", 0) == reinforced, (stats, reinforced)
        for (kind, scope, sig), rid in got.items():
            g = self.signatures[(scope, sig)]
            if kind == "competence":
                g.competence = rid
            else:
                g.plan = rid
            self.add(Rec(rid, kind, scope, now))

    # -- reads as of an earlier moment (RFC 5.6) ---------------------------------------

    def as_of_read(self, scope: str, i: int, offset: timedelta, subject: str) -> None:
        """Listings, a subject query with expansion and by-id reads as of T equal the model."""
        t = self.moments[i % len(self.moments)] + offset
        here = [r for r in self.existing() if r.scope == scope]
        then = {r.id: r.status_as_of(t) for r in here if r.at <= t}
        wide = self.m.retrieve(
            {"scopes": [scope], "limit": 200, "as_of": t, "include_retracted": True, "include_proposed": True}
        )
        assert {v.id: v.status.value for v in wide.records} == then, f"as of {t}"
        live = {rid for rid, s in then.items() if s not in ("retracted", "proposed")}
        narrow = self.m.retrieve({"scopes": [scope], "limit": 200, "as_of": t})
        assert {v.id for v in narrow.records} == live, f"as of {t}"
        self.check_query(scope, norm(subject), as_of=t, include_contested=True)
        # an audit view as of T: every fact of the subject then, each with its status then
        self.check_query(
            scope,
            norm(subject),
            as_of=t,
            include_contested=True,
            include_retracted=True,
            include_proposed=True,
        )
        for r in here:
            if r.at > t:
                expect(errors.NotFound, partial(self.m.get, r.id, as_of=t))
            else:
                assert self.m.get(r.id, as_of=t).status.value == then[r.id], (r.id, t)

    def sweep(self) -> None:
        """Every record ever created: by id marked with its status, its audit chain valid."""
        for rec in self.recs.values():
            self.check_by_id(rec)
            history = self.m.audit(rec.id)
            assert history.chain_valid and history.entries, rec.id
            if rec.deleted:
                assert history.entries[-1].action == "delete", history.entries

    # -- invariants ----------------------------------------------------------------------

    def check_by_id(self, rec: Rec) -> None:
        """RFC 5.1: a by-id read returns the record with its status, never silently active."""
        if rec.deleted:
            expect(errors.NotFound, lambda: self.m.get(rec.id))
            return
        v = self.m.get(rec.id)
        assert v.status.value == rec.status, (rec.id, v.status, rec.status)
        assert v.recorded_at == rec.at and v.retracted_at == rec.retracted_at, rec.id
        self.check_salience(v, rec)

    def check_salience(self, v: RecordView, rec: Rec) -> None:
        expected = rec.salience(self.now())
        assert v.salience == pytest.approx(expected, rel=1e-9, abs=1e-12), (
            f"{rec.type} {rec.id}: salience {v.salience}, closed form {expected} (RFC 6.1)"
        )

    def learn(self, v: RecordView) -> Rec:
        """Entities appear as captures resolve mentions (RFC 3.5); the model learns them as
        the listing shows them. Any other record the model did not predict is a failure."""
        assert v.type.value == "entity", f"a {v.type.value} record the model did not predict: {v}"
        assert v.payload is not None
        rec = Rec(
            v.id,
            "entity",
            v.scope,
            v.recorded_at,
            name=norm(v.payload["canonical_name"]),
            status=self.m.get(v.id).status.value,  # now, whatever the read's moment
            proposal=self.proposal_of(v.id),  # RFC 5.7: made by a proposed capture
        )
        assert (rec.status == "proposed") is (rec.proposal is not None), rec
        return self.add(rec)

    @invariant()
    def model_holds(self) -> None:
        """After every step, in this order: the listings (which learn new entities), the
        subject queries, the selector, by-id reads and audit chains, the tombstones, the
        proposals."""
        self.listings_equal_the_model()
        self.subject_queries_hide_corrected_facts()
        self.selector_picks_only_active_procedures()
        self.by_id_reads_and_audit_chains()
        self.tombstones_equal_the_model()
        self.review_equals_the_model()

    def listings_equal_the_model(self) -> None:
        """The whole of each scope, with and without retracted and proposed records, by
        retrieval and by the list (RFC 5.1, 5.7, 6.1, 8.2, 10.7)."""
        for scope in SCOPES:
            wide = self.m.retrieve(
                {"scopes": [scope], "limit": 200, "include_retracted": True, "include_proposed": True}
            )
            for v in wide.records:
                rec = self.recs.get(v.id) or self.learn(v)
                assert not rec.deleted, f"deleted record {v.id} is listed"
                assert v.status.value == rec.status, (v.id, v.status, rec.status)
                self.check_salience(v, rec)
            here = {r.id for r in self.existing() if r.scope == scope}
            assert len(here) <= 200, "a scope outgrew one listing: lower MEMBRANE_STATEFUL_STEPS"
            assert {v.id for v in wide.records} == here, "the listing misses records"
            narrow = self.m.retrieve({"scopes": [scope], "limit": 200})
            live = {
                r.id
                for r in self.existing()
                if r.scope == scope and r.status not in ("retracted", "proposed")
            }
            got = [v.id for v in narrow.records]
            # the live set comes back in full (positive control), nothing retracted or
            # proposed beside it
            assert set(got) == live and len(got) == len(live), (sorted(map(str, got)), live)
            self.check_ranking(narrow)
            if self.proposals:  # the list without a status filter is a default read too (RFC 5.7)
                page = self.m.listing.records({"scopes": [scope], "limit": 200}, DEVELOPMENT_POLICY)
                assert {v.id for v in page.records} == live and page.next_cursor is None, scope
        self.decay_inputs_equal_the_model()

    def decay_inputs_equal_the_model(self) -> None:
        """RFC 6.1, 5.3: ``base`` and ``reinforced_at`` change only by reinforcement, penalty
        and compression, to the model's values; corrections never write them."""
        rows = self.sql.execute(
            "SELECT id, base_salience, reinforced_at FROM memory_records WHERE id = ANY(%s)",
            ([r.id for r in self.existing()],),
        ).fetchall()
        assert len(rows) == len(self.existing()), "a record the model keeps is gone"
        for rid, base, reinforced_at in rows:
            rec = self.recs[rid]
            assert (base, reinforced_at) == (
                pytest.approx(rec.base, rel=1e-9, abs=1e-12),
                rec.reinforced_at,
            ), (rec.type, rid)

    def check_ranking(self, result: RetrieveResult, *, proposed: bool = False) -> None:
        """RFC 5.1, 5.7, 8.2: every active record ranks above every contested one and every
        proposed one, which only a read that asks for them returns."""
        statuses = [v.status.value for v in result.records]
        assert "retracted" not in statuses
        assert proposed or "proposed" not in statuses, statuses
        below = [i for i, s in enumerate(statuses) if s in ("contested", "proposed")]
        if below:
            assert "active" not in statuses[below[0] :], statuses

    def subject_queries_hide_corrected_facts(self) -> None:
        """Roots, neighbours, edges and the entity arm of a query per subject (RFC 5.1, 8.4)."""
        for scope, subject in product(SCOPES, SUBJECTS):
            self.check_query(
                scope,
                norm(subject),
                as_of=None,
                include_contested=self.steps % 2 == 0,
                include_proposed=self.steps % 3 == 1,
            )

    def check_query(
        self,
        scope: str,
        subject: str,
        *,
        as_of: datetime | None,
        include_contested: bool,
        include_retracted: bool = False,
        include_proposed: bool = False,
    ) -> None:
        t = as_of or self.now()

        def shown(rec: Rec) -> bool:
            s = rec.status_as_of(t) if as_of is not None else rec.status
            return (
                s == "active"
                or (s == "contested" and include_contested)
                or (s == "retracted" and include_retracted)
                or (s == "proposed" and include_proposed)
            )

        here = [r for r in self.existing() if r.scope == scope and r.at <= t]
        if not any(r.subject == subject for r in here):
            return  # nothing to find: no positive control, so no query
        request: dict[str, Any] = {
            "query": subject.title(),
            "scopes": [scope],
            "limit": 200,
            "expand": EXPAND,
            "include_contested": include_contested,
            "include_retracted": include_retracted,
            "include_proposed": include_proposed,
        }
        if as_of is not None:
            request["as_of"] = as_of
        got = self.m.retrieve(request)
        roots = {v.id: v for v in got.records}
        returned = {**roots, **{v.id: v for v in got.neighbors}}
        for v in returned.values():
            rec = self.recs.get(v.id) or self.learn(v)
            status = rec.status_as_of(t) if as_of is not None else rec.status
            # RFC 5.1, 5.7: no retracted or proposed root or neighbour unless asked for; each
            # with its status
            assert v.status.value == status and shown(rec), (v.id, v.status, status, as_of)
            assert rec.at <= t, (v.id, "recorded after as_of")
        for e in got.edges:
            assert e.source_id in returned and e.target_id in returned, e
        # positive control: every shown fact of the subject is a root
        facts = {r.id for r in here if r.type == "semantic" and r.subject == subject and shown(r)}
        assert facts <= set(roots), f"{subject!r} in {scope} as of {as_of}: roots miss {facts - set(roots)}"
        self.check_neighbours(scope, set(roots), set(returned), t, shown)
        if as_of is None:
            self.check_ranking(got, proposed=include_proposed)
        self.check_entity(got, subject, here, shown)

    def check_neighbours(
        self,
        scope: str,
        roots: set[uuid.UUID],
        returned: set[uuid.UUID],
        t: datetime,
        shown: Callable[[Rec], bool],
    ) -> None:
        """RFC 5.1, 8.4: every shown record of the scope asked for one model edge (made by T)
        from a root is returned, as a root or a neighbour; a retracted one, a superseded one
        included, never is (a contest may link records of two scopes)."""
        near = set()
        for (src, _, dst), made in self.edges.items():
            if made <= t:
                near |= {b for a, b in ((src, dst), (dst, src)) if a in roots and b in self.recs}
        for rid in near:
            rec = self.recs[rid]
            if not rec.deleted and rec.at <= t and shown(rec) and rec.scope == scope:
                assert rid in returned, f"{rec.type} {rid} is one hop from a root but not returned"
            else:
                assert rid not in returned, rid

    def check_entity(
        self, got: RetrieveResult, subject: str, here: list[Rec], shown: Callable[[Rec], bool]
    ) -> None:
        """RFC 8.1.3: the entity the query names is a root, reached through the entity arm
        unless it is linked to so many records that the arm ignores it. RFC 5.7: a mention
        may have made, or resolved to, an entity a proposal holds, read only when the query
        reads proposed records: the query names an entity it may read."""
        mentions = [r for r in here if r.type == "episodic" and r.subject == subject and r.entity_like]
        if not mentions or not any(r.type == "entity" and r.name == subject and shown(r) for r in here):
            return
        assert any(
            v.type.value == "entity"
            and v.payload is not None
            and norm(v.payload["canonical_name"]) == subject
            for v in got.records
        ), f"no entity {subject!r} among the roots"
        # its links: the episodes that mention it and at most one edge per predicate and object
        if len(mentions) + len(PREDICATES) * len(OBJECTS) <= 25:
            assert got.diagnostics.arms.entity > 0, got.diagnostics

    def selector_picks_only_active_procedures(self) -> None:
        """RFC 8.5: the selection names an active competence or plan graph, if there is one."""
        for scope in SCOPES:
            procs = [r for r in self.existing("competence", "plan_graph") if r.scope == scope]
            if not procs:
                continue
            got = self.m.retrieve(
                {"scopes": [scope], "limit": 200, "memory_types": ["competence", "plan_graph"]}
            )
            live = {r.id for r in procs if r.status != "retracted"}
            assert {v.id for v in got.records} == live, (got.records, live)
            active = {r.id for r in procs if r.status == "active"}
            if active:
                assert got.selection is not None and got.selection.record_id in active, (
                    got.selection,
                    active,
                )
            else:
                assert got.selection is None, got.selection

    def by_id_reads_and_audit_chains(self) -> None:
        """RFC 5.1, 5.5: records this step touched, read by id; every chain that grew, valid."""
        for rid in sorted(self.dirty):
            self.check_by_id(self.recs[rid])
        self.dirty.clear()
        grown = self.sql.execute(
            "SELECT record_id, max(id) FROM audit_log WHERE id > %s GROUP BY record_id", (self.audit_seen,)
        ).fetchall()
        for rid, last in grown:
            assert rid in self.recs, f"audit entries for a record the model does not know: {rid}"
            history = self.m.audit(rid)
            assert history.chain_valid, (rid, history.entries)
            self.audit_seen = max(self.audit_seen, last)

    def tombstones_equal_the_model(self) -> None:
        """RFC 5.4: one tombstone per retracted key not carried on, its first author kept."""
        rows = self.sql.execute(
            "SELECT scope, subject, predicate, object, record_id FROM fact_tombstones"
        ).fetchall()
        stored = {(s, su, p, o): rid for s, su, p, o, rid in rows}
        assert stored == self.tombstones, (
            f"fact_tombstones {sorted(stored.items())}, model {sorted(self.tombstones.items())}"
        )


def run_machine(admin_url: str, data_dir: Path, *, examples: int, steps: int) -> None:
    machine = type("Correction", (CorrectionMachine,), {"admin_url": admin_url, "data_dir": data_dir})
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            deadline=None,
            suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        ),
    )


# a failure is shrunk for up to five minutes (hypothesis' own bound), each replay on a fresh
# database; the timeout leaves room for that beside the run itself
@pytest.mark.timeout(600 + EXAMPLES * STEPS // 5)
def test_correction_invariants_hold_under_random_corrections(pg_admin_url: str, tmp_path: Path) -> None:
    run_machine(pg_admin_url, tmp_path, examples=EXAMPLES, steps=STEPS)


# -- three minimal sequences ---------------------------------------------------------------


def test_same_key_supersede_under_a_tombstone_reasserts(
    membrane: Membrane, clock: FakeClock, database_url: str
) -> None:
    """RFC 5.4: a supersede that keeps its target's key re-asserts the key when a retracted
    same-key fork has tombstoned it; the backstop trigger would refuse it otherwise."""
    obs = {
        "source_kind": "observation",
        "scope": "alpha",
        "content": {"subject": "ada", "predicate": "works at", "object": "paris"},
    }
    fact = membrane.capture(obs).record_ids[1]
    clock.advance(seconds=1)
    # a variant that keeps the key, then retracted: the key is tombstoned (RFC 5.2.4) while
    # the original fact with the same key stays active
    twin = membrane.revisions.fork(
        fact, {"rationale": "summer", "condition": "in summer", "evidence": EVIDENCE}, ME
    )
    clock.advance(seconds=1)
    membrane.revisions.retract(twin, {"rationale": "no such variant"}, ME)
    clock.advance(seconds=1)
    new = membrane.revisions.supersede(
        fact, {"record": {}, "rationale": "restated", "evidence": EVIDENCE}, ME
    )
    assert membrane.get(new).status.value == "active"
    assert membrane.get(fact).status.value == "retracted"
    assert membrane.audit(new).entries[0].details["reasserted"] is True
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM fact_tombstones").fetchone() == (0,)


def test_contesting_twice_with_the_same_record(membrane: Membrane, clock: FakeClock) -> None:
    """RFC 5.2.5, 2.5: a repeated contest by the same record adds its entry, not the edges
    (relations are unique per source, predicate and target)."""

    def observe(obj: str) -> Any:
        return membrane.capture(
            {
                "source_kind": "observation",
                "scope": "alpha",
                "content": {"subject": "ada", "predicate": "works at", "object": obj},
            }
        ).record_ids[1]

    fact, other = observe("paris"), observe("rome")
    membrane.revisions.contest(fact, {"rationale": "saw rome", "contesting_record_id": str(other)}, ME)
    clock.advance(seconds=1)
    membrane.revisions.contest(fact, {"rationale": "saw rome again", "contesting_record_id": str(other)}, ME)
    view = membrane.get(fact)
    assert view.status.value == "contested"
    assert [(r.predicate, r.target_id) for r in view.relations].count(("contested_by", other)) == 1
    entries = membrane.audit(fact).entries
    assert [e.action for e in entries] == ["create", "revise", "revise"]
    assert entries[-1].details["contesting_record_id"] == str(other)


def test_as_of_query_finds_a_record_retracted_since(membrane: Membrane, clock: FakeClock) -> None:
    """RFC 5.6, 8.1.2: document frequencies count what the read reads, so a word that only a
    since-retracted record holds still finds it as of a moment before the retraction, and
    with include_retracted."""
    old = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "alpha",
            "content": {"subject": "grace", "predicate": "works at", "object": "paris"},
        }
    ).record_ids[1]
    clock.advance(seconds=1)
    # the only record whose text holds "ada" is the replacement
    new = membrane.revisions.supersede(
        old, {"record": {"subject": "ada"}, "rationale": "who", "evidence": EVIDENCE}, ME
    )
    then = clock.now
    clock.advance(seconds=1)
    query = {"query": "ada", "scopes": ["alpha"], "as_of": then}
    assert [v.id for v in membrane.retrieve(query).records] == [new]  # control: before
    membrane.revisions.retract(new, {"rationale": "nobody"}, ME)
    clock.advance(seconds=1)
    # by id and without a query, as of then the replacement is active
    assert membrane.get(new, as_of=then).status.value == "active"
    listed = membrane.retrieve({"scopes": ["alpha"], "as_of": then}).records
    assert new in [v.id for v in listed]
    # the query as of then must still find it, and so must one with include_retracted now
    assert [v.id for v in membrane.retrieve(query).records] == [new]
    wide = membrane.retrieve({"query": "ada", "scopes": ["alpha"], "include_retracted": True})
    assert [(v.id, v.status.value) for v in wide.records] == [(new, "retracted")]
