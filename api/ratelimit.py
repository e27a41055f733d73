"""Per-key rate limits shared by every API process through the deployment's Redis (RFC 10.6).

Each key has two token buckets, one for requests and one for captures, kept in Redis as a
theoretical arrival time (GCRA): one script call spends from a bucket and answers how long
until it would have admitted the request, in one round trip, with Redis's clock, so every
API process spends from the same buckets. When Redis does not answer the limiter raises
``Unchecked`` at once, and for ``retry_seconds`` no request tries Redis; ``MEMBRANE_RATE_FAIL``
says whether such a request is admitted (``open``) or refused with 503 (``closed``).
"""

from __future__ import annotations

import enum
import logging
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal, Protocol

import redis
import redis.exceptions
from redis.backoff import NoBackoff
from redis.retry import Retry

from membrane_core import errors

log = logging.getLogger(__name__)

#: RFC 10.6: after Redis failed, requests are not checked this long before one tries again.
LIMITER_RETRY_SECONDS = 2.0
#: RFC 10.6: the limiter's connect and read timeouts; a Redis slower than this is down to it.
LIMITER_TIMEOUT_SECONDS = 0.1
#: While Redis stays down, at most one warning in this many seconds.
WARN_EVERY_SECONDS = 60.0

#: RFC 10.6: spend ``ARGV[1]`` µs from the bucket ``KEYS[1]`` of depth ``ARGV[2]`` µs. The key
#: holds the bucket's theoretical arrival time (µs on Redis's clock): the bucket is full when
#: it is not after now. A cost larger than the depth is admitted only from a full bucket (its
#: excess is then waited out by the requests after it). Answers 0 when admitted, else the
#: µs until it would be; a refusal spends nothing.
GCRA = """
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000000 + tonumber(t[2])
local cost = tonumber(ARGV[1])
local depth = tonumber(ARGV[2])
local tat = tonumber(redis.call('GET', KEYS[1])) or now
if tat < now then tat = now end
local wait = tat - now + math.min(cost, depth) - depth
if wait > 0 then return wait end
local new = tat + cost
redis.call('SET', KEYS[1], string.format('%d', new), 'PX', math.ceil((new - now) / 1000) + 1)
return 0
"""


#: RFC 10.6: ``MEMBRANE_RATE_FAIL``: a request the limiter cannot check is admitted or refused.
RateFail = Literal["open", "closed"]


class Unchecked(errors.Unavailable):
    """Rate limits cannot be checked: Redis does not answer (RFC 10.6)."""

    def __init__(self, retry_after: float) -> None:
        super().__init__("rate limits cannot be checked (Redis does not answer); retry later")
        #: Whole seconds until the limiter asks Redis again (the ``Retry-After`` header), at least 1.
        self.retry_after = max(1, math.ceil(retry_after))


class Limit(enum.StrEnum):
    """The two buckets of a key (RFC 10.6)."""

    #: every ``/v1`` request but a capture's, one each
    REQUESTS = "requests"
    #: ``POST /v1/captures`` (one) and ``POST /v1/captures:batch`` (its captures)
    CAPTURES = "captures"


@dataclass(frozen=True)
class RateLimits:
    """RFC 10.6: a key's rates per second and its burst, in seconds of either rate."""

    requests_per_second: float
    captures_per_second: float
    burst: float

    def rate(self, limit: Limit) -> float:
        """The per-second rate of ``limit``."""
        return self.requests_per_second if limit is Limit.REQUESTS else self.captures_per_second

    def field(self, limit: Limit) -> str:
        """The key entry's field that sets the rate of ``limit``."""
        return f"{limit.value}_per_second"


class Limiter(Protocol):
    """Spends from a key's bucket (RFC 10.6)."""

    def spend(self, actor: str, limits: RateLimits, limit: Limit, units: int) -> float | None:
        """Seconds until ``units`` of ``limit`` would be admitted, or None if admitted now;
        ``Unchecked`` when the limits cannot be checked."""
        ...


