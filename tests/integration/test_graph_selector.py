"""Graph expansion (RFC 8.4) and the selector (RFC 8.5) through ``Membrane.retrieve``."""

from __future__ import annotations

import dataclasses
import uuid
from datetime import timedelta
from typing import Any

import psycopg
import pytest

from membrane_core import Membrane
from membrane_core.enums import MemoryType, Sensitivity
from membrane_core.models import (
    CompetencePayload,
    DecayProfile,
    Lifecycle,
    MemoryRecord,
    PerformanceStats,
)
from membrane_core.requests import RetrieveRequest
from membrane_core.retrieval import retriever
from membrane_core.storage import records, retrieval
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

LOW_A = TrustPolicy(read_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.LOW)


def ev(text: str, scope: str = "a", sensitivity: str = "low") -> dict[str, object]:
    return {"source_kind": "event", "scope": scope, "sensitivity": sensitivity, "content": {"text": text}}


def put(m: Membrane, text: str, scope: str = "a", sensitivity: str = "low") -> uuid.UUID:
    return m.capture(ev(text, scope, sensitivity)).record_ids[0]


def link(url: str, *edges: tuple[uuid.UUID, str, uuid.UUID]) -> None:
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO relations (source_id, predicate, target_id) VALUES (%s, %s, %s)", edges)


def test_superseded_fact_is_not_a_neighbour(membrane: Membrane, database_url: str) -> None:
    _, old = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "content": {"subject": "db", "predicate": "runs on", "object": "postgres 15"},
        }
    ).record_ids
    new = membrane.revisions.supersede(
        old,
        {
            "record": {"subject": "db", "predicate": "runs on", "object": "postgres 18"},
            "rationale": "upgraded",
            "evidence": [{"kind": "observation", "ref": "ticket-1"}],
        },
        DEVELOPMENT_POLICY,
    )
    note = put(membrane, "upgrade runbook")
    link(database_url, (new, "derived_from", note))
    q = {
        "query": "postgres 18",
        "scopes": ["a"],
        "memory_types": ["semantic"],
        "limit": 1,
        "expand": {"hops": 2},
    }
    got = membrane.retrieve(q)
    assert [r.id for r in got.records] == [new]
    neighbours = {r.id for r in got.neighbors}
    assert old not in neighbours
    assert all(old not in (e.source_id, e.target_id) for e in got.edges)
    assert note in neighbours  # positive control: a live neighbour of the same root
    asked = membrane.retrieve({**q, "include_retracted": True})
    assert old in {r.id for r in asked.neighbors}
    assert {r.id: r.status.value for r in asked.neighbors}[old] == "retracted"


def test_hop_node_and_edge_limits(membrane: Membrane, database_url: str) -> None:
    root = put(membrane, "hub record zeta")
    chain = [put(membrane, f"chain {i}") for i in range(3)]
    star = [put(membrane, f"spoke {i}") for i in range(6)]
    link(
        database_url,
        (root, "next", chain[0]),
        (chain[0], "next", chain[1]),
        (chain[1], "next", chain[2]),
        *[(s, "points_to", root) for s in star],
    )
    q = {"query": "zeta", "scopes": ["a"], "limit": 1}
    two = membrane.retrieve({**q, "expand": {"hops": 2, "max_nodes": 50, "max_edges": 50}})
    got = {r.id for r in two.neighbors}
    assert {chain[0], chain[1], *star} == got and chain[2] not in got
    assert len(two.edges) == 8 and two.diagnostics.expansion is not None
    assert two.diagnostics.expansion.hops == 2
    nodes = membrane.retrieve({**q, "expand": {"hops": 3, "max_nodes": 3, "max_edges": 50}})
    assert len(nodes.neighbors) == 3 and nodes.diagnostics.expansion is not None
    assert nodes.diagnostics.expansion.node_limit_applied
    edges = membrane.retrieve({**q, "expand": {"hops": 3, "max_nodes": 50, "max_edges": 2}})
    assert len(edges.edges) == 2 and edges.diagnostics.expansion is not None
    assert edges.diagnostics.expansion.edge_limit_applied
    kept = {root} | {r.id for r in edges.neighbors}
    assert all(e.source_id in kept and e.target_id in kept for e in edges.edges)
    none = membrane.retrieve({**q, "expand": {"hops": 0}})
    assert none.neighbors == [] and none.edges == []


