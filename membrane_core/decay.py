"""Closed-form decay (RFC 6.1) and reinforcement (RFC 6.2).

Salience is never decayed from a previously decayed value: it is always computed
from ``base_salience`` and ``reinforced_at``, so applying a sweep n times equals
applying it once.
"""

from __future__ import annotations

import math
from datetime import datetime

from membrane_core.models import DecayProfile


def salience_at(
    base: float, reinforced_at: datetime, profile: DecayProfile, at: datetime, *, pinned: bool
) -> float:
    """RFC 6.1: ``max(floor, base * 2^(-(at - reinforced_at) / half_life))``; pinned never decays."""
    return decayed(base, reinforced_at, profile.half_life_seconds, profile.min_salience, at, pinned=pinned)


def decayed(
    base: float,
    reinforced_at: datetime,
    half_life_seconds: float,
    min_salience: float,
    at: datetime,
    *,
    pinned: bool,
) -> float:
    """:func:`salience_at` from the stored columns (RFC 6.1), for rows read without a model."""
    if pinned:
        return base
    elapsed = max(0.0, (at - reinforced_at).total_seconds())
    value = base * math.pow(2.0, -elapsed / half_life_seconds)
    return max(min(base, min_salience), value) if base >= 0 else 0.0


def reinforced(current: float, gain: float, cap: float = 1.0) -> float:
    """RFC 6.2: new base salience after a reinforcement: ``min(cap, current + gain)``."""
    return max(current, min(cap, current + gain))
