"""Short sequences of review (RFC 5.7) that the correction machine found wrong: a proposed
observation stated an edge between entities, which every reader of them saw and which
outlived its rejection (RFC 3.5.4); an amended proposal's episode got none of the work an
approved one gets (RFC 6.4)."""

from __future__ import annotations

from typing import Any

from membrane_core import Membrane
from membrane_core.testing import FakeClock
from membrane_core.trust import TrustPolicy
from tests.support.sql import rows

MODEL = TrustPolicy(actor="model", review_required=True)
WRITER = TrustPolicy(actor="writer")
REVIEWER = TrustPolicy(actor="reviewer", reviewer=True)


def observe(m: Membrane, predicate: str, trust: TrustPolicy) -> Any:
    body = {
        "source_kind": "observation",
        "scope": "a",
        "content": {"subject": "Ada", "predicate": predicate, "object": "Paris"},
    }
    return m.captures.capture_many([body], trust)[0]


def entity_edges(m: Membrane) -> set[str]:
    """The predicates of the edges between entities one hop from the query's roots."""
    got = m.retrieve({"query": "Ada Paris", "scopes": ["a"], "expand": {"hops": 1}}, WRITER)
    entities = {v.id for v in [*got.records, *got.neighbors] if v.type.value == "entity"}
    return {e.predicate for e in got.edges if e.source_id in entities and e.target_id in entities}


def test_a_proposed_observation_adds_no_edge_between_entities(membrane: Membrane, clock: FakeClock) -> None:
    trusted = observe(membrane, "knows", WRITER)  # the entities Ada and Paris, and their edge
    assert trusted.entities is not None and trusted.entities["relations"] == 1
    clock.advance(seconds=1)
    proposed = observe(membrane, "works at", MODEL)
    assert proposed.proposal_id is not None
    assert proposed.entities is not None and proposed.entities["linked"] == 2
    assert proposed.entities["relations"] == 0
    clock.advance(seconds=1)
    assert entity_edges(membrane) == {"knows"}  # the trusted edge, in the same expansion
    out = membrane.review.decide(
        {"decisions": [{"proposal_id": proposed.proposal_id, "decision": "reject"}]}, REVIEWER
    ).results[0]
    assert out.outcome == "rejected", out.error
    assert entity_edges(membrane) == {"knows"}


def test_an_amended_proposal_gets_the_work_of_an_approved_one(membrane: Membrane, database_url: str) -> None:
    """RFC 5.7, 6.4: the episodes of an approved or amended proposal get the consolidation,
    extraction and compression items a trusted capture gets; a pending one none."""

    def work(episode: Any) -> list[tuple[Any, ...]]:
        return rows(
            database_url,
            "SELECT kind FROM work_items WHERE target_id = %s AND kind <> 'decay' ORDER BY kind",
            episode,
        )

    approved, amended, pending = (observe(membrane, p, MODEL) for p in ("lives in", "works at", "visits"))
    decisions = [
        {"proposal_id": approved.proposal_id, "decision": "approve"},
        {"proposal_id": amended.proposal_id, "decision": "amend", "record": {"object": "Lyon"}},
    ]
    outcomes = membrane.review.decide({"decisions": decisions}, REVIEWER).results
    assert [o.outcome for o in outcomes] == ["approved", "amended"], outcomes
    assert work(approved.record_ids[0]) == [("compress",)]  # control: the approved episode
    assert work(amended.record_ids[0]) == [("compress",)]
    assert work(pending.record_ids[0]) == []