class Unlimited:
    """Admits everything: a process that enforces no limit (tests, an embedded API)."""

    def spend(self, actor: str, limits: RateLimits, limit: Limit, units: int) -> float | None:
        """Always admitted."""
        return None

    def close(self) -> None:
        """Nothing to release."""


def bucket_key(actor: str, limit: Limit) -> str:
    """The Redis key of an actor's bucket; the hash tag keeps an actor's keys on one slot."""
    return f"membrane:rate:{{{actor}}}:{limit.value}"


class RedisLimiter:
    """RFC 10.6: token buckets in Redis, one script call a request.

    A Redis error or timeout raises ``Unchecked`` and opens a circuit: for ``retry_seconds``
    requests get ``Unchecked`` at once without trying Redis, then one request tries again
    (the window re-arms as it passes) and its success closes the circuit. Connect and read
    timeouts are ``timeout`` and redis-py's retries are off, so a request that tries Redis
    waits on it at most twice ``timeout``. The outage is logged once as it starts, at most
    once a minute while it lasts, and once when it ends.
    """

    def __init__(
        self,
        url: str,
        *,
        timeout: float = LIMITER_TIMEOUT_SECONDS,
        retry_seconds: float = LIMITER_RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._redis = redis.Redis.from_url(
            url,
            socket_timeout=timeout,
            socket_connect_timeout=timeout,
            retry=Retry(NoBackoff(), 0),
            health_check_interval=0,
        )
        self._script = self._redis.register_script(GCRA)
        self.retry_seconds = retry_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._retry_at: float | None = None  # None: Redis is believed up
        self._warned_at: float | None = None

    @property
    def is_open(self) -> bool:
        """True while requests are not checked because Redis failed recently."""
        return self._retry_at is not None

    def spend(self, actor: str, limits: RateLimits, limit: Limit, units: int) -> float | None:
        """RFC 10.6: spend ``units`` from the bucket; seconds to wait when refused, else None.

        ``Unchecked`` when Redis failed within the window or fails now.
        """
        if units <= 0:
            return None
        closed_for = self._closed_for()
        if closed_for is not None:
            raise Unchecked(retry_after=closed_for)
        cost = units * max(1, round(1_000_000 / limits.rate(limit)))
        depth = max(1, round(limits.burst * 1_000_000))
        try:
            wait = int(self._script(keys=[bucket_key(actor, limit)], args=[cost, depth]))
        except (redis.exceptions.RedisError, OSError, ValueError) as exc:
            self._failed(exc)
            raise Unchecked(retry_after=self.retry_seconds) from exc
        self._succeeded()
        return wait / 1_000_000 if wait > 0 else None

    def _closed_for(self) -> float | None:
        """None to ask Redis now, else the seconds until a caller will; past the window one
        caller at a time asks."""
        if self._retry_at is None:
            return None
        with self._lock:
            if self._retry_at is None:
                return None
            now = self._clock()
            if now < self._retry_at:
                return self._retry_at - now
            self._retry_at = now + self.retry_seconds  # this caller tries; the rest are not checked
            return None

    def _failed(self, exc: Exception) -> None:
        with self._lock:
            now = self._clock()
            starting = self._retry_at is None
            self._retry_at = now + self.retry_seconds
            if not starting and self._warned_at is not None and now - self._warned_at < WARN_EVERY_SECONDS:
                return
            self._warned_at = now
        log.warning(
            "rate limits cannot be checked: Redis %s; it is tried again every %.1f s "
            "(MEMBRANE_RATE_FAIL says whether requests are admitted meanwhile): %s",
            "does not answer" if starting else "still does not answer",
            self.retry_seconds,
            exc,
        )

    def _succeeded(self) -> None:
        if self._retry_at is None:
            return
        with self._lock:
            was_open, self._retry_at, self._warned_at = self._retry_at is not None, None, None
        if was_open:
            log.info("rate limits are checked again: Redis answers")

    def close(self) -> None:
        """Release the connection pool."""
        self._redis.close()
