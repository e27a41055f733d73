"""The Celery settings of a fleet of pools, each with its reason (RFC 9.5).

What they do under a real SIGTERM is tests/queue/test_deploy_drill.py's; here, their values
and how they fit together: time limits below Redis's visibility timeout, the soft shutdown
below the supervisor's and compose's stop bounds, the pools' command lines and environment.
"""

from __future__ import annotations

import inspect
from pathlib import Path

from celery import Celery

import workers.tasks  # noqa: F401  (registers every task on the app)
from membrane_cli.stack import Stack, StackOptions
from membrane_core import Settings
from workers.app import (
    QUEUES,
    SOFT_SHUTDOWN_SECONDS,
    TASK_ROUTES,
    TASK_SOFT_TIME_LIMIT_SECONDS,
    TASK_TIME_LIMIT_SECONDS,
    VISIBILITY_TIMEOUT_SECONDS,
    WORKER_ENV,
    WORKER_FLAGS,
    app,
    make_app,
    worker_argv,
)


def over_the_visibility_timeout(celery: Celery) -> list[str]:
    """Tasks of ``celery`` that could still run, or wait for a retry, when Redis delivers their
    message again; or whose soft limit does not come before their hard one."""
    conf = celery.conf
    visibility = conf.broker_transport_options["visibility_timeout"]
    out = []
    for name, task in sorted(celery.tasks.items()):
        hard = task.time_limit or conf.task_time_limit
        soft = task.soft_time_limit or conf.task_soft_time_limit
        backoff = getattr(task, "retry_backoff_max", 0) if getattr(task, "autoretry_for", ()) else 0
        if not (hard and soft and soft < hard < visibility and backoff < visibility):
            out.append(name)
    return out


def noop() -> None:
    """A task body."""


def test_every_task_ends_before_redis_would_deliver_it_again() -> None:
    assert set(TASK_ROUTES) <= set(app.tasks)  # the tasks are registered: the check reads them
    assert over_the_visibility_timeout(app) == []
    conf = app.conf
    assert conf.broker_transport_options["visibility_timeout"] == VISIBILITY_TIMEOUT_SECONDS == 3600
    assert (conf.task_soft_time_limit, conf.task_time_limit) == (540, 600)
    assert TASK_SOFT_TIME_LIMIT_SECONDS < TASK_TIME_LIMIT_SECONDS < VISIBILITY_TIMEOUT_SECONDS
    # the check finds a task that outlives the timeout, and a soft limit after the hard one
    other = make_app(Settings(redis_url="redis://127.0.0.1:1/0"))
    other.task(name="long", time_limit=VISIBILITY_TIMEOUT_SECONDS)(noop)
    other.task(name="late", soft_time_limit=TASK_TIME_LIMIT_SECONDS + 1)(noop)
    assert over_the_visibility_timeout(other) == ["late", "long"]  # Celery's own tasks pass


def test_every_task_is_acknowledged_late_and_requeued_when_its_process_dies() -> None:
    """RFC 9.4: every task is an idempotent claim, so running it again is safe."""
    for name in TASK_ROUTES:
        task = app.tasks[name]
        assert task.acks_late and task.reject_on_worker_lost, name
    assert app.conf.worker_prefetch_multiplier == 1


def test_a_stopped_pool_soft_shuts_down_within_the_supervisors_bound() -> None:
    conf = app.conf
    assert conf.worker_soft_shutdown_timeout == SOFT_SHUTDOWN_SECONDS == 10.0
    # `membrane run` sends SIGKILL to what outlives its SIGTERM by this much (RFC 13.1)
    kill_after = inspect.signature(Stack.stop).parameters["timeout"].default
    assert 0 < SOFT_SHUTDOWN_SECONDS < kill_after
    # an idle pool exits at once: what it holds unstarted goes back when it disconnects
    assert conf.worker_enable_soft_shutdown_on_idle is False
    # SIGTERM starts Celery's cold shutdown, the one the soft bound applies to
    assert WORKER_ENV == {"REMAP_SIGTERM": "SIGQUIT"}


def test_membrane_run_starts_every_pool_with_the_fleets_command_line_and_environment(tmp_path: Path) -> None:
    stack = Stack(Settings(redis_url=None, data_dir=tmp_path), StackOptions(data_dir=tmp_path))
    pools = {c.name: c for c in stack.plan() if c.name.startswith("worker-")}
    assert set(pools) == {f"worker-{q}" for q in QUEUES}
    for q in QUEUES:
        child = pools[f"worker-{q}"]
        assert child.argv == worker_argv(q)
        assert child.env["REMAP_SIGTERM"] == "SIGQUIT", q
        # gossip and mingle serve nothing here; heartbeats feed Flower's worker_online
        assert {"--without-gossip", "--without-mingle"} <= set(child.argv), q
        assert "--without-heartbeat" not in child.argv and "-E" in child.argv, q
    assert set(WORKER_FLAGS) == {"--without-gossip", "--without-mingle"}


def test_membrane_run_gives_each_child_its_database_role(tmp_path: Path) -> None:
    """RFC 10.5: the API answers people, the pools work through batches, the sweeps longest;
    each child's connections carry its role's timeouts."""
    from membrane_core.storage.db import ROLE_TIMEOUTS_MS

    stack = Stack(Settings(redis_url=None, data_dir=tmp_path), StackOptions(data_dir=tmp_path))
    roles = {c.name: c.env.get("MEMBRANE_DATABASE_ROLE") for c in stack.plan()}
    assert roles["api"] == "api" and roles["worker-maintenance"] == "sweep"
    assert {roles[f"worker-{q}"] for q in QUEUES if q != "maintenance"} == {"pool"}
    limits = {r: ROLE_TIMEOUTS_MS[r]["statement_timeout"] for r in ("api", "pool", "sweep")}
    assert limits["api"] < limits["pool"] < limits["sweep"]
