"""Derived information never carries a source's content below its sensitivity (RFC 7.4)."""

from __future__ import annotations

import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.trust import TrustPolicy


def test_a_more_sensitive_observation_of_a_fact_is_a_fact_of_its_own(membrane: Membrane) -> None:
    """RFC 3.4, 7.4: a capture's fact meets facts at its own level only, so the low fact
    neither absorbs the high source nor disappears from low readers."""
    low_reader = TrustPolicy(read_scopes=frozenset({"p"}), max_sensitivity=Sensitivity.LOW)
    obs = {
        "source_kind": "observation",
        "scope": "p",
        "content": {"subject": "ann", "predicate": "likes", "object": "tea"},
    }
    first = membrane.capture(obs)
    fact_id = first.record_ids[1]
    assert membrane.get(fact_id, low_reader).redacted is False  # positive control
    again = membrane.capture(obs)
    assert again.fact == "reinforced" and again.record_ids[1] == fact_id  # same level: one fact
    secret = membrane.capture({**obs, "sensitivity": "high"})
    assert secret.fact == "created" and secret.record_ids[1] != fact_id
    assert membrane.get(secret.record_ids[1]).sensitivity is Sensitivity.HIGH
    assert membrane.get(fact_id).sensitivity is Sensitivity.LOW
    with pytest.raises(errors.NotFound):
        membrane.get(secret.record_ids[1], low_reader)  # two levels above: invisible
    found = membrane.retrieve({"query": "ann tea"}, low_reader)
    text = found.model_dump_json()
    assert str(secret.record_ids[0]) not in text and str(secret.record_ids[1]) not in text
    assert {first.record_ids[0], fact_id} <= {r.id for r in found.records}  # low stays low
    assert {fact_id, secret.record_ids[1]} <= {
        r.id for r in membrane.retrieve({"query": "ann tea"}).records
    }  # a reader of both levels sees both


def test_entity_edge_from_a_more_sensitive_observation_is_not_written(membrane: Membrane) -> None:
    low_reader = TrustPolicy(read_scopes=frozenset({"p"}), max_sensitivity=Sensitivity.LOW)
    membrane.capture(
        {
            "source_kind": "event",
            "scope": "p",
            "content": {"text": "met them", "entities": ["Ann Smith", "Oncology Ward", "Cafe Uno"]},
        }
    )
    membrane.capture(
        {
            "source_kind": "observation",
            "scope": "p",
            "sensitivity": "high",
            "content": {"subject": "Ann Smith", "predicate": "admitted to", "object": "Oncology Ward"},
        }
    )
    membrane.capture(
        {
            "source_kind": "observation",
            "scope": "p",
            "content": {"subject": "Ann Smith", "predicate": "eats at", "object": "Cafe Uno"},
        }
    )
    found = membrane.retrieve(
        {"query": "Ann Smith", "memory_types": ["entity"], "expand": {"hops": 1}}, low_reader
    )
    text = found.model_dump_json()
    assert "eats_at" in text  # positive control: the low observation's edge
    assert "admitted_to" not in text
