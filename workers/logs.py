"""Logging of the Celery processes, and the request id a task carries (RFC 14.3).

Celery's ``setup_logging`` signal hands the logging of every worker pool and of beat to
:func:`membrane_core.logs.configure` (Celery then installs no handler of its own, and
every line goes to stderr: ``--logfile`` is not used); each pool child sets it up again
after the fork. A task published while a request id is bound
(the API's request, or a task continuing its own work) carries it in a message header; the
worker binds it, with the task's name, id and operation ids, around the task, so every line
the task logs (Celery's own "succeeded" and "failed" lines included) names them.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Mapping, Sequence
from typing import Any

from celery.signals import before_task_publish, setup_logging, task_postrun, task_prerun, worker_process_init

from membrane_core import Settings, logs
from workers import config

log = logging.getLogger(__name__)

#: RFC 14.3: the message header that carries the request id to the worker.
HEADER = "membrane_request_id"

#: Tasks whose first argument is operation ids (a list) or one operation id.
OPERATION_TASKS = frozenset({"membrane.ingest", "membrane.revision", "membrane.maintenance_op"})

#: Operation ids named on each line of a task; a longer list is cut, and ``operations`` counts it.
MAX_LOGGED_IDS = 10

#: What :func:`_setup` chose, for the pool children to choose the same after the fork.
_chosen: dict[str, Any] = {}
#: The log context token of each running task, by task id.
_tokens: dict[str, contextvars.Token[Mapping[str, Any]]] = {}


def level(settings: Settings, celery_level: int | str | None) -> str:
    """RFC 14.3: ``MEMBRANE_LOG_LEVEL`` when set, else Celery's ``--loglevel``, else INFO."""
    if settings.log_level:
        return settings.log_level
    return logs.level_name(celery_level) if celery_level else "INFO"


# Celery ships no type information: its signal decorators are untyped to mypy.


@setup_logging.connect  # type: ignore[untyped-decorator]
def _setup(loglevel: int | str | None = None, **_: Any) -> None:
    s = config.settings()
    _chosen.update(format=s.log_format, level=level(s, loglevel))
    logs.configure(_chosen["format"], _chosen["level"])


@worker_process_init.connect  # type: ignore[untyped-decorator]  # as above
def _setup_after_fork(**_: Any) -> None:
    # the handler inherited through the fork is the parent's; this process gets its own
    if _chosen:
        logs.configure(_chosen["format"], _chosen["level"])


@before_task_publish.connect  # type: ignore[untyped-decorator]  # as above
def _carry_request_id(headers: dict[str, Any] | None = None, **_: Any) -> None:
    rid = logs.request_id()
    if rid is not None and headers is not None:
        headers.setdefault(HEADER, rid)


def operation_ids(task: str, args: Sequence[Any] | None, kwargs: Mapping[str, Any] | None) -> list[str]:
    """The operation ids a task of :data:`OPERATION_TASKS` was given, else none."""
    if task not in OPERATION_TASKS:
        return []
    given = (kwargs or {}).get("operation_ids", (kwargs or {}).get("operation_id"))
    if given is None and args:
        given = args[0]
    if isinstance(given, str):
        return [given]
    return [str(i) for i in given] if isinstance(given, list | tuple) else []


def task_fields(task: Any, task_id: str, args: Any, kwargs: Any) -> dict[str, Any]:
    """RFC 14.3: the log context of one task run: request id, task, task id, operation ids."""
    fields: dict[str, Any] = {"task": task.name, "task_id": task_id}
    rid = getattr(task.request, HEADER, None) or (getattr(task.request, "headers", None) or {}).get(HEADER)
    if logs.is_request_id(rid):  # a header is the publisher's word: a bad one is dropped
        fields["request_id"] = rid
    ids = operation_ids(task.name, args, kwargs)
    if ids:
        fields["operation_ids"] = ids[:MAX_LOGGED_IDS]
        if len(ids) > MAX_LOGGED_IDS:
            fields["operations"] = len(ids)
    return fields


@task_prerun.connect  # type: ignore[untyped-decorator]  # as above
def _bind_task(task_id: str, task: Any, args: Any = None, kwargs: Any = None, **_: Any) -> None:
    _tokens[task_id] = logs.bind(**task_fields(task, task_id, args, kwargs))


@task_postrun.connect  # type: ignore[untyped-decorator]  # as above
def _unbind_task(task_id: str, **_: Any) -> None:
    token = _tokens.pop(task_id, None)
    if token is not None:
        try:
            logs.unbind(token)
        except ValueError:  # bound in another context (a pool that switched threads)
            log.debug("log context of task %s bound elsewhere", task_id)
