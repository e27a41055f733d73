"""The Celery implementation of ``membrane_core.inbox.submit.Dispatcher`` (RFC 9.5, 10.5)."""

from __future__ import annotations

import logging
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import redis.exceptions
from celery import Celery
from kombu.exceptions import KombuError
from kombu.exceptions import OperationalError as KombuOperationalError

from membrane_core.enums import OperationKind

log = logging.getLogger(__name__)

#: Most operation ids in one ingest message (the API's batch limit).
IDS_PER_MESSAGE = 1000

#: RFC 10.5: after a failed publish, publishing is skipped (False at once) this long.
BROKER_RETRY_SECONDS = 2.0

#: RFC 10.5: the publishing side's timeouts. A dead broker on loopback refuses at once; these
#: bound a broker that does not answer at all (a lost host, a partition, a stopped process).
#: :class:`api.app.CeleryBroker` applies them to the API's own Celery app; workers keep the
#: longer ones of ``workers.app.make_app``, since nothing waits on them.
PUBLISH_TRANSPORT_OPTIONS: dict[str, float] = {"socket_connect_timeout": 0.25, "socket_timeout": 1.0}

_BROKER_ERRORS = (KombuOperationalError, KombuError, redis.exceptions.RedisError, OSError)


class CeleryDispatcher:
    """Publishes operation ids after the inbox commit; never raises for a broker outage.

    Captures go to ``ingest`` as one message per up to 1,000 ids; each revision to
    ``revision`` and each maintenance operation to ``maintenance``. When the broker is
    down the operation stays queued in Postgres and beat re-dispatches it (RFC 9.5).

    RFC 10.5: a publish makes one connection attempt (kombu would otherwise retry for
    ``broker_connection_timeout``, about 6 s a write), and after a failure the dispatcher
    skips publishing for ``retry_seconds``, then lets one publish through to try again.
    """

    def __init__(
        self,
        app: Celery,
        *,
        retry_seconds: float = BROKER_RETRY_SECONDS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.app = app
        self.retry_seconds = retry_seconds
        self._clock = clock
        self._lock = threading.Lock()
        self._retry_at: float | None = None  # None: the broker is believed up

    @property
    def is_open(self) -> bool:
        """True while publishing is skipped because the broker failed recently."""
        return self._retry_at is not None

    def publish(self, kind: OperationKind, operation_ids: Sequence[uuid.UUID]) -> bool:
        """Send ``operation_ids`` to the queue of ``kind``; False if the broker refused or is
        believed down (the operations stay queued for beat, RFC 9.5)."""
        ids = [str(i) for i in operation_ids]
        if not ids:
            return True
        if not self._admit():
            return False
        messages: list[tuple[str, list[Any]]]
        if kind is OperationKind.CAPTURE:
            messages = [
                ("membrane.ingest", [ids[s : s + IDS_PER_MESSAGE]])
                for s in range(0, len(ids), IDS_PER_MESSAGE)
            ]
        else:
            task = "membrane.maintenance_op" if kind is OperationKind.MAINTENANCE else "membrane.revision"
            messages = [(task, [op_id]) for op_id in ids]
        try:
            self._send(messages)
        except _BROKER_ERRORS as exc:
            self.failed()
            log.warning(
                "broker unavailable; %d %s operation(s) stay queued for re-dispatch and "
                "publishing pauses for %.1f s: %s",
                len(ids),
                kind.value,
                self.retry_seconds,
                exc,
            )
            return False
        self.succeeded()
        return True

    def _send(self, messages: Sequence[tuple[str, list[Any]]]) -> None:
        with self.app.producer_or_acquire() as producer:
            # one connection attempt, not kombu's retry loop; connected, this is a flag check
            producer.connection.ensure_connection(max_retries=0)
            for task, args in messages:
                self.app.send_task(task, args=args, retry=False, producer=producer)

    def _admit(self) -> bool:
        """RFC 10.5: whether to try the broker now; past the window one caller at a time."""
        if self._retry_at is None:
            return True
        with self._lock:
            if self._retry_at is None:
                return True
            now = self._clock()
            if now < self._retry_at:
                return False
            self._retry_at = now + self.retry_seconds  # this caller tries; the rest skip
            return True

    def failed(self) -> None:
        """The broker failed (a publish or readiness): skip publishing for ``retry_seconds``."""
        with self._lock:
            self._retry_at = self._clock() + self.retry_seconds

    def succeeded(self) -> None:
        """The broker answered: publish again."""
        self._retry_at = None