def test_trust_at_every_hop_and_no_expansion_from_redacted(membrane: Membrane, database_url: str) -> None:
    membrane.retriever.adjacent = False  # expansion alone: no adjacent episodes among the roots (8.2.1)
    root = put(membrane, "anchor kappa")
    visible = put(membrane, "plain neighbour")
    redacted = put(membrane, "medium neighbour", sensitivity="medium")
    behind_redacted = put(membrane, "behind the redacted one")
    hidden_scope = put(membrane, "other scope neighbour", scope="b")
    hidden_sens = put(membrane, "high neighbour", sensitivity="high")
    behind_visible = put(membrane, "two hops through a visible one")
    link(
        database_url,
        (root, "rel", visible),
        (root, "rel", redacted),
        (redacted, "rel", behind_redacted),
        (root, "rel", hidden_scope),
        (hidden_sens, "rel", root),
        (visible, "rel", behind_visible),
    )
    got = membrane.retrieve({"query": "kappa", "limit": 1, "expand": {"hops": 2}}, LOW_A)
    by_id = {r.id: r for r in got.neighbors}
    assert visible in by_id and behind_visible in by_id  # positive controls
    # RFC 8.4, 2.5: relations are followed only to records shown in full
    assert redacted not in by_id and behind_redacted not in by_id
    assert redacted not in {e.target_id for e in got.edges}
    assert hidden_scope not in by_id and hidden_sens not in by_id
    dump = got.model_dump_json()
    assert str(hidden_scope) not in dump and str(hidden_sens) not in dump
    # a redacted root is returned but not expanded from
    med_root = put(membrane, "lambda medium root", sensitivity="medium")
    leaf = put(membrane, "leaf of medium root")
    link(database_url, (med_root, "rel", leaf))
    red = membrane.retrieve({"query": "lambda", "expand": {"hops": 2}}, LOW_A)
    assert [r.id for r in red.records] == [med_root] and red.records[0].redacted
    assert red.neighbors == [] and red.edges == []
    full = membrane.retrieve({"query": "lambda", "expand": {"hops": 2}})
    assert leaf in {r.id for r in full.neighbors}  # positive control with a wider policy


def test_edges_touch_only_records_shown_in_full(membrane: Membrane, database_url: str) -> None:
    """RFC 8.4, 2.5, 7.3: a redacted record's relations, and a root's relations to one, are
    not in its view, so expansion neither follows nor returns them."""
    root = put(membrane, "zebracorn root note")
    friend = put(membrane, "plain neighbour")
    red_in = put(membrane, "medium incoming", sensitivity="medium")
    red_out = put(membrane, "medium outgoing", sensitivity="medium")
    link(database_url, (root, "supports", friend), (red_in, "contradicts", root), (root, "mentions", red_out))
    query = {"query": "zebracorn", "limit": 1, "expand": {"hops": 1}}
    full = membrane.retrieve(query)
    assert {(e.source_id, e.target_id) for e in full.edges} == {
        (root, friend),
        (red_in, root),
        (root, red_out),
    }  # control: all three for a wider caller
    got = membrane.retrieve(query, LOW_A)
    assert [r.id for r in got.records] == [root]
    assert [(e.source_id, e.predicate, e.target_id) for e in got.edges] == [(root, "supports", friend)]
    assert [r.id for r in got.neighbors] == [friend]
    assert [r.target_id for r in got.records[0].relations] == [friend]


def test_neighbours_share_the_byte_budget(membrane: Membrane, database_url: str) -> None:
    root = put(membrane, "budget root mu")
    fat = [put(membrane, "fat " + "y" * 3000 + f" {i}") for i in range(5)]
    link(database_url, *[(root, "rel", f) for f in fat])
    got = membrane.retrieve({"query": "mu", "limit": 1, "max_bytes": 9000, "expand": {"hops": 1}})
    assert [r.id for r in got.records] == [root]
    assert 1 <= len(got.neighbors) < 5
    assert got.diagnostics.bytes <= 9000
    kept = {root} | {r.id for r in got.neighbors}
    assert all(e.target_id in kept for e in got.edges) and len(got.edges) == len(got.neighbors)


def _skill(
    name: str, success: int, failure: int, *, age_days: float, now: object, scope: str = "a"
) -> MemoryRecord:
    reinforced = now - timedelta(days=age_days)  # type: ignore[operator]
    return MemoryRecord(
        id=uuid.uuid4(),
        type=MemoryType.COMPETENCE,
        scope=scope,
        confidence=0.8,
        salience=1.0,
        lifecycle=Lifecycle(decay=DecayProfile(half_life_seconds=30 * 86400), reinforced_at=reinforced),
        payload=CompetencePayload(
            skill_name=name, performance=PerformanceStats(success_count=success, failure_count=failure)
        ),
        summary=name,
        created_at=now,
        updated_at=now,
        recorded_at=now,  # type: ignore[arg-type]
    )


