"""The one clock type every service takes, and the real clock (RFC 1.2)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

#: A source of timezone-aware "now"; tests pass a fake one (``membrane_core.testing``).
Clock = Callable[[], datetime]


def utcnow() -> datetime:
    """The current time, timezone-aware UTC."""
    return datetime.now(UTC)
