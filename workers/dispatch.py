"""The Celery implementation of ``membrane_core.operations.Dispatcher`` (RFC 9.5)."""

from __future__ import annotations

import logging
import uuid
from collections.abc import Sequence

import redis.exceptions
from celery import Celery
from kombu.exceptions import KombuError
from kombu.exceptions import OperationalError as KombuOperationalError

from membrane_core.enums import OperationKind

log = logging.getLogger(__name__)

#: Most operation ids in one ingest message (the API's batch limit).
IDS_PER_MESSAGE = 1000

_BROKER_ERRORS = (KombuOperationalError, KombuError, redis.exceptions.RedisError, OSError)


class CeleryDispatcher:
    """Publishes operation ids after the inbox commit; never raises for a broker outage.

    Captures go to ``ingest`` as one message per up to 1,000 ids; each revision to
    ``revision`` and each maintenance operation to ``maintenance``. When the broker is
    down the operation stays queued in Postgres and beat re-dispatches it (RFC 9.5).
    """

    def __init__(self, app: Celery) -> None:
        self.app = app

    def publish(self, kind: OperationKind, operation_ids: Sequence[uuid.UUID]) -> bool:
        """Send ``operation_ids`` to the queue of ``kind``; False if the broker refused."""
        ids = [str(i) for i in operation_ids]
        if not ids:
            return True
        try:
            if kind is OperationKind.CAPTURE:
                for start in range(0, len(ids), IDS_PER_MESSAGE):
                    self._send("membrane.ingest", [ids[start:start + IDS_PER_MESSAGE]])
            else:
                task = ("membrane.maintenance_op" if kind is OperationKind.MAINTENANCE
                        else "membrane.revision")
                for op_id in ids:
                    self._send(task, [op_id])
        except _BROKER_ERRORS as exc:
            log.warning("broker unavailable; %d %s operation(s) stay queued for re-dispatch: %s",
                        len(ids), kind.value, exc)
            return False
        return True

    def _send(self, task: str, args: list[object]) -> None:
        self.app.send_task(task, args=args, retry=False)
