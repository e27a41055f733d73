"""Shared fixtures: one embedded Postgres per test session, a fresh database per test."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from membrane_core import Membrane, Settings
from membrane_core.storage import embedded
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from tests.support import services

EMBEDDING_DIM = 32


@pytest.fixture(scope="session")
def pg_admin_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """Admin URL of the session's embedded Postgres with a migrated template database."""
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
    database = Database(database_url, embedding_dim=EMBEDDING_DIM, run_migrations=False,
                        min_size=1, max_size=4)
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


@pytest.fixture(scope="session")
def redis_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A private redis-server for the session."""
    with services.redis_server(tmp_path_factory.mktemp("redis")) as url:
        yield url
