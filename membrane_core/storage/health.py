"""Readiness probe of the primary with a short connect timeout (RFC 14.2)."""

from __future__ import annotations

import psycopg

from membrane_core import errors
from membrane_core.storage.queries import q


def ping(dsn: str, timeout: float = 2.0) -> None:
    """Raise ``errors.Unavailable`` unless Postgres answers within about ``timeout`` seconds.

    RFC 14.2: a fresh connection, not the pool, so a probe never waits on the pool's
    own (long) acquisition timeout.
    """
    try:
        with psycopg.connect(dsn, connect_timeout=max(1, round(timeout)), autocommit=True) as conn:
            conn.execute(q("health_ping"))
    except psycopg.Error as exc:
        raise errors.Unavailable(f"Postgres is unavailable: {exc}") from exc
