from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from membrane_core import errors
from membrane_core.decay import reinforced, salience_at
from membrane_core.enums import Sensitivity
from membrane_core.models import DecayProfile
from membrane_core.trust import TrustPolicy

T0 = datetime(2026, 1, 1, tzinfo=UTC)
PROFILE = DecayProfile(half_life_seconds=3600, min_salience=0.01)


def test_half_life() -> None:
    assert salience_at(1.0, T0, PROFILE, T0 + timedelta(hours=1), pinned=False) == pytest.approx(0.5)
    assert salience_at(1.0, T0, PROFILE, T0 + timedelta(hours=4), pinned=False) == pytest.approx(0.0625)


def test_floor_and_pinned() -> None:
    assert salience_at(1.0, T0, PROFILE, T0 + timedelta(days=30), pinned=False) == 0.01
    assert salience_at(1.0, T0, PROFILE, T0 + timedelta(days=30), pinned=True) == 1.0


@given(st.lists(st.floats(min_value=0, max_value=1e6), min_size=1, max_size=20))
def test_evaluating_many_times_never_compounds(offsets: list[float]) -> None:
    times = sorted(T0 + timedelta(seconds=o) for o in offsets)
    values = [salience_at(1.0, T0, PROFILE, t, pinned=False) for t in times]
    assert values[-1] == salience_at(1.0, T0, PROFILE, times[-1], pinned=False)


def test_reinforce_gain_capped() -> None:
    assert reinforced(0.5, 0.1) == pytest.approx(0.6)
    assert reinforced(0.95, 0.1) == 1.0
    assert reinforced(1.5, 0.1) == 1.5


def test_visibility_levels() -> None:
    p = TrustPolicy(read_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.LOW)
    assert p.visibility("a", Sensitivity.LOW) == "full"
    assert p.visibility("a", Sensitivity.MEDIUM) == "redacted"
    assert p.visibility("a", Sensitivity.HIGH) == "hidden"
    assert p.visibility("b", Sensitivity.PUBLIC) == "hidden"
    assert p.visibility("", Sensitivity.PUBLIC) == "hidden"


def test_narrowing_only() -> None:
    p = TrustPolicy(read_scopes=frozenset({"a", "b"}), max_sensitivity=Sensitivity.MEDIUM)
    n = p.narrow(["a"], Sensitivity.LOW)
    assert n.read_scopes == {"a"} and n.max_sensitivity is Sensitivity.LOW
    with pytest.raises(errors.Forbidden, match="c"):
        p.narrow(["a", "c"])
    with pytest.raises(errors.Forbidden, match="max_sensitivity"):
        p.narrow(None, Sensitivity.HIGH)
