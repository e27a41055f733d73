"""The one Celery app of every worker pool, beat and Flower (RFC 9.5).

``celery -A workers.app:app worker -Q ingest`` runs the ingest pool; each queue
(ingest, revision, embedding, llm, maintenance) is its own pool. Each worker
process builds its :class:`~membrane_core.Membrane` once, after the fork
(``worker_process_init``), so connection pools are never shared across processes.
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from pathlib import Path
from typing import Any

from celery import Celery
from celery.signals import worker_init, worker_process_init, worker_process_shutdown
from kombu.entity import Queue

import beat_schedule
import workers.logs  # noqa: F401  (connects the logging signals of every Celery process, RFC 14.3)
from membrane_core import Membrane, Settings
from membrane_core.heap import freeze_heap
from workers import config
from workers import metrics as _metrics  # noqa: F401  (connects a pool's task metrics, RFC 14.2)
from workers import tracing as _tracing  # noqa: F401  (connects the tracing signals, RFC 14.4)

log = logging.getLogger(__name__)

#: The queues, one worker pool each (RFC 9.5).
QUEUES = ("ingest", "revision", "embedding", "llm", "maintenance")

#: Task name -> queue (RFC 9.5).
TASK_ROUTES: dict[str, dict[str, str]] = {
    "membrane.ingest": {"queue": "ingest"},
    "membrane.revision": {"queue": "revision"},
    "membrane.embed_batch": {"queue": "embedding"},
    "membrane.extract_batch": {"queue": "llm"},
    "membrane.maintenance_op": {"queue": "maintenance"},
    "membrane.maintenance_job": {"queue": "maintenance"},
    "membrane.redispatch": {"queue": "maintenance"},
    "membrane.reap": {"queue": "maintenance"},
    "membrane.purge_operations": {"queue": "maintenance"},
    "membrane.review_expiry": {"queue": "maintenance"},
}

#: Worker processes per pool by default; the local embedding model wants one.
DEFAULT_CONCURRENCY = {"ingest": 2, "revision": 1, "embedding": 1, "llm": 1, "maintenance": 1}

#: RSS (KiB) after which a pool process is replaced between tasks; the embedding pool
#: with the local model is exempt (RFC 13.1).
MAX_MEMORY_PER_CHILD_KIB = 256 * 1024

#: RFC 9.5: Redis hands a message no worker acknowledged within this long to another worker,
#: so no task may run this long: its time limit stays well below.
VISIBILITY_TIMEOUT_SECONDS = 3600

#: RFC 9.5: a task is interrupted (``SoftTimeLimitExceeded``) after this long, then its pool
#: process is replaced at the hard limit. A batch is bounded (an ingest message, a batch of
#: ``batch_size``, a 20 s maintenance drain); ten minutes is a provider that hangs.
TASK_SOFT_TIME_LIMIT_SECONDS = 540
TASK_TIME_LIMIT_SECONDS = 600

#: RFC 9.5: a stopped pool (SIGTERM, remapped to Celery's cold shutdown) waits this long for
#: its running tasks, then gives their messages back to the broker and exits. Below the 15 s
#: of ``membrane run``'s stop and compose's ``stop_grace_period``.
SOFT_SHUTDOWN_SECONDS = 10.0

#: RFC 9.5: the environment of every pool: SIGTERM (a deploy's stop) starts the soft shutdown
#: above instead of a warm shutdown that waits for tasks without a bound. billiard reads it
#: when it is imported, so it is set for the process, not in the app.
WORKER_ENV = {"REMAP_SIGTERM": "SIGQUIT"}

#: RFC 9.5: what a pool leaves off. Gossip (each worker consuming every other worker's
#: events) and mingle (a start-up round trip to every worker for revoked ids and clocks) serve
#: revokes, elections and clock sync, none of which a stateless queue consumer uses; their cost
#: grows with the fleet. Heartbeats stay on: Flower's ``worker_online`` comes from them.
WORKER_FLAGS = ("--without-gossip", "--without-mingle")

#: RFC 12.4: the scheduler's group of this process's session, where Linux has autogroups.
AUTOGROUP = Path("/proc/self/autogroup")


def broker_url(settings: Settings) -> str:
    """The broker: ``MEMBRANE_REDIS_URL``, else a local Redis on the default port."""
    return settings.redis_url or "redis://127.0.0.1:6379/0"


def make_app(settings: Settings | None = None) -> Celery:
    """RFC 9.5: the Celery app configured from ``settings``."""
    s = settings or config.settings()
    app = Celery("membrane", include=["workers.tasks"])
    app.conf.update(
        broker_url=broker_url(s),
        broker_connection_retry_on_startup=True,
        broker_transport_options={
            "socket_connect_timeout": 2,
            # RFC 9.5: above every task's time limit, or a running task is delivered twice
            "visibility_timeout": VISIBILITY_TIMEOUT_SECONDS,
        },
        task_ignore_result=True,
        task_serializer="json",
        accept_content=["json"],
        # kombu's Queue.__init__ carries no annotations
        task_queues=[Queue(name) for name in QUEUES],  # type: ignore[no-untyped-call]
        task_default_queue="maintenance",
        task_routes=TASK_ROUTES,
        # RFC 9.4, 9.5: a message is acknowledged after its task, and one whose pool process
        # died (a SIGKILL, an OOM kill, a cancelled task at shutdown) goes back to the queue:
        # every task is an idempotent claim, so running it again is safe
        task_acks_late=True,
        task_reject_on_worker_lost=True,
        # RFC 9.5: interrupt, then end, a task long before Redis would deliver it again
        task_soft_time_limit=TASK_SOFT_TIME_LIMIT_SECONDS,
        task_time_limit=TASK_TIME_LIMIT_SECONDS,
        # RFC 9.5: a deploy's SIGTERM waits this long for running tasks, then requeues them;
        # an idle pool exits at once (what it holds unstarted goes back when it disconnects)
        worker_soft_shutdown_timeout=SOFT_SHUTDOWN_SECONDS,
        worker_enable_soft_shutdown_on_idle=False,
        worker_prefetch_multiplier=1,
        worker_send_task_events=True,
        task_send_sent_event=True,
        worker_hijack_root_logger=False,
        beat_schedule=beat_schedule.build(s),
        timezone="UTC",
        enable_utc=True,
    )
    return app


app = make_app()

_state: dict[str, Membrane] = {}


#: RFC 10.5: how long a worker waits for a pooled connection. Nothing waits on a worker, so
#: under load it queues for a connection rather than failing its task; while Postgres is
#: known to be down the outage circuit refuses at once all the same.
WORKER_POOL_TIMEOUT_SECONDS = 30.0


def membrane() -> Membrane:
    """This process's Membrane, built on first use (RFC 9.5)."""
    m = _state.get("membrane")
    if m is None:
        s = config.settings()
        # RFC 11.1: workers never migrate (the stack or `membrane migrate` does, once);
        # one started on an old schema fails here, naming the remedy
        m = _state["membrane"] = Membrane(
            s.model_copy(update={"request_pool_timeout_seconds": WORKER_POOL_TIMEOUT_SECONDS}),
            run_migrations=False,
        )
    return m


