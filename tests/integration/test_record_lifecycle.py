"""A record's lifecycle through every later path (RFC 5, 6.1).

Repeated decay equals the closed form; a retracted or superseded record stays out of default
retrieval and graph expansion, is not revived by capture or consolidation, and is spared by
prune; its audit history survives deletion; a contested fact ranks below an uncontested one;
as-of reads answer on either side of a supersede.

Each exclusion is asserted beside something that must appear in the same result.
"""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from membrane_core import Membrane, decay
from membrane_core.models import DecayProfile
from membrane_core.trust import TrustPolicy
from tests.support.sql import STORED_SALIENCE

EVIDENCE = [{"kind": "observation", "ref": "user said so"}]
ME = TrustPolicy(actor="user")


def obs(s: str, p: str, o: str, scope: str = "proj") -> dict[str, Any]:
    return {
        "source_kind": "observation",
        "scope": scope,
        "content": {"subject": s, "predicate": p, "object": o},
    }


def fact(m: Membrane, s: str, p: str, o: str) -> uuid.UUID:
    res = m.capture(obs(s, p, o))
    assert res.fact == "created"
    return res.record_ids[1]


def stored(url: str, record_id: uuid.UUID, cols: str) -> tuple[Any, ...]:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT {cols} FROM memory_records r WHERE id = %s", (record_id,)).fetchone()
        assert row is not None, f"record {record_id} is gone"
        return tuple(row)


def facts(m: Membrane, query: str, **options: Any) -> Any:
    return m.retrieve({"memory_types": ["semantic"], "query": query, **options})


def ids(records: list[Any]) -> list[uuid.UUID]:
    return [r.id for r in records]


# -- decay applied twice equals the closed form (RFC 6.1) ----------------------------


def test_decay_applied_twice_equals_closed_form(membrane: Membrane, database_url: str, clock) -> None:
    start = clock.now
    ep = membrane.capture(
        {"source_kind": "event", "scope": "proj", "content": {"text": "deploy finished"}}
    ).record_ids[0]
    profile = DecayProfile(half_life_seconds=3600, min_salience=0.01)
    clock.advance(hours=1)
    first = membrane.maintenance.run("decay")
    assert stored(database_url, ep, STORED_SALIENCE)[0] == pytest.approx(0.5)
    clock.advance(hours=1)
    second = membrane.maintenance.run("decay")
    assert first.get("refreshed") == 1 and second.get("refreshed") == 1  # one sweep each
    closed = decay.salience_at(1.0, start, profile, clock.now, pinned=False)
    assert closed == pytest.approx(0.25)
    # the stored checkpoint after two sweeps equals the closed form, not 0.5 * 0.25 = 0.125
    assert stored(database_url, ep, STORED_SALIENCE)[0] == pytest.approx(closed)
    assert membrane.get(ep).salience == pytest.approx(closed)
    # a third sweep at the same moment changes nothing; evaluating twice is idempotent
    membrane.maintenance.run("decay")
    assert stored(database_url, ep, STORED_SALIENCE)[0] == pytest.approx(closed)
    assert decay.salience_at(1.0, start, profile, clock.now, pinned=False) == closed


# -- retrieve after retract with DEFAULT options (RFC 5.1) ------------------------


def test_retrieve_after_retract_default_options(membrane: Membrane) -> None:
    wrong = fact(membrane, "office", "located in", "Lyon")
    right = fact(membrane, "office", "opens at", "nine")
    membrane.revisions.retract(wrong, {"rationale": "typo"}, ME)
    got = membrane.retrieve({"query": "office"})  # no min_salience, no flags
    assert right in ids(got.records)
    assert wrong not in ids(got.records)
    # one hop from its own episode (a root here) the retracted fact stays out too
    wide = membrane.retrieve({"query": "office", "expand": {"hops": 1}})
    episode = next(r.target_id for r in membrane.get(wrong).relations if r.predicate == "derived_from")
    assert episode in ids(wide.records)  # the retracted fact is one hop from this root
    roots_and_neighbours = ids(wide.records) + ids(wide.neighbors)
    assert right in roots_and_neighbours
    assert wrong not in roots_and_neighbours
    assert all(wrong not in (e.source_id, e.target_id) for e in wide.edges)
    # audit views can still ask for it, and it is marked
    audit_view = membrane.retrieve({"query": "office", "include_retracted": True})
    marked = {r.id: r.status.value for r in audit_view.records}
    assert marked.get(wrong) == "retracted" and marked.get(right) == "active"


