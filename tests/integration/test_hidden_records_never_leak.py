"""Records above the caller's sensitivity, in other scopes, or retracted never leak.

Each path (retrieval roots, graph neighbours, entity lookup, by-id, audit, metrics) is
checked against planted canaries, with a positive control that must appear in the same
result so that an empty answer cannot pass (RFC 5.1, 7.3, 8.4).
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from membrane_core import Membrane, errors
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.records import CALLER, capture, link


@dataclass
class Planted:
    control: uuid.UUID  # scope a, low: must appear
    control_fact: uuid.UUID  # a live fact in scope a: must appear
    neighbour: uuid.UUID  # scope a, low, linked to control: must appear as a neighbour
    redacted: uuid.UUID  # scope a, medium: appears redacted only
    high: uuid.UUID  # scope a, high: two levels above the caller, invisible
    other: uuid.UUID  # scope b, low: invisible
    retracted: uuid.UUID  # scope a, low fact, retracted: excluded by default

    @property
    def hidden(self) -> list[uuid.UUID]:
        return [self.high, self.other]


@pytest.fixture
def planted(membrane: Membrane, database_url: str) -> Planted:
    control = capture(membrane, "canary control note", entities=["Quokka"])
    neighbour = capture(membrane, "ordinary neighbour note")
    redacted = capture(membrane, "canary medium note", sensitivity="medium", entities=["Quokka"])
    high = capture(membrane, "canary high secret", sensitivity="high", entities=["Quokka"])
    other = capture(membrane, "canary other scope", scope="b", entities=["Quokka"])
    fact_src = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "content": {"subject": "canary", "predicate": "lives in", "object": "quokka island"},
        }
    )
    retracted = fact_src.record_ids[1]
    live = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "content": {"subject": "canary", "predicate": "eats", "object": "seeds"},
        }
    ).record_ids[1]
    membrane.revisions.retract(retracted, {"rationale": "wrong"}, DEVELOPMENT_POLICY)
    # every canary is one hop from the control, in both directions
    link(
        database_url,
        (control, "rel", neighbour),
        (control, "rel", redacted),
        (control, "rel", high),
        (other, "rel", control),
        (control, "rel", retracted),
        (high, "rel", neighbour),
    )
    return Planted(control, live, neighbour, redacted, high, other, retracted)


def assert_absent(p: Planted, result_json: str, returned: set[uuid.UUID]) -> None:
    for hidden in p.hidden:
        assert str(hidden) not in result_json
    assert p.retracted not in returned


def test_roots_and_neighbours(membrane: Membrane, planted: Planted) -> None:
    got = membrane.retrieve(
        {
            "query": "canary note secret scope island quokka",
            "limit": 50,
            "expand": {"hops": 2, "max_nodes": 100},
        },
        CALLER,
    )
    roots = {r.id: r for r in got.records}
    neighbours = {r.id: r for r in got.neighbors}
    returned = (
        set(roots) | set(neighbours) | {e.source_id for e in got.edges} | {e.target_id for e in got.edges}
    )
    assert planted.control in roots and planted.control_fact in roots  # positive controls
    assert planted.neighbour in neighbours or planted.neighbour in roots
    assert roots[planted.redacted].redacted and roots[planted.redacted].payload is None
    assert_absent(planted, got.model_dump_json(), returned)
    # the same canaries are visible to a wider policy: the exclusion is trust, not absence
    wide = membrane.retrieve(
        {"query": "canary note secret scope island quokka", "limit": 50, "include_retracted": True}
    )
    assert {planted.high, planted.other, planted.retracted} <= {r.id for r in wide.records}


def test_neighbours_only(membrane: Membrane, planted: Planted) -> None:
    got = membrane.retrieve({"query": "control", "limit": 1, "expand": {"hops": 3}}, CALLER)
    assert [r.id for r in got.records] == [planted.control]
    neighbours = {r.id: r for r in got.neighbors}
    assert planted.neighbour in neighbours  # positive control
    # RFC 8.4, 2.5: a relation to a record not shown in full is not followed, nor returned
    assert planted.redacted not in neighbours
    ends = {e.source_id for e in got.edges} | {e.target_id for e in got.edges}
    assert planted.neighbour in ends and planted.redacted not in ends
    returned = set(neighbours) | ends
    assert_absent(planted, got.model_dump_json(), returned)
    # the control's own relations list drops what the caller cannot see
    rel_targets = {r.target_id for r in got.records[0].relations}
    assert planted.neighbour in rel_targets and planted.high not in rel_targets


def test_entity_lookup(membrane: Membrane, planted: Planted, database_url: str) -> None:
    quokka = next(
        r.id
        for r in membrane.retrieve(
            {"query": "Quokka", "memory_types": ["entity"], "scopes": ["a"]}, CALLER
        ).records
    )
    # the retracted fact mentions the entity too, so only the status filter keeps it out
    link(database_url, (planted.retracted, "mentions", quokka))
    wide = membrane.retrieve({"query": "Quokka", "limit": 50, "include_retracted": True})
    assert planted.retracted in {r.id for r in wide.records}  # the arm does reach it
    got = membrane.retrieve({"query": "Quokka", "limit": 50}, CALLER)
    assert got.diagnostics.arms.entity >= 1
    ids = {r.id for r in got.records}
    assert planted.control in ids  # positive control, linked to the entity
    assert any(r.type.value == "entity" and r.scope == "a" for r in got.records)
    assert all(r.scope == "a" for r in got.records)
    assert_absent(planted, got.model_dump_json(), ids)


def test_by_id(membrane: Membrane, planted: Planted) -> None:
    assert membrane.get(planted.control, CALLER).payload is not None  # positive control
    for hidden in planted.hidden:
        with pytest.raises(errors.NotFound):
            membrane.get(hidden, CALLER)
    red = membrane.get(planted.redacted, CALLER)
    assert red.redacted and red.payload is None and red.relations == []
    marked = membrane.get(planted.retracted, CALLER)
    assert marked.status.value == "retracted"  # by id: returned marked, never as active
    control = membrane.get(planted.control, CALLER)
    assert {r.target_id for r in control.relations} & set(planted.hidden) == set()


def test_audit(membrane: Membrane, planted: Planted) -> None:
    assert membrane.audit(planted.control, CALLER).entries  # positive control
    for hidden in planted.hidden:
        with pytest.raises(errors.NotFound):
            membrane.audit(hidden, CALLER)
    assert membrane.audit(planted.high).entries  # the history exists for a wider policy


def test_metrics(membrane: Membrane, planted: Planted) -> None:
    before = membrane.metrics(CALLER)
    capture(membrane, "another high canary", sensitivity="high")
    capture(membrane, "another other-scope canary", scope="b")
    unchanged = membrane.metrics(CALLER)
    assert unchanged["total_records"] == before["total_records"]
    assert unchanged["total_audit_entries"] == before["total_audit_entries"]
    assert membrane.metrics()["total_records"] > unchanged["total_records"]
    capture(membrane, "a visible record")  # positive control
    after = membrane.metrics(CALLER)
    assert after["total_records"] == before["total_records"] + 1