# celery ships no type information: its signal decorators are untyped to mypy
@worker_init.connect  # type: ignore[untyped-decorator]
def _embedding_pool_priority(sender: Any = None, **_: Any) -> None:
    # RFC 12.4: serving a query comes before background embedding on a shared host, so a pool
    # that consumes only the embedding queue lowers its CPU priority before it forks its
    # processes, which inherit it
    queues = set(getattr(sender, "app", app).amqp.queues.consume_from or ())
    nice = config.settings().embedding_pool_nice
    if queues == {"embedding"} and nice:
        os.nice(nice)
        # With autogroups (Linux's default on a desktop or a server) a nice value weighs only
        # within its session's group, and `membrane run` gives each child a session of its
        # own: the pool that leads its session lowers its group's priority too
        if os.getsid(0) == os.getpid():
            with contextlib.suppress(OSError):
                AUTOGROUP.write_text(str(nice))
        log.info("embedding pool at nice +%d", nice)


@worker_process_init.connect  # type: ignore[untyped-decorator]
def _build_after_fork(**_: Any) -> None:
    # Resources made before the fork belong to the parent; start from scratch.
    _state.clear()
    membrane()
    # RFC 13.1: what the process serves with is built; a task's collections walk only its own
    freeze_heap()


@worker_process_shutdown.connect  # type: ignore[untyped-decorator]  # as above
def _close(**_: Any) -> None:
    m = _state.pop("membrane", None)
    if m is not None:
        m.close()


def worker_argv(queue: str, *, concurrency: int | None = None, loglevel: str = "INFO") -> list[str]:
    """The command line of the worker pool for ``queue`` (RFC 13.1)."""
    if queue not in QUEUES:
        raise ValueError(f"queue must be one of {', '.join(QUEUES)}, got {queue!r}")
    argv = [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.app:app",
        "worker",
        "-Q",
        queue,
        "-n",
        f"{queue}@%h",
        "-c",
        str(concurrency or DEFAULT_CONCURRENCY[queue]),
        f"--loglevel={loglevel}",
        "-E",
        *WORKER_FLAGS,
    ]
    if queue != "embedding":
        argv.append(f"--max-memory-per-child={MAX_MEMORY_PER_CHILD_KIB}")
    return argv


def beat_argv(schedule_file: str, *, loglevel: str = "INFO") -> list[str]:
    """The command line of Celery beat; ``schedule_file`` keeps its last-run times (RFC 9.5)."""
    return [
        sys.executable,
        "-m",
        "celery",
        "-A",
        "workers.app:app",
        "beat",
        "-s",
        schedule_file,
        f"--loglevel={loglevel}",
    ]


def flower_argv(
    settings: Settings, *, address: str = "127.0.0.1", port: int = 5555, open_access: bool = False
) -> list[str]:
    """The command line of Flower on the same broker (RFC 14.1).

    It runs ``workers.flower``, which reads ``MEMBRANE_FLOWER_BASIC_AUTH`` from the
    environment (so the secret is not on the command line) and refuses to start without
    it unless ``open_access`` is True (``--open``). The TLS files and the insecure
    opt-in (RFC 7.5) also come from the environment.
    """
    argv = [sys.executable, "-m", "workers.flower", f"--address={address}", f"--port={port}"]
    if open_access:
        argv.append("--open")
    return argv
