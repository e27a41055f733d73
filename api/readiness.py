"""Readiness probes under one deadline (RFC 14.2).

``/readyz`` is asked by probes that give up after about a second (the kubelet's default
``timeoutSeconds`` is 1), so its answer must not wait on a driver's own timeouts: psycopg
never waits less than 2 s for a connection, and a stopped Redis accepts connections and
answers nothing. Each probe runs on a thread of its own and the answer waits for all of
them at most ``READY_TIMEOUT_SECONDS``; a probe still running then counts as failed.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Mapping
from concurrent import futures

#: RFC 14.2: the longest ``/readyz`` waits on its probes, all of them together.
READY_TIMEOUT_SECONDS = 0.75
#: A probe still running this long after it started is left to finish on its own and the next
#: call starts another (a connection lost in a partition can wait on TCP for minutes).
ABANDON_AFTER_SECONDS = 30.0

Probe = Callable[[], None]


class Probes:
    """RFC 14.2: runs readiness probes side by side within ``timeout``.

    A probe that did not answer in time keeps its thread until its own timeout ends it; a
    call meanwhile waits on that same run instead of starting another, so a hung service
    costs one thread per probe, however often ``/readyz`` is asked.
    """

    def __init__(
        self,
        *,
        timeout: float = READY_TIMEOUT_SECONDS,
        abandon_after: float = ABANDON_AFTER_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.timeout = timeout
        self.abandon_after = abandon_after
        self._clock = clock
        self._lock = threading.Lock()
        self._running: dict[str, tuple[float, futures.Future[None]]] = {}

    def run(self, probes: Mapping[str, Probe]) -> dict[str, str | None]:
        """Each probe's failure by name, ``None`` for one that answered, within ``timeout``."""
        started = {name: self._start(name, probe) for name, probe in probes.items()}
        futures.wait(started.values(), timeout=self.timeout)
        outcome: dict[str, str | None] = {}
        for name, future in started.items():
            if not future.done():
                outcome[name] = f"no answer within {self.timeout:g} s"
            else:
                exc = future.exception()
                outcome[name] = None if exc is None else f"{type(exc).__name__}: {exc}"
        return outcome

    def _start(self, name: str, probe: Probe) -> futures.Future[None]:
        now = self._clock()
        with self._lock:
            running = self._running.get(name)
            if running is not None and not running[1].done() and now - running[0] < self.abandon_after:
                return running[1]
            future: futures.Future[None] = futures.Future()
            self._running[name] = (now, future)
        # a daemon: a probe hung past the process's end never holds up its exit
        threading.Thread(target=_settle, args=(probe, future), name=f"readyz-{name}", daemon=True).start()
        return future


def _settle(probe: Probe, future: futures.Future[None]) -> None:
    future.set_running_or_notify_cancel()
    try:
        probe()
    except Exception as exc:
        future.set_exception(exc)
    else:
        future.set_result(None)
