"""A view never names a record its caller may not see, nor, as of a time, one made after it
(RFC 2.5, 5.5, 5.6, 7.3).

A supersede writes the replacement's id three times: as a relation, into the old fact's
payload (``superseded_by``) and into its audit entry. Each test reads the old fact as a
caller who may see the replacement (the id is there: the positive control) and as one who
may not (the id is nowhere in the answer).
"""

from __future__ import annotations

import uuid

import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

LOW = TrustPolicy(read_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.LOW, actor="low")
EVIDENCE = [{"kind": "artifact", "ref": "doc:1"}]


def fact(m: Membrane, obj: str) -> uuid.UUID:
    return m.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "content": {"subject": "project", "predicate": "codename", "object": obj},
        }
    ).record_ids[1]


def supersede(m: Membrane, old: uuid.UUID, record: dict[str, object]) -> uuid.UUID:
    return m.revisions.supersede(
        old, {"record": record, "rationale": "renamed", "evidence": EVIDENCE}, DEVELOPMENT_POLICY
    )


@pytest.fixture
def into_hyper(membrane: Membrane) -> tuple[uuid.UUID, uuid.UUID]:
    old = fact(membrane, "bluebird")
    new = supersede(membrane, old, {"object": "nightjar", "sensitivity": "hyper"})
    with pytest.raises(errors.NotFound):
        membrane.get(new, LOW)
    return old, new


def test_by_id(membrane: Membrane, into_hyper: tuple[uuid.UUID, uuid.UUID]) -> None:
    old, new = into_hyper
    full = membrane.get(old)
    assert full.payload is not None and full.payload["superseded_by"] == str(new)
    assert ("superseded_by", new) in {(r.predicate, r.target_id) for r in full.relations}
    low = membrane.get(old, LOW)
    assert low.payload is not None and low.payload["object"] == "bluebird"
    assert low.payload["superseded_by"] is None
    assert str(new) not in low.model_dump_json()


def test_retrieve(membrane: Membrane, into_hyper: tuple[uuid.UUID, uuid.UUID]) -> None:
    old, new = into_hyper
    query = {"query": "project codename bluebird", "include_retracted": True, "expand": {"hops": 1}}
    full = membrane.retrieve(query)
    root = next(r for r in full.records if r.id == old)
    assert root.payload is not None and root.payload["superseded_by"] == str(new)
    low = membrane.retrieve(query, LOW)
    assert old in {r.id for r in low.records}
    assert str(new) not in low.model_dump_json()


def test_audit(membrane: Membrane, into_hyper: tuple[uuid.UUID, uuid.UUID]) -> None:
    old, new = into_hyper
    assert membrane.audit(old).entries[-1].details["superseded_by"] == str(new)
    low = membrane.audit(old, LOW)
    assert low.entries[-1].details["operation"] == "supersede"  # the entry is shown in full
    assert str(new) not in low.model_dump_json()


def test_as_of(membrane: Membrane, clock: FakeClock) -> None:
    old = fact(membrane, "bluebird")
    clock.advance(hours=1)
    then = clock.now
    clock.advance(hours=1)
    new = supersede(membrane, old, {"object": "nightjar"})
    now = membrane.get(old)
    assert now.payload is not None and now.payload["superseded_by"] == str(new)
    with pytest.raises(errors.NotFound):
        membrane.get(new, as_of=then)
    past = membrane.get(old, as_of=then)
    assert past.status.value == "active" and past.payload is not None
    assert str(new) not in past.model_dump_json()
    query = {"query": "project codename bluebird nightjar", "expand": {"hops": 1}}
    assert str(new) in membrane.retrieve(query).model_dump_json()
    got = membrane.retrieve({**query, "as_of": then.isoformat()})
    assert old in {r.id for r in got.records}
    assert str(new) not in got.model_dump_json()


def test_as_of_entity_arm(membrane: Membrane, clock: FakeClock) -> None:
    """RFC 5.6: the entity arm follows only the links made by as_of."""
    membrane.retriever.adjacent = False  # the entity arm alone, no adjacent episodes (8.2.1)
    membrane.capture(
        {
            "source_kind": "event",
            "scope": "a",
            "content": {"text": "met Zorblax at the harbour", "entities": ["Zorblax"]},
        }
    )
    later = membrane.capture(
        {"source_kind": "event", "scope": "a", "content": {"text": "quarterly numbers were fine"}}
    ).record_ids[0]
    clock.advance(hours=1)
    then = clock.now
    query = {"query": "Zorblax", "limit": 10}
    before = membrane.retrieve(query)
    entity = next(r.id for r in before.records if r.type.value == "entity")
    clock.advance(hours=1)
    membrane.revisions.contest(
        entity, {"rationale": "disputed", "contesting_record_id": str(later)}, DEVELOPMENT_POLICY
    )
    now = membrane.retrieve(query)  # control: the new link brings the record in
    assert now.diagnostics.arms.entity == before.diagnostics.arms.entity + 1
    assert later in {r.id for r in now.records}
    past = membrane.retrieve({**query, "as_of": then.isoformat()})
    assert past.diagnostics.arms.entity == before.diagnostics.arms.entity
    assert later not in {r.id for r in past.records}


def test_as_of_provenance(membrane: Membrane, clock: FakeClock) -> None:
    """RFC 5.6: as of T a fact shows the sources it had by T, not a later reinforcement's."""
    obs = {
        "source_kind": "observation",
        "scope": "a",
        "content": {"subject": "project", "predicate": "codename", "object": "bluebird"},
    }
    fact_id = membrane.capture(obs).record_ids[1]
    clock.advance(hours=1)
    then = clock.now
    clock.advance(hours=1)
    later = membrane.capture(obs)
    assert later.fact == "reinforced" and later.record_ids[1] == fact_id
    episode = str(later.record_ids[0])
    now = membrane.get(fact_id)
    assert len(now.provenance) == 2 and episode in now.model_dump_json()  # control
    past = membrane.get(fact_id, as_of=then)
    assert len(past.provenance) == 1 and episode not in past.model_dump_json()
    got = membrane.retrieve({"query": "project codename bluebird", "as_of": then.isoformat()})
    root = next(r for r in got.records if r.id == fact_id)
    assert len(root.provenance) == 1 and episode not in got.model_dump_json()
