"""A capture's fact meets only facts and retractions at its own sensitivity (RFC 3.4, 5.4).

Before, a writer whose maximum is ``low`` that observed the key of a ``hyper`` fact got
``fact: "reinforced"`` and the hidden fact's id: a capture told it what no read would.
Each test shows the other side too: a writer cleared for the hidden level meets it.
"""

from __future__ import annotations

import uuid

import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.results import CaptureResult
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

LOW = TrustPolicy(read_scopes=frozenset({"a"}), write_scopes=frozenset({"a"}),
                  max_sensitivity=Sensitivity.LOW, actor="low-writer")


def observe(m: Membrane, obj: str, sensitivity: str,
            trust: TrustPolicy = DEVELOPMENT_POLICY) -> CaptureResult:
    return m.capture({"source_kind": "observation", "scope": "a", "sensitivity": sensitivity,
                      "content": {"subject": "alice", "predicate": "diagnosed with",
                                  "object": obj}}, trust)


def retract(m: Membrane, fact: uuid.UUID) -> None:
    m.revisions.retract(fact, {"rationale": "wrong"}, DEVELOPMENT_POLICY)


def test_a_hidden_fact_is_not_met(membrane: Membrane) -> None:
    secret = observe(membrane, "condition x", "hyper").record_ids[1]
    assert observe(membrane, "condition x", "hyper").record_ids[1] == secret  # control
    probe = observe(membrane, "condition x", "low", LOW)
    assert probe.fact == "created" and secret not in probe.record_ids
    mine = probe.record_ids[1]
    assert membrane.get(mine, LOW).payload is not None  # the writer's own fact, at its level
    again = observe(membrane, "condition x", "low", LOW)
    assert again.fact == "reinforced" and again.record_ids[1] == mine


def test_a_retraction_binds_its_level_and_above(membrane: Membrane) -> None:
    secret = observe(membrane, "condition y", "hyper").record_ids[1]
    retract(membrane, secret)
    assert observe(membrane, "condition y", "hyper").fact == "tombstoned"  # control
    low = observe(membrane, "condition y", "low", LOW)
    assert low.fact == "created" and secret not in low.record_ids
    retract(membrane, low.record_ids[1])
    # the tombstone now holds the low retraction, which binds every level from low up
    assert observe(membrane, "condition y", "low", LOW).fact == "tombstoned"
    assert observe(membrane, "condition y", "high").fact == "tombstoned"


def test_a_default_level_above_the_writer_is_refused(membrane: Membrane) -> None:
    public = TrustPolicy(write_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.PUBLIC)
    event = {"source_kind": "event", "scope": "a", "content": {"text": "hello"}}
    assert membrane.capture({**event, "sensitivity": "public"}, public).record_ids  # control
    with pytest.raises(errors.Forbidden, match="configured default"):
        membrane.capture(event, public)
