"""RFC 5.6 on by-id reads: as_of answers as the memory believed then; valid_at filters."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membrane_core import Membrane, errors
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY


def test_get_as_of_and_valid_at(membrane: Membrane, clock: FakeClock) -> None:
    before_capture = clock()
    clock.advance(minutes=1)
    obs = {
        "source_kind": "observation",
        "scope": "p",
        "content": {
            "subject": "ann",
            "predicate": "lives in",
            "object": "paris",
            "valid_from": "2020-01-01T00:00:00Z",
            "valid_to": "2024-01-01T00:00:00Z",
        },
    }
    old_id = membrane.capture(obs).record_ids[1]
    believed = clock.advance(minutes=1)
    clock.advance(minutes=1)
    new_id = membrane.revisions.supersede(
        old_id,
        {
            "record": {"subject": "ann", "predicate": "lives in", "object": "berlin"},
            "rationale": "moved",
            "evidence": [{"kind": "observation", "ref": "letter"}],
        },
        DEVELOPMENT_POLICY,
    )
    # now: the old fact is retracted (shown as such), the new one active
    assert membrane.get(old_id).status.value == "retracted"
    assert membrane.get(new_id).status.value == "active"
    # as of before the supersede: the old fact was believed, the new one did not exist
    assert membrane.get(old_id, as_of=believed).status.value == "active"
    with pytest.raises(errors.NotFound):
        membrane.get(new_id, as_of=believed)
    with pytest.raises(errors.NotFound):
        membrane.get(old_id, as_of=before_capture)
    # valid time: inside the window found, outside not
    assert membrane.get(old_id, valid_at=datetime(2022, 6, 1, tzinfo=UTC)).id == old_id
    with pytest.raises(errors.NotFound):
        membrane.get(old_id, valid_at=datetime(2025, 6, 1, tzinfo=UTC))