def test_selector_picks_competence_and_reports_gap(membrane: Membrane, clock: object) -> None:
    now = membrane.clock()
    good = _skill("deploy service with helm", 9, 1, age_days=1, now=now)
    poor = _skill("deploy service by hand", 1, 9, age_days=90, now=now)
    hidden = _skill("deploy service secretly", 50, 0, age_days=0, now=now, scope="b")
    batch = records.RowBatch()
    for r in (good, poor, hidden):
        batch.add_record(r, actor="test", rationale="seeded")
    with membrane.db.transaction() as conn:
        batch.flush(conn)
    got = membrane.retrieve({"query": "deploy service", "memory_types": ["competence"]}, LOW_A)
    assert {r.id for r in got.records} == {good.id, poor.id}
    assert got.selection is not None and got.selection.record_id == good.id
    assert got.selection.confidence > 0.2 and not got.selection.needs_more
    membrane.revisions.retract(good.id, {"rationale": "broken"}, DEVELOPMENT_POLICY)
    after = membrane.retrieve({"query": "deploy service", "memory_types": ["competence"]}, LOW_A)
    assert after.selection is not None and after.selection.record_id == poor.id
    none = membrane.retrieve({"query": "deploy", "memory_types": ["episodic"]}, LOW_A)
    assert none.selection is None


def count_calls(monkeypatch: pytest.MonkeyPatch, name: str) -> list[int]:
    """Wrap ``retrieval.<name>`` so that each call appends 1 to the list returned."""
    calls: list[int] = []
    real = getattr(retrieval, name)

    def spy(*args: Any, **kw: Any) -> Any:
        calls.append(1)
        return real(*args, **kw)

    monkeypatch.setattr(retrieval, name, spy)
    return calls


def test_hops_hydrate_what_they_find(
    membrane: Membrane, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RFC 8.4, 8.3: a hop hydrates the neighbours it discovers; a neighbour it did not
    hydrate is hydrated afterwards, so the result is the same either way."""
    root = put(membrane, "orbit root nu")
    moons = [put(membrane, f"moon {i}") for i in range(5)]
    link(database_url, *[(root, "rel", m) for m in moons])
    calls = count_calls(monkeypatch, "bounded_hydrate")
    q = {"query": "nu", "scopes": ["a"], "limit": 1, "expand": {"hops": 1}}
    got = membrane.retrieve(q)
    assert [r.id for r in got.records] == [root]
    assert {r.id for r in got.neighbors} == set(moons) and calls == []  # no statement of its own
    # the hop's own cut: the first max_new unknown neighbours in discovery order
    f = retriever.read_filter(
        RetrieveRequest(scopes=["a"]), DEVELOPMENT_POLICY.narrow(["a"], None), membrane.retriever.clock()
    )
    with membrane.retriever.db.reader() as conn:
        hop = retrieval.graph_hop(
            conn,
            f,
            [root],
            expanded=[],
            known=[root, moons[0]],
            max_rows=201,
            max_edges=100,
            max_new=2,
            max_bytes=1 << 20,
            target_visible=lambda scope, sens: True,
        )
    order = [row.other for row in hop.rows]
    assert set(order) == set(moons)
    assert list(hop.records) == [m for m in order if m != moons[0]][:2]
    # the first hop ran inside the roots statement: no hop statement of its own (RFC 8.4)
    hops = count_calls(monkeypatch, "graph_hop")
    again = membrane.retrieve(q)
    assert [r.model_dump() for r in again.neighbors] == [r.model_dump() for r in got.neighbors]
    assert hops == [] and calls == []
    two = membrane.retrieve({**q, "expand": {"hops": 2}})
    assert {r.id for r in two.neighbors} == set(moons) and hops == [1]  # the second hop
    # without the first hop's hydration, the same neighbours, hydrated afterwards
    real_roots = retrieval.roots

    def unhydrated(*args: Any, **kw: Any) -> retrieval.Roots:
        found = real_roots(*args, **kw)
        assert found.first_hop is not None
        return dataclasses.replace(found, first_hop=retrieval.Hop(found.first_hop.rows, {}))

    monkeypatch.setattr(retrieval, "roots", unhydrated)
    third = membrane.retrieve(q)
    assert [r.model_dump() for r in third.neighbors] == [r.model_dump() for r in got.neighbors]
    assert calls == [1] and hops == [1]
    # when the service keeps other roots than the statement expanded from, it runs the hop
    monkeypatch.setattr(
        retrieval,
        "roots",
        lambda *a, **kw: dataclasses.replace(real_roots(*a, **kw), first_hop=retrieval.Hop([], {})),
    )
    monkeypatch.setattr(membrane.retriever, "_first_hop", lambda found: ([uuid.uuid4()], found.first_hop))
    fourth = membrane.retrieve(q)
    assert {r.id for r in fourth.neighbors} == set(moons) and hops == [1, 1]
