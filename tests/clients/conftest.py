"""Fixtures of the SDK tests: the live API of ``tests/api`` and the real workers of ``tests/queue``.

Fixtures are imported rather than listed in ``pytest_plugins``, which pytest accepts only
in the root conftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import psycopg
import pytest
from membrane_client import Client

from tests.api.conftest import ServeFn, api_membrane, serve
from tests.queue.conftest import spawn, worker_env

__all__ = ["api_membrane", "count", "scalar", "sdk", "serve", "spawn", "worker_env"]


def scalar(url: str, sql: str, *args: object) -> int:
    """One integer from the test database."""
    with psycopg.connect(url) as conn:
        row = conn.execute(sql, args).fetchone()  # type: ignore[arg-type,unused-ignore]
        assert row is not None
        return int(row[0])


def count(url: str, text: str | None = None) -> int:
    """Episodic records in Postgres, all or those whose payload text is ``text``."""
    sql = ("SELECT count(*) FROM memory_records r JOIN record_payloads p ON p.record_id = r.id "
           "WHERE r.type = 'episodic'")
    if text is None:
        return scalar(url, sql)
    return scalar(url, sql + " AND p.body->>'text' = %s", text)


@pytest.fixture
def sdk(serve: ServeFn) -> Iterator[Client]:
    """The SDK on a live server without keys that processes writes in-process."""
    http = serve()
    with Client(str(http.base_url), timeout=30.0, backoff=0.01) as client:
        yield client
