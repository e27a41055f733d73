"""Connection pools and driver-error translation (RFC 11.1, 13.2)."""

from __future__ import annotations

import contextlib
import json
import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
from pgvector.psycopg import register_vector
from psycopg_pool import ConnectionPool

from membrane_core import errors
from membrane_core.storage import embedded, migrate

log = logging.getLogger(__name__)


def resolve_dsn(database_url: str | None, data_dir: Path) -> str:
    """RFC 11.2: the configured URL as is, else the embedded server's."""
    return database_url or embedded.dsn(data_dir)


_DECODE = json.JSONDecoder().decode


def _loads(data: bytes | str) -> Any:
    """``json.loads`` without sniffing the encoding: the server sends UTF-8 (RFC 11.1).
    A retrieval parses four JSON columns a record; the sniffing was a third of each."""
    return _DECODE(data.decode() if isinstance(data, bytes) else data)


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)
    psycopg.types.json.set_json_loads(_loads, conn)


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Map driver failures to the core hierarchy at the storage boundary (RFC 10.2)."""
    try:
        yield
    except psycopg.errors.CheckViolation as exc:
        raise errors.InvalidInput(f"the database refused a value: {exc.diag.message_primary}") from exc
    except (psycopg.OperationalError, psycopg.errors.AdminShutdown) as exc:
        raise errors.Unavailable(f"Postgres is unavailable: {exc}") from exc
    except psycopg.errors.SerializationFailure as exc:
        raise errors.Unavailable("transaction conflict, retry") from exc


class Database:
    """A migrated Postgres with a primary pool and an optional read pool (RFC 13.2)."""

    def __init__(
        self,
        dsn: str,
        *,
        embedding_dim: int,
        read_dsn: str | None = None,
        min_size: int = 1,
        max_size: int = 8,
        run_migrations: bool = True,
    ) -> None:
        self.dsn = dsn
        self.embedding_dim = embedding_dim
        with translate_errors():
            if run_migrations:
                migrate.migrate(dsn, embedding_dim)
            self.pool = ConnectionPool(
                dsn, min_size=min_size, max_size=max_size, configure=_configure, open=True,
                kwargs={"autocommit": False}, name="membrane-primary",
            )
            self.read_pool = (
                ConnectionPool(read_dsn, min_size=min_size, max_size=max_size,
                               configure=_configure, open=True, name="membrane-read")
                if read_dsn else self.pool
            )

    @contextlib.contextmanager
    def transaction(self) -> Iterator[psycopg.Connection]:
        """A primary connection inside one transaction, committed on success."""
        with translate_errors(), self.pool.connection() as conn, conn.transaction():
            yield conn

    @contextlib.contextmanager
    def reader(self) -> Iterator[psycopg.Connection]:
        """A connection for reads (the replica where configured, RFC 13.2)."""
        with translate_errors(), self.read_pool.connection() as conn, conn.transaction():
            yield conn

    def close(self) -> None:
        """Close every pool."""
        if self.read_pool is not self.pool:
            self.read_pool.close()
        self.pool.close()
