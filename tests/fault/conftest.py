"""Fault tests: real services stopped hard under load, with the API kept running (RFC 10.5)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.services import PrivatePostgres, Redis


@pytest.fixture
def private_postgres(tmp_path: Path) -> Iterator[PrivatePostgres]:
    """A Postgres of this test alone; stopped at the end."""
    pg = PrivatePostgres(tmp_path / "private-pg")
    try:
        yield pg
    finally:
        pg.close()


@pytest.fixture
def killable_redis(tmp_path: Path) -> Iterator[Redis]:
    """A redis-server of this test alone that can be SIGKILLed and started again on its port."""
    broker = Redis(tmp_path / "redis")
    broker.start()
    try:
        yield broker
    finally:
        broker.kill()
