"""Readiness probe and the outage circuit of the connection pools (RFC 10.5, 14.2)."""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Callable

import psycopg

from membrane_core import errors
from membrane_core.storage.queries import q


def ping(dsn: str, timeout: float = 2.0) -> None:
    """Raise ``errors.Unavailable`` unless Postgres answers within about ``timeout`` seconds.

    RFC 14.2: a fresh connection, not the pool, so a probe never waits on the pool's
    acquisition timeout nor on a pooled connection that died with the server.
    """
    try:
        with psycopg.connect(dsn, connect_timeout=max(1, round(timeout)), autocommit=True) as conn:
            conn.execute(q("health_ping"))
    except psycopg.Error as exc:
        raise errors.Unavailable(f"Postgres is unavailable: {exc}") from exc


class Outage(errors.Unavailable):
    """Postgres is believed down: the request was refused without trying (RFC 10.5)."""

    def __init__(self, message: str, *, retry_after: float) -> None:
        super().__init__(message)
        #: Whole seconds until the next attempt is let through (the ``Retry-After`` header).
        self.retry_after = max(1, math.ceil(retry_after))


class Circuit:
    """RFC 10.5: whether a Postgres server is believed down, and when to try it again.

    Closed, every caller goes to the pool. :meth:`failed` opens it: for ``retry_seconds``
    every caller is refused at once with :class:`Outage`; then one caller is let through
    (the window re-arms as it passes, so one at a time, even if that one hangs) and its
    outcome closes the circuit or opens it again. :meth:`succeeded` closes it. The closed
    check is one attribute read: the request path pays nothing while Postgres is up.
    """

    def __init__(self, retry_seconds: float, *, clock: Callable[[], float] = time.monotonic) -> None:
        self.retry_seconds = retry_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._retry_at: float | None = None  # None: closed

    @property
    def is_open(self) -> bool:
        """True while Postgres is believed down."""
        return self._retry_at is not None

    def admit(self) -> None:
        """Let a caller through, or raise :class:`Outage` while the window runs."""
        if self._retry_at is None:
            return
        with self._lock:
            if self._retry_at is None:
                return
            now = self._clock()
            if now < self._retry_at:
                raise Outage("Postgres is unavailable; retry later", retry_after=self._retry_at - now)
            # this caller is the trial; the next one waits for the window it starts
            self._retry_at = now + self.retry_seconds

    def failed(self) -> None:
        """A connection-level failure: refuse callers for the next ``retry_seconds``."""
        with self._lock:
            self._retry_at = self._clock() + self.retry_seconds

    def succeeded(self) -> None:
        """The server answered: let every caller through again."""
        self._retry_at = None
