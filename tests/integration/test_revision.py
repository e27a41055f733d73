"""Revision operations (RFC 5.2): one transaction each, trust re-checked, audit entries kept."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.policy import Policy
from membrane_core.trust import TrustPolicy
from tests.support.sql import row, rows

EVIDENCE = [{"kind": "observation", "ref": "user said so"}]


def observe(m: Membrane, s: str, p: str, o: str, scope: str = "proj", **extra: Any) -> uuid.UUID:
    res = m.capture(
        {
            "source_kind": "observation",
            "scope": scope,
            "content": {"subject": s, "predicate": p, "object": o},
            **extra,
        }
    )
    assert res.fact == "created"
    return res.record_ids[1]


def tombstones(url: str) -> set[tuple[str, str, str, str]]:
    return {tuple(r) for r in rows(url, "SELECT scope, subject, predicate, object FROM fact_tombstones")}


def test_supersede_retracts_links_and_tombstones(membrane: Membrane, database_url: str, clock) -> None:
    old_id = observe(membrane, "user", "lives in", "Paris")
    before = row(database_url, "SELECT base_salience, reinforced_at FROM memory_records WHERE id=%s", old_id)
    clock.advance(hours=1)
    new_id = membrane.revisions.supersede(
        old_id,
        {
            "record": {"object": "Berlin", "sensitivity": "medium", "valid_from": "2026-01-01T00:00:00Z"},
            "rationale": "moved",
            "evidence": EVIDENCE,
        },
        TrustPolicy(actor="alice"),
    )
    old, new = membrane.get(old_id), membrane.get(new_id)
    assert old.status.value == "retracted" and old.retracted_at == clock.now
    assert new.status.value == "active" and new.recorded_at == clock.now
    assert new.payload is not None and new.payload["object"] == "Berlin"
    assert new.payload["supersedes"] == str(old_id)
    assert old.payload is not None and old.payload["superseded_by"] == str(new_id)
    assert new.sensitivity is Sensitivity.MEDIUM  # max(low, medium)
    assert new.validity is not None and new.validity.valid_from is not None
    assert {(r.predicate, r.target_id) for r in new.relations} == {("supersedes", old_id)}
    assert ("superseded_by", new_id) in {(r.predicate, r.target_id) for r in old.relations}
    # RFC 5.3: the retracted record's salience is untouched
    after = row(database_url, "SELECT base_salience, reinforced_at FROM memory_records WHERE id=%s", old_id)
    assert after == before
    # RFC 5.4: the old key is tombstoned, with who and why; the new key is not
    assert tombstones(database_url) == {("proj", "user", "lives_in", "paris")}
    assert row(database_url, "SELECT actor, rationale, record_id FROM fact_tombstones") == (
        "alice",
        "moved",
        old_id,
    )
    # new fact key columns in sync (RFC 3.4)
    assert row(
        database_url,
        "SELECT fact_subject, fact_predicate, fact_object FROM memory_records WHERE id=%s",
        new_id,
    ) == ("user", "lives_in", "berlin")
    old_audit = membrane.audit(old_id).entries
    assert [(e.action, e.actor, e.rationale) for e in old_audit][-1] == ("revise", "alice", "moved")
    new_audit = membrane.audit(new_id).entries
    assert [(e.action, e.rationale) for e in new_audit] == [("create", "moved")]
    assert new_audit[0].details["supersedes"] == str(old_id)
    assert row(
        database_url, "SELECT count(*) FROM work_items WHERE target_id=%s AND kind='decay'", new_id
    ) == (1,)


def test_supersede_same_key_leaves_no_tombstone(membrane: Membrane, database_url: str) -> None:
    old_id = observe(membrane, "sky", "is", "blue")
    new_id = membrane.revisions.supersede(
        old_id,
        {"record": {"valid_to": "2030-01-01T00:00:00Z"}, "rationale": "bounded", "evidence": EVIDENCE},
        TrustPolicy(),
    )
    assert membrane.get(new_id).status.value == "active"
    assert membrane.get(old_id).status.value == "retracted"  # positive control: it ran
    assert tombstones(database_url) == set()


def test_semantic_revision_without_evidence_is_refused(membrane: Membrane, database_url: str) -> None:
    fact = observe(membrane, "a", "b", "c")
    with pytest.raises(errors.RevisionRefused):
        membrane.revisions.supersede(fact, {"record": {"object": "d"}, "rationale": "x"}, TrustPolicy())
    assert membrane.get(fact).status.value == "active"
    assert row(database_url, "SELECT count(*) FROM memory_records") == (2,)
    with pytest.raises(errors.RevisionRefused):
        membrane.revisions.fork(fact, {"record": {"object": "d"}, "rationale": "x"}, TrustPolicy())
    # positive control: with provenance instead of evidence it goes through
    new = membrane.revisions.supersede(
        fact,
        {"record": {"object": "d", "provenance": [{"kind": "artifact", "ref": "doc://1"}]}, "rationale": "x"},
        TrustPolicy(),
    )
    assert membrane.get(new).payload["object"] == "d"  # type: ignore[index]


def test_episodic_records_refuse_revision(membrane: Membrane) -> None:
    res = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "proj",
            "content": {"subject": "x", "predicate": "y", "object": "z"},
        }
    )
    episode, fact = res.record_ids
    for kind, body in [
        ("supersede", {"record": {"object": "w"}, "rationale": "r", "evidence": EVIDENCE}),
        ("fork", {"rationale": "r", "evidence": EVIDENCE}),
        ("retract", {"rationale": "r"}),
        ("contest", {"rationale": "r"}),
    ]:
        with pytest.raises(errors.RevisionRefused):
            membrane.revisions.apply(kind, episode, body, TrustPolicy())
    assert membrane.get(episode).status.value == "active"
    # salience is not content: an episode may be reinforced
    assert membrane.revisions.apply("reinforce", episode, {}, TrustPolicy()) == [episode]
    assert membrane.revisions.apply("retract", fact, {"rationale": "r"}, TrustPolicy()) == [fact]


def test_inferred_cannot_supersede_asserted_without_force(membrane: Membrane) -> None:
    fact = observe(membrane, "service", "runs on", "port 80")  # asserted: observation, 0.7
    body = {"record": {"object": "port 8080"}, "rationale": "extracted", "evidence": EVIDENCE}
    with pytest.raises(errors.RevisionRefused):
        membrane.revisions.supersede(fact, body, TrustPolicy(actor="extractor:llm"))
    low = {**body, "record": {"object": "port 8080", "confidence": 0.3}}
    with pytest.raises(errors.RevisionRefused):
        membrane.revisions.supersede(fact, low, TrustPolicy(actor="alice"))
    assert membrane.get(fact).status.value == "active"
    new = membrane.revisions.supersede(fact, {**body, "force": True}, TrustPolicy(actor="extractor:llm"))
    assert membrane.get(fact).status.value == "retracted"
    # an inferred record may be superseded by another inferred one
    newer = membrane.revisions.supersede(
        new, {**body, "record": {"object": "port 9090"}}, TrustPolicy(actor="extractor:llm")
    )
    assert membrane.get(newer).status.value == "active"
    # a user's correction of an inferred record is an assertion (confidence raised to 0.6) ...
    mine = membrane.revisions.supersede(
        newer, {**body, "record": {"object": "port 443"}}, TrustPolicy(actor="alice")
    )
    assert membrane.get(mine).confidence >= 0.6
    # ... which an extractor may not overwrite again without force
    with pytest.raises(errors.RevisionRefused):
        membrane.revisions.supersede(mine, body, TrustPolicy(actor="extractor:llm"))
    assert membrane.get(mine).status.value == "active"


def test_trust_rechecked_hidden_is_not_found(membrane: Membrane) -> None:
    secret = observe(membrane, "k", "is", "v", scope="secret")
    high = observe(membrane, "h", "is", "v", scope="proj", sensitivity="high")
    reader_only = TrustPolicy(
        read_scopes=frozenset({"proj", "secret"}), write_scopes=frozenset({"proj"}), actor="bob"
    )
    outsider = TrustPolicy(
        read_scopes=frozenset({"proj"}), write_scopes=frozenset({"proj"}), max_sensitivity=Sensitivity.LOW
    )
    body = {"rationale": "no"}
    with pytest.raises(errors.NotFound) as hidden:
        membrane.revisions.retract(secret, body, outsider)
    with pytest.raises(errors.NotFound) as missing:
        membrane.revisions.retract(uuid.uuid4(), body, outsider)
    assert hidden.value.code == missing.value.code and "not found" in hidden.value.message
    with pytest.raises(errors.NotFound):  # two levels above: hidden
        membrane.revisions.reinforce(high, {}, outsider)
    with pytest.raises(errors.Forbidden):  # readable but not writable
        membrane.revisions.retract(secret, body, reader_only)
    medium = TrustPolicy(max_sensitivity=Sensitivity.MEDIUM)
    with pytest.raises(errors.Forbidden):  # seen only redacted
        membrane.revisions.retract(high, body, medium)
    assert membrane.get(secret).status.value == "active"
    assert membrane.revisions.retract(secret, body, TrustPolicy()) == [secret][0]


def test_fork_keeps_both_active(membrane: Membrane) -> None:
    fact = observe(membrane, "deploy", "uses", "blue green")
    variant = membrane.revisions.fork(
        fact,
        {
            "record": {"object": "canary"},
            "condition": "region = eu",
            "rationale": "eu differs",
            "evidence": EVIDENCE,
        },
        TrustPolicy(actor="ops"),
    )
    old, new = membrane.get(fact), membrane.get(variant)
    assert old.status.value == "active" and new.status.value == "active"
    assert ("derived_from", fact) in {(r.predicate, r.target_id) for r in new.relations}
    assert new.validity is not None and new.validity.mode.value == "conditional"
    assert new.payload is not None  # conditions live in the payload's validity
    assert new.payload["validity"]["conditions"] == {"condition": "region = eu"}
    assert [e.action for e in membrane.audit(fact).entries] == ["create", "fork"]


def test_merge_retracts_sources(membrane: Membrane, database_url: str) -> None:
    a = observe(membrane, "db", "is", "postgres 16")
    b = observe(membrane, "database", "version", "16", sensitivity="medium")
    merged = membrane.revisions.merge(
        {
            "record_ids": [str(a), str(b)],
            "record": {"subject": "db", "predicate": "is", "object": "postgres 16"},
            "rationale": "same fact",
        },
        TrustPolicy(actor="ops"),
    )
    m = membrane.get(merged)
    assert m.status.value == "active" and m.sensitivity is Sensitivity.MEDIUM
    assert {r.target_id for r in m.relations if r.predicate == "derived_from"} == {a, b}
    assert membrane.get(a).status.value == "retracted"
    assert membrane.get(b).status.value == "retracted"
    # a's key is carried on by the merged record; only b's is tombstoned
    assert tombstones(database_url) == {("proj", "database", "version", "16")}
    assert [e.action for e in membrane.audit(b).entries] == ["create", "merge"]
    with pytest.raises(errors.RevisionRefused):  # a retracted source cannot be merged again
        membrane.revisions.merge({"record_ids": [a, merged], "rationale": "again"}, TrustPolicy())


def test_retract_and_contest(membrane: Membrane, database_url: str, clock) -> None:
    fact = observe(membrane, "cat", "color", "black")
    other = observe(membrane, "cat", "color", "white")
    hidden = observe(membrane, "cat", "color", "grey", scope="secret")
    caller = TrustPolicy(read_scopes=frozenset({"proj"}), write_scopes=frozenset({"proj"}), actor="carol")
    clock.advance(minutes=5)
    assert (
        membrane.revisions.contest(
            fact, {"rationale": "saw white", "contesting_record_id": str(other)}, caller
        )
        == fact
    )
    view = membrane.get(fact)
    assert view.status.value == "contested"
    assert ("contested_by", other) in {(r.predicate, r.target_id) for r in view.relations}
    assert ("contests", fact) in {(r.predicate, r.target_id) for r in membrane.get(other).relations}
    assert row(database_url, "SELECT contested_at FROM memory_records WHERE id=%s", fact) == (clock.now,)
    # a hidden contesting record behaves exactly like a missing one
    membrane.revisions.contest(other, {"rationale": "r", "contesting_record_id": str(hidden)}, caller)
    membrane.revisions.contest(other, {"rationale": "r", "contesting_record_id": str(uuid.uuid4())}, caller)
    entries = membrane.audit(other).entries
    assert entries[-1].details == entries[-2].details == {"operation": "contest"}
    assert not [r for r in membrane.get(other).relations if r.predicate == "contested_by"]
    base = row(database_url, "SELECT base_salience FROM memory_records WHERE id=%s", fact)
    membrane.revisions.retract(fact, {"rationale": "wrong"}, caller)
    got = row(
        database_url, "SELECT status, retracted_at, base_salience FROM memory_records WHERE id=%s", fact
    )
    assert got == ("retracted", clock.now, base[0])
    assert row(database_url, "SELECT actor, rationale FROM fact_tombstones") == ("carol", "wrong")
    with pytest.raises(errors.RevisionRefused):
        membrane.revisions.retract(fact, {"rationale": "again"}, caller)


def test_reinforce_and_penalize_closed_form(membrane: Membrane, database_url: str, clock) -> None:
    fact = observe(membrane, "x", "likes", "tea")
    clock.advance(days=30)  # one semantic half-life: 0.5
    membrane.revisions.reinforce(fact, {"rationale": "seen"}, TrustPolicy())
    got = row(database_url, "SELECT base_salience, reinforced_at FROM memory_records WHERE id=%s", fact)
    assert got[0] == pytest.approx(0.6) and got[1] == clock.now
    due = row(database_url, "SELECT due_at FROM work_items WHERE kind='decay' AND target_id=%s", fact)[0]
    assert (due - clock.now).total_seconds() == 30 * 86400
    clock.advance(days=30)  # 0.3
    membrane.revisions.penalize(fact, {"amount": 0.2}, TrustPolicy())
    assert membrane.get(fact).salience == pytest.approx(0.1)
    entries = membrane.audit(fact).entries
    assert [e.action for e in entries] == ["create", "reinforce", "decay"]
    assert entries[1].details["after"] == pytest.approx(0.6)


def test_reinforcement_gain_per_type(settings, db, clock) -> None:
    gains = dict(Policy().reinforcement_gain)
    gains[next(t for t in gains if t.value == "semantic")] = 0.3
    m = Membrane(settings, database=db, clock=clock, policy=Policy(reinforcement_gain=gains))
    fact = observe(m, "a", "b", "c")
    ev = m.capture({"source_kind": "event", "scope": "proj", "content": {"text": "t"}}).record_ids[0]
    clock.advance(days=30)
    m.revisions.reinforce(fact, {}, TrustPolicy())
    assert m.get(fact).salience == pytest.approx(0.8)
    m.revisions.reinforce(ev, {}, TrustPolicy())  # episodic keeps the default 0.1
    assert m.get(ev).salience == pytest.approx(0.01 + 0.1)  # from its floor 0.01


def test_invalid_bodies_name_fields(membrane: Membrane) -> None:
    fact = observe(membrane, "a", "b", "c")
    with pytest.raises(errors.InvalidInput) as info:
        membrane.revisions.apply("retract", fact, {"rationale": "  "}, TrustPolicy())
    assert info.value.details[0]["field"] == "rationale"
    with pytest.raises(errors.InvalidInput):
        membrane.revisions.apply("merge", None, {"record_ids": [str(fact)], "rationale": "r"}, TrustPolicy())
    for kind in ("capture", "bogus"):
        with pytest.raises(errors.InvalidInput):
            membrane.revisions.apply(kind, fact, {}, TrustPolicy())
    with pytest.raises(errors.InvalidInput):  # non-semantic revisions need a full payload
        membrane.revisions.apply(
            "supersede",
            fact,
            {"record": {"payload": {"x": 1}}, "rationale": "r", "evidence": EVIDENCE},
            TrustPolicy(),
        )
    assert membrane.revisions.apply("retract", fact, {"rationale": "ok"}, TrustPolicy()) == [fact]


def test_supersede_non_semantic_takes_a_payload(membrane: Membrane, database_url: str) -> None:
    state = {"thread_id": "t1", "task_state": "executing", "context_summary": "step 1"}
    old = membrane.capture({"source_kind": "working_state", "scope": "proj", "content": state}).record_ids[0]
    with pytest.raises(errors.InvalidInput):  # semantic fields do not fit a working record
        membrane.revisions.supersede(old, {"record": {"object": "x"}, "rationale": "r"}, TrustPolicy())
    new = membrane.revisions.supersede(
        old,
        {
            "record": {"payload": {**state, "task_state": "done", "context_summary": "finished"}},
            "rationale": "task done",
        },
        TrustPolicy(actor="agent"),
    )
    view = membrane.get(new)
    assert view.type.value == "working" and view.payload is not None
    assert view.payload["task_state"] == "done"
    assert membrane.get(old).status.value == "retracted"
    assert tombstones(database_url) == set()
