"""Fixtures shared by every test directory, and the markers each directory's tests carry.

One embedded Postgres per test run and a fresh database per test; the live API (``serve``);
real Celery worker and beat subprocesses (``spawn``) on a private redis-server.

Markers (``pyproject.toml``), added here by directory so that a test file does not list them:

- ``integration``: every test under ``tests/integration/``, ``tests/api/``, ``tests/clients/``,
  ``tests/examples/``, ``tests/fault/`` and ``tests/console/``, and every other test that uses the
  shared Postgres (a test elsewhere that starts an embedded Postgres of its own says so with
  ``@pytest.mark.integration``);
- ``queue``: every test under ``tests/queue/``; a test elsewhere that starts real workers or a
  redis-server says so with ``@pytest.mark.queue``.

``tests/unit/`` needs no service: ``pytest -m "not integration and not queue"`` runs exactly it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
import redis
from pydantic import SecretStr

from api.app import create_app
from api.ratelimit import Unlimited
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import InlineDispatcher
from membrane_core.storage import embedded
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from tests.support import services
from tests.support.api import ServeFn, Server
from tests.support.processes import ROOT, Proc, Spawn
from tests.support.scripted_model import ScriptedModel, Step
from tests.support.services import EMBEDDING_DIM

# RFC 12.1: the embedding provider defaults to the local model when its extra is installed
# (as it is here). Tests choose theirs explicitly; the rest, and every worker process they
# start, embed nothing, as a store without a model does.
os.environ.setdefault("MEMBRANE_EMBEDDING_PROVIDER", "none")

TESTS = Path(__file__).resolve().parent

#: The markers of every test under ``tests/<directory>/``.
DIRECTORY_MARKERS: dict[str, tuple[str, ...]] = {
    "integration": ("integration",),
    "api": ("integration",),
    "clients": ("integration",),
    "examples": ("integration",),
    "fault": ("integration",),
    "console": ("integration",),
    "queue": ("queue",),
}


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        path = item.path.resolve()
        directory = path.relative_to(TESTS).parts[0] if path.is_relative_to(TESTS) else ""
        names = set(DIRECTORY_MARKERS.get(directory, ()))
        if "pg_admin_url" in getattr(item, "fixturenames", ()):
            names.add("integration")  # a queue test on the shared Postgres needs it too
        present = {mark.name for mark in item.iter_markers()}
        for name in sorted(names - present):
            item.add_marker(getattr(pytest.mark, name))


# -- Postgres -----------------------------------------------------------------------------


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Admin URL of the run's embedded Postgres with a migrated template database."""
    data_dir = tmp_path_factory.mktemp("pg")
    yield services.start_postgres(data_dir, EMBEDDING_DIM)
    embedded.stop(data_dir)


@pytest.fixture
def database_url(pg_admin_url: str) -> Iterator[str]:
    """A fresh, migrated database for one test."""
    with services.fresh_database(pg_admin_url) as url:
        yield url


@pytest.fixture
def db(database_url: str) -> Iterator[Database]:
    database = Database(
        database_url, embedding_dim=EMBEDDING_DIM, run_migrations=False, min_size=1, max_size=4
    )
    yield database
    database.close()


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def settings(tmp_path: Path, database_url: str) -> Settings:
    return Settings(database_url=database_url, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM)


@pytest.fixture
def membrane(settings: Settings, db: Database, clock: FakeClock) -> Iterator[Membrane]:
    m = Membrane(settings, database=db, clock=clock)
    yield m


# -- the live API -------------------------------------------------------------------------


@pytest.fixture
def api_membrane(settings: Settings, db: Database) -> Membrane:
    """A Membrane on the test database with the real clock (operations wait on real time)."""
    return Membrane(settings, database=db)


