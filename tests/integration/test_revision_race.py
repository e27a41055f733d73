"""Concurrent revisions of one record: one wins, and every loser is told which (RFC 5.2)."""

from __future__ import annotations

import threading
import uuid

import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.trust import TrustPolicy

ALICE = TrustPolicy(actor="alice")
EVIDENCE = [{"kind": "observation", "ref": "the config file"}]


def _fact(m: Membrane) -> uuid.UUID:
    res = m.capture(
        {
            "source_kind": "observation",
            "scope": "race",
            "content": {"subject": "api", "predicate": "listens on", "object": "8080"},
        }
    )
    return res.record_ids[1]


def test_concurrent_supersedes_leave_one_winner_and_name_it(membrane: Membrane) -> None:
    target = _fact(membrane)
    start = threading.Barrier(8)
    won: list[uuid.UUID] = []
    lost: list[errors.RevisionRefused] = []

    def attempt(i: int) -> None:
        start.wait()
        try:
            won.append(
                membrane.revisions.supersede(
                    target,
                    {"record": {"object": f"90{i:02d}"}, "rationale": f"attempt {i}", "evidence": EVIDENCE},
                    ALICE,
                )
            )
        except errors.RevisionRefused as exc:
            lost.append(exc)

    threads = [threading.Thread(target=attempt, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(won) == 1 and len(lost) == 7  # positive control: exactly one supersede applied
    winner = won[0]
    assert membrane.get(winner).status.value == "active"
    for exc in lost:
        assert "already superseded" in exc.message and str(winner) in exc.message
        assert exc.details[0]["type"] == "already_superseded"
        assert exc.details[0]["successor_id"] == str(winner)
        assert exc.details[0]["actor"] == "alice"


def test_a_later_revision_names_a_merge_and_a_plain_retraction(membrane: Membrane) -> None:
    a, b = (
        _fact(membrane),
        membrane.capture(
            {
                "source_kind": "observation",
                "scope": "race",
                "content": {"subject": "api", "predicate": "listens on", "object": "8443"},
            }
        ).record_ids[1],
    )
    merged = membrane.revisions.merge(
        {
            "record_ids": [str(a), str(b)],
            "rationale": "one port",
            "record": {"object": "8080 and 8443"},
            "evidence": EVIDENCE,
        },
        ALICE,
    )
    with pytest.raises(errors.RevisionRefused, match=f"already merged .*{merged}"):
        membrane.revisions.retract(a, {"rationale": "late"}, ALICE)
    membrane.revisions.retract(merged, {"rationale": "wrong"}, ALICE)
    with pytest.raises(errors.RevisionRefused, match="already retracted by alice") as caught:
        membrane.revisions.contest(merged, {"rationale": "late"}, ALICE)
    assert "successor_id" not in caught.value.details[0]


def test_a_successor_the_loser_may_not_see_is_not_named(membrane: Membrane) -> None:
    target = _fact(membrane)
    high = membrane.revisions.supersede(
        target,
        {
            "record": {"object": "9999", "sensitivity": "high"},
            "rationale": "secret port",
            "evidence": EVIDENCE,
        },
        ALICE,
    )
    low = TrustPolicy(actor="bob", max_sensitivity=Sensitivity.LOW)
    with pytest.raises(errors.RevisionRefused) as caught:
        membrane.revisions.retract(target, {"rationale": "late"}, low)
    assert "already superseded" in caught.value.message
    assert str(high) not in caught.value.message and "successor_id" not in caught.value.details[0]
    # positive control: a caller who sees the successor in full is told its id
    with pytest.raises(errors.RevisionRefused, match=str(high)):
        membrane.revisions.retract(target, {"rationale": "late"}, ALICE)
