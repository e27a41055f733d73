"""Real Celery worker subprocesses against the test run's Postgres and a real redis-server."""

from __future__ import annotations

import pytest

from membrane_core import Membrane, Settings
from membrane_core.storage.db import Database
from workers.app import make_app
from workers.dispatch import CeleryDispatcher


@pytest.fixture
def live(settings: Settings, db: Database) -> Membrane:
    """A Membrane on the test database with the real clock (workers use the real clock)."""
    return Membrane(settings, database=db)


@pytest.fixture
def dispatcher(redis_url: str) -> CeleryDispatcher:
    return CeleryDispatcher(make_app(Settings(redis_url=redis_url)))
