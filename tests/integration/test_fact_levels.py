"""A capture's fact meets only facts and retractions at its own sensitivity (RFC 3.4, 5.4).

A writer whose maximum is ``low`` that observes the key of a ``hyper`` fact is not told
``fact: "reinforced"`` nor the hidden fact's id: a capture tells it no more than a read would.
Each test shows the other side too: a writer cleared for the hidden level meets it.
"""

from __future__ import annotations

import uuid

import psycopg
import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.results import CaptureResult
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

LOW = TrustPolicy(
    read_scopes=frozenset({"a"}),
    write_scopes=frozenset({"a"}),
    max_sensitivity=Sensitivity.LOW,
    actor="low-writer",
)


def observe(
    m: Membrane, obj: str, sensitivity: str, trust: TrustPolicy = DEVELOPMENT_POLICY
) -> CaptureResult:
    return m.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "sensitivity": sensitivity,
            "content": {"subject": "alice", "predicate": "diagnosed with", "object": obj},
        },
        trust,
    )


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


def test_a_retraction_binds_its_own_level(membrane: Membrane) -> None:
    secret = observe(membrane, "condition y", "hyper").record_ids[1]
    retract(membrane, secret)
    assert observe(membrane, "condition y", "hyper").fact == "tombstoned"  # control
    low = observe(membrane, "condition y", "low", LOW)
    assert low.fact == "created" and secret not in low.record_ids
    retract(membrane, low.record_ids[1])
    assert observe(membrane, "condition y", "low", LOW).fact == "tombstoned"
    assert observe(membrane, "condition y", "hyper").fact == "tombstoned"  # still its own


def test_deleting_a_hidden_retraction_changes_nothing_for_a_low_writer(membrane: Membrane) -> None:
    for obj, delete in (("y1", False), ("y2", True)):
        secret = observe(membrane, obj, "hyper").record_ids[1]
        retract(membrane, secret)
        if delete:
            membrane.delete(secret, DEVELOPMENT_POLICY, "erasure request")
        assert observe(membrane, obj, "low", LOW).fact == "created", obj


def test_revisions_across_levels(membrane: Membrane, database_url: str) -> None:
    evidence = [{"kind": "observation", "ref": "user said so"}]

    def merge(ids: list[uuid.UUID], obj: str) -> uuid.UUID:
        return membrane.revisions.merge(
            {"record_ids": ids, "record": {"object": obj}, "rationale": "one", "evidence": evidence},
            DEVELOPMENT_POLICY,
        )

    # two records of one key merged into another key: one tombstone a level
    low, high = observe(membrane, "q", "low").record_ids[1], observe(membrane, "q", "hyper").record_ids[1]
    assert low != high
    merge([low, high], "q corrected")
    first = observe(membrane, "r", "low").record_ids[1]
    variant = membrane.revisions.fork(
        first,
        {"record": {}, "condition": "paid plan", "rationale": "differs", "evidence": evidence},
        DEVELOPMENT_POLICY,
    )
    merge([first, variant], "s")
    with psycopg.connect(database_url) as conn:
        rows = conn.execute(
            "SELECT object, sensitivity_rank FROM fact_tombstones WHERE object IN ('q', 'r') ORDER BY 1, 2"
        ).fetchall()
    assert rows == [("q", 1), ("q", 4), ("r", 1)]
    # a live hyper fact is revised under the low level's tombstone of its key
    hyper = observe(membrane, "t", "hyper").record_ids[1]
    retract(membrane, observe(membrane, "t", "low", LOW).record_ids[1])
    assert membrane.revisions.supersede(
        hyper, {"record": {"confidence": 0.8}, "rationale": "fix", "evidence": evidence}, DEVELOPMENT_POLICY
    )

    # a low writer re-asserting a key does not clear, nor hear of, a hyper retraction
    def reassert(obj: str) -> bool:
        mine = observe(membrane, f"from {obj}", "low", LOW).record_ids[1]
        new = membrane.revisions.supersede(
            mine, {"record": {"object": obj}, "rationale": "r", "evidence": evidence}, LOW
        )
        return bool(membrane.audit(new, LOW).entries[0].details["reasserted"])

    retract(membrane, observe(membrane, "w", "low", LOW).record_ids[1])
    assert reassert("w")  # control: its own level's tombstone is re-asserted
    retract(membrane, observe(membrane, "u", "hyper").record_ids[1])
    assert not reassert("u")
    assert observe(membrane, "u", "hyper").fact == "tombstoned"


def test_a_default_level_above_the_writer_is_refused(membrane: Membrane) -> None:
    public = TrustPolicy(write_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.PUBLIC)
    event = {"source_kind": "event", "scope": "a", "content": {"text": "hello"}}
    assert membrane.capture({**event, "sensitivity": "public"}, public).record_ids  # control
    with pytest.raises(errors.Forbidden, match="configured default"):
        membrane.capture(event, public)
