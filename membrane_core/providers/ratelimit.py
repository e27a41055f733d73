"""Token-bucket rate limiter for provider requests (RFC 12.2).

Each request takes one token. Tokens refill continuously at ``rate_per_second``
up to ``burst``. A caller that finds the bucket empty reserves its token on
credit (the level goes negative) and sleeps, outside the lock, until that token
would have accrued, so threads are served in the order they asked and each
sleeps exactly once.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

__all__ = ["RateLimiter"]

#: Slack for float rounding: a token that is due by the clock is available.
_EPSILON = 1e-9


class RateLimiter:
    """Thread-safe token bucket; clock and sleep are injectable (RFC 12.2)."""

    def __init__(
        self,
        rate_per_second: float,
        *,
        burst: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        if not (math.isfinite(rate_per_second) and rate_per_second > 0):
            raise ValueError(f"rate_per_second must be a positive number, got {rate_per_second!r}")
        if not (math.isfinite(burst) and burst >= 1):
            raise ValueError(f"burst must be a number >= 1, got {burst!r}")
        self._rate = rate_per_second
        self._burst = burst
        self._clock = clock
        self._sleep = sleep
        self._lock = threading.Lock()
        self._tokens = burst
        self._updated = clock()

    @property
    def rate_per_second(self) -> float:
        """Refill rate in tokens per second."""
        return self._rate

    @property
    def burst(self) -> float:
        """Bucket capacity: how many requests may go out back to back."""
        return self._burst

    def _refill(self, now: float) -> None:
        # A clock that steps back (a fake one, say) must not drain the bucket.
        elapsed = max(0.0, now - self._updated)
        self._tokens = min(self._burst, self._tokens + elapsed * self._rate)
        self._updated = now

    def try_acquire(self) -> bool:
        """Take a token if one is available now, without waiting (RFC 12.2)."""
        with self._lock:
            self._refill(self._clock())
            if self._tokens >= 1 - _EPSILON:
                self._tokens -= 1
                return True
            return False

    def acquire(self) -> float:
        """Take a token, sleeping until it is due; returns seconds slept (RFC 12.2)."""
        with self._lock:
            self._refill(self._clock())
            self._tokens -= 1
            wait = 0.0 if self._tokens >= -_EPSILON else -self._tokens / self._rate
        if wait > 0:
            self._sleep(wait)
        return wait