# -- graph expansion around a superseded record (RFC 5.1, 8.4) -----------------------


def test_graph_expansion_around_superseded_record(membrane: Membrane) -> None:
    old = fact(membrane, "team", "meets in", "Paris")
    new = membrane.revisions.supersede(
        old, {"record": {"object": "Berlin"}, "rationale": "moved", "evidence": EVIDENCE}, ME
    )
    variant = membrane.revisions.fork(
        new,
        {
            "record": {"object": "Potsdam"},
            "condition": "in summer",
            "rationale": "summer",
            "evidence": EVIDENCE,
        },
        ME,
    )
    for hops in (1, 2, 3):
        got = membrane.retrieve({"query": "Berlin", "min_salience": 0.5, "expand": {"hops": hops}})
        assert ids(got.records)[:1] == [new]
        neighbours = ids(got.neighbors)
        assert variant in neighbours  # positive control: expansion ran and found a live node
        assert old not in neighbours and old not in ids(got.records)
        assert all(old not in (e.source_id, e.target_id) for e in got.edges)
    # the edge exists: asked for, the superseded record is one hop away, marked retracted
    audit = membrane.retrieve({"query": "Berlin", "include_retracted": True, "expand": {"hops": 1}})
    assert {n.id: n.status.value for n in audit.neighbors}.get(old) == "retracted"
    # by id the replacement's supersedes edge is still shown, the old record marked
    assert membrane.get(old).status.value == "retracted"


# -- consolidation after a retraction leaves the fact retracted (RFC 5.4, 6.4) --------


def test_consolidation_after_retraction_leaves_fact_retracted(
    membrane: Membrane, database_url: str, clock
) -> None:
    wrong = fact(membrane, "build", "uses", "make")
    membrane.revisions.retract(wrong, {"rationale": "we use bazel"}, ME)
    before = stored(database_url, wrong, "status, base_salience, reinforced_at")
    clock.advance(minutes=1)
    # the same observation captured again: not revived, not re-created
    assert membrane.capture(obs("Build", "uses", "MAKE")).fact == "tombstoned"
    # a successful episode that states it again, beside a new fact (positive control)
    membrane.capture(
        {
            "source_kind": "event",
            "scope": "proj",
            "content": {
                "text": "ci green",
                "outcome": "success",
                "facts": [
                    {"subject": "build", "predicate": "uses", "object": "make"},
                    {"subject": "build", "predicate": "runs on", "object": "linux"},
                ],
            },
        }
    )
    report = membrane.maintenance.run("consolidate")
    assert report["consolidate"]
    with psycopg.connect(database_url) as conn:
        live = conn.execute(
            "SELECT fact_object, status FROM memory_records WHERE type = 'semantic' "
            "AND fact_subject = 'build' ORDER BY fact_object"
        ).fetchall()
    assert ("linux", "active") in live  # consolidation ran and promoted the new fact
    assert ("make", "active") not in live and ("make", "contested") not in live
    assert stored(database_url, wrong, "status, base_salience, reinforced_at") == before
    got = membrane.retrieve({"query": "build"})
    assert wrong not in ids(got.records) and len(got.records) >= 1


# -- audit history survives every lifecycle; prune spares retracted and contested (RFC 5.5, 6.3)