@pytest.fixture
def serve(api_membrane: Membrane) -> Iterator[ServeFn]:
    """``serve(dispatcher=..., keys=..., keys_file=..., **create_app_kwargs)`` → an httpx client on a
    live server."""
    stack: list[Any] = []

    def start(
        *,
        dispatcher: Any = None,
        keys: dict[str, Any] | None = None,
        headers: dict[str, str] | None = None,
        broker_url: str | None = None,
        metrics_token: str | None = None,
        keys_file: Path | None = None,
        **kwargs: Any,
    ) -> httpx.Client:
        settings = api_membrane.settings
        if keys is not None:
            settings = settings.model_copy(update={"api_keys": keys})
        if keys_file is not None:
            settings = settings.model_copy(update={"api_keys_file": keys_file})
        if metrics_token is not None:
            settings = settings.model_copy(update={"metrics_token": SecretStr(metrics_token)})
        if broker_url is not None:  # the app builds its real Celery dispatcher on this broker
            settings = settings.model_copy(update={"redis_url": broker_url})
        elif dispatcher is None:
            dispatcher = InlineDispatcher(api_membrane.inbox_worker)
        if broker_url is None:  # no private Redis: no rate limits (RFC 10.6), not the host's Redis
            kwargs.setdefault("rate_limiter", Unlimited())
        app = create_app(settings, membrane=api_membrane, dispatcher=dispatcher, **kwargs)
        server = Server(app).__enter__()
        client = httpx.Client(base_url=server.url, headers=headers or {}, timeout=60)
        stack.append((server, client))
        return client

    yield start
    for server, client in reversed(stack):
        client.close()
        server.__exit__()


# -- redis and real workers ---------------------------------------------------------------


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for the run."""
    with services.redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url


@pytest.fixture
def worker_env(database_url: str, redis_url: str, tmp_path: Path) -> dict[str, str]:
    """Environment of worker and beat subprocesses for this test's database."""
    redis.Redis.from_url(redis_url).flushdb()
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env.update(
        MEMBRANE_DATABASE_URL=database_url,
        MEMBRANE_REDIS_URL=redis_url,
        MEMBRANE_EMBEDDING_DIM=str(EMBEDDING_DIM),
        MEMBRANE_DATA_DIR=str(tmp_path),
        MEMBRANE_POOL_MAX_SIZE="4",
        PYTHONPATH=str(ROOT),
    )
    return env


@pytest.fixture
def spawn(worker_env: dict[str, str], tmp_path: Path) -> Iterator[Spawn]:
    """Start ``celery worker`` / ``celery beat`` subprocesses; all are stopped at the end."""
    procs: list[Proc] = []

    def start(
        kind: str,
        queues: str = "ingest",
        *,
        concurrency: int = 1,
        env: dict[str, str] | None = None,
        name: str | None = None,
    ) -> Proc:
        n = len(procs)
        base = [sys.executable, "-m", "celery", "-A", "workers.app:app"]
        if kind == "worker":
            node = f"{name or queues.replace(',', '-')}{n}@%h"
            argv = [
                *base,
                "worker",
                "-Q",
                queues,
                "-c",
                str(concurrency),
                "-n",
                node,
                "--loglevel=INFO",
                "--without-gossip",
                "--without-mingle",
                "-E",
            ]
            ready = "ready."
        else:
            argv = [*base, "beat", "-s", str(tmp_path / f"beat{n}"), "--loglevel=DEBUG"]
            ready = "beat: Starting"
        proc = Proc(argv, {**worker_env, **(env or {})}, tmp_path / f"{kind}{n}.log")
        procs.append(proc)
        proc.wait_for(ready)
        return proc

    yield start
    for p in procs:
        p.stop()


@pytest.fixture
def scripted_model() -> Iterator[Callable[[dict[int, Step]], ScriptedModel]]:
    """``scripted_model(script)`` → a started :class:`ScriptedModel`, stopped after the test."""
    started: list[ScriptedModel] = []

    def start(script: dict[int, Step]) -> ScriptedModel:
        model = ScriptedModel(script)
        model.thread.start()
        started.append(model)
        return model

    yield start
    for model in started:
        model.server.shutdown()
        model.server.server_close()
        model.thread.join(10)
