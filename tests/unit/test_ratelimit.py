"""Token-bucket rate limiter (RFC 12.2)."""

from __future__ import annotations

import math
import threading
import time

import pytest

from membrane_core.providers.ratelimit import RateLimiter


class FakeClock:
    """A clock that only moves when slept on (or told to)."""

    def __init__(self) -> None:
        self.now = 100.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def make(rate: float, burst: float = 1.0) -> tuple[RateLimiter, FakeClock]:
    clock = FakeClock()
    return RateLimiter(rate, burst=burst, clock=clock, sleep=clock.sleep), clock


def test_first_request_within_burst_does_not_wait() -> None:
    limiter, clock = make(2.0)
    assert limiter.acquire() == 0.0
    assert clock.sleeps == []


def test_requests_beyond_burst_are_spaced_at_the_rate() -> None:
    limiter, clock = make(4.0)
    waits = [limiter.acquire() for _ in range(4)]
    assert waits == [0.0, 0.25, 0.25, 0.25]
    assert clock.sleeps == [0.25, 0.25, 0.25]
    assert clock.now == pytest.approx(100.75)


def test_burst_allows_back_to_back_requests_then_limits() -> None:
    limiter, clock = make(1.0, burst=3.0)
    waits = [limiter.acquire() for _ in range(4)]
    assert waits == [0.0, 0.0, 0.0, 1.0]
    assert clock.sleeps == [1.0]


def test_idle_time_refills_but_never_above_burst() -> None:
    limiter, clock = make(1.0, burst=2.0)
    assert [limiter.acquire() for _ in range(2)] == [0.0, 0.0]
    clock.now += 3600.0  # an hour idle refills two tokens, not 3600
    assert [limiter.acquire() for _ in range(3)] == [0.0, 0.0, 1.0]


def test_partial_refill_shortens_the_wait() -> None:
    limiter, clock = make(2.0)
    limiter.acquire()
    clock.now += 0.2  # 0.4 of a token accrued
    assert limiter.acquire() == pytest.approx(0.3)


def test_try_acquire_refuses_when_empty_and_succeeds_after_refill() -> None:
    limiter, clock = make(10.0)
    assert limiter.try_acquire() is True
    assert limiter.try_acquire() is False
    clock.now += 0.1
    assert limiter.try_acquire() is True
    assert clock.sleeps == []


def test_clock_stepping_back_does_not_drain_the_bucket() -> None:
    limiter, clock = make(1.0, burst=2.0)
    clock.now -= 50.0
    assert [limiter.acquire() for _ in range(2)] == [0.0, 0.0]
    assert limiter.acquire() == 1.0


@pytest.mark.parametrize("rate", [0.0, -1.0, math.nan, math.inf])
def test_rate_must_be_positive_and_finite(rate: float) -> None:
    with pytest.raises(ValueError, match="rate_per_second"):
        RateLimiter(rate)
    assert RateLimiter(0.5).rate_per_second == 0.5  # positive control


@pytest.mark.parametrize("burst", [0.0, 0.5, math.nan])
def test_burst_must_be_at_least_one(burst: float) -> None:
    with pytest.raises(ValueError, match="burst"):
        RateLimiter(1.0, burst=burst)
    assert RateLimiter(1.0, burst=1.0).burst == 1.0  # positive control


def test_concurrent_callers_each_reserve_a_distinct_slot() -> None:
    # The clock stands still and sleeping does not move it, so every waiter's
    # delay reveals its place in the queue: a lost update would repeat one.
    clock = FakeClock()
    limiter = RateLimiter(10.0, clock=clock, sleep=lambda _s: None)
    waits: list[float] = []
    lock = threading.Lock()
    start = threading.Barrier(8)

    def worker() -> None:
        start.wait()
        for _ in range(5):
            wait = limiter.acquire()
            with lock:
                waits.append(wait)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert sorted(round(w, 6) for w in waits) == [round(i / 10.0, 6) for i in range(40)]


def test_real_clock_spaces_requests() -> None:
    limiter = RateLimiter(50.0)
    started = time.monotonic()
    for _ in range(3):
        limiter.acquire()
    assert time.monotonic() - started >= 0.035