def test_audit_history_survives_every_lifecycle(membrane: Membrane, clock) -> None:
    f = fact(membrane, "cache", "ttl", "60s")
    clock.advance(hours=1)
    membrane.revisions.reinforce(f, {"rationale": "used"}, ME)
    membrane.revisions.contest(f, {"rationale": "maybe 30s"}, ME)
    g = membrane.revisions.supersede(
        f, {"record": {"object": "30s"}, "rationale": "checked", "evidence": EVIDENCE}, ME
    )
    membrane.revisions.retract(g, {"rationale": "config removed"}, ME)
    # prune and decay sweeps far in the future never delete retracted or contested records
    clock.advance(days=3650)
    membrane.maintenance.run("decay")
    membrane.maintenance.run("prune")
    assert membrane.get(f).status.value == "retracted"
    membrane.delete(f, ME, "cleanup")
    membrane.delete(g, ME, "cleanup")
    hf, hg = membrane.audit(f), membrane.audit(g)
    assert [(e.action, e.details.get("operation")) for e in hf.entries] == [
        ("create", None),
        ("reinforce", "reinforce"),
        ("revise", "contest"),
        ("revise", "supersede"),
        ("delete", "delete"),
    ]
    assert [(e.action, e.details.get("operation")) for e in hg.entries] == [
        ("create", "supersede"),
        ("revise", "retract"),
        ("delete", "delete"),
    ]
    assert hf.chain_valid is True and hg.chain_valid is True
    assert [e.rationale for e in hf.entries][1:] == ["used", "maybe 30s", "checked", "cleanup"]


def test_prune_spares_retracted_and_contested(membrane: Membrane, database_url: str, clock) -> None:
    def episode(text: str) -> uuid.UUID:
        return membrane.capture(
            {
                "source_kind": "working_state",
                "scope": "proj",
                "content": {"thread_id": text, "task_state": "executing", "context_summary": text},
            }
        ).record_ids[0]

    gone, retracted, contested = episode("a"), episode("b"), episode("c")
    membrane.revisions.retract(retracted, {"rationale": "r"}, ME)
    membrane.revisions.contest(contested, {"rationale": "c"}, ME)
    for _ in range(4):  # several sweeps while working memory decays to its floor
        clock.advance(days=10)
        membrane.maintenance.run("decay")
        membrane.maintenance.run("prune")
    with psycopg.connect(database_url) as conn:
        left = {r[0] for r in conn.execute("SELECT id FROM memory_records").fetchall()}
    assert gone not in left  # positive control: prune ran and removed the active one
    assert {retracted, contested} <= left


# -- contested ranks below uncontested; as_of around a supersede ----------------------


def test_contested_ranks_below_uncontested(membrane: Membrane, clock) -> None:
    plain = fact(membrane, "printer", "located near", "kitchen")
    clock.advance(days=20)
    disputed = fact(membrane, "printer", "located on", "floor two")
    membrane.revisions.reinforce(disputed, {}, ME)
    before = facts(membrane, "printer")
    assert ids(before.records) == [disputed, plain]  # fresher and reinforced: first while active
    membrane.revisions.contest(disputed, {"rationale": "moved?", "contesting_record_id": str(plain)}, ME)
    got = facts(membrane, "printer")
    order = ids(got.records)
    assert order.index(plain) < order.index(disputed)
    assert {r.id: r.status.value for r in got.records}[disputed] == "contested"
    excluded = facts(membrane, "printer", include_contested=False)
    assert plain in ids(excluded.records) and disputed not in ids(excluded.records)


def test_as_of_before_and_after_a_supersede(membrane: Membrane, clock) -> None:
    t0 = clock.now
    old = fact(membrane, "ceo", "is", "Ada")
    clock.advance(days=1)
    t_between = clock.now
    clock.advance(days=1)
    t_change = clock.now
    new = membrane.revisions.supersede(
        old, {"record": {"object": "Grace"}, "rationale": "new ceo", "evidence": EVIDENCE}, ME
    )
    clock.advance(days=1)
    then = facts(membrane, "ceo", as_of=t_between.isoformat())
    assert old in ids(then.records) and new not in ids(then.records)
    assert {r.id: r.status.value for r in then.records}[old] == "active"
    after = facts(membrane, "ceo", as_of=(t_change + timedelta(seconds=1)).isoformat())
    assert new in ids(after.records) and old not in ids(after.records)
    now = facts(membrane, "ceo")
    assert ids(now.records) == [new]
    before_all = facts(membrane, "ceo", as_of=(t0 - timedelta(days=1)).isoformat())
    assert before_all.records == []
    assert then.records  # positive control for the empty result above
