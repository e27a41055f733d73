"""Connection pools, the outage circuit and driver-error translation (RFC 10.5, 11.1, 13.2)."""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, Literal

import psycopg
from pgvector.psycopg import register_vector
from psycopg import sql
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolClosed, PoolTimeout, TooManyRequests
from pydantic_core import from_json

from membrane_core import errors
from membrane_core.storage import embedded, hangs, health, migrate, replica
from membrane_core.storage.queries import q

log = logging.getLogger(__name__)

#: RFC 10.5: how long a pool keeps reconnecting in the background after it lost a
#: connection. psycopg_pool doubles its delay between attempts up to ``reconnect_timeout``
#: (five minutes by default), so after a long outage it would sit out minutes of a healthy
#: server; past this it gives up and the next request that needs a connection asks again.
RECONNECT_SECONDS = 2.0

#: RFC 10.5: the connect timeout of the fresh connection that confirms a suspected outage.
VERIFY_TIMEOUT_SECONDS = 2.0

#: SQLSTATEs that mean the server ended or refused the connection, not the statement (RFC 10.5):
#: admin, crash and startup/shutdown; class 08 is matched by prefix.
_CONNECTION_LOST = frozenset({"57P01", "57P02", "57P03"})


#: RFC 10.5: each role's server-side bounds, in milliseconds: a statement, a lock wait, and a
#: transaction left idle. The API answers people; pools and sweeps work through batches; the
#: command line runs migrations, imports and exports, bounded by whoever runs it.
ROLE_TIMEOUTS_MS: dict[str, dict[str, int]] = {
    "api": {
        "statement_timeout": 60_000,
        "lock_timeout": 10_000,
        "idle_in_transaction_session_timeout": 60_000,
    },
    "pool": {
        "statement_timeout": 300_000,
        "lock_timeout": 30_000,
        "idle_in_transaction_session_timeout": 300_000,
    },
    "sweep": {
        "statement_timeout": 900_000,
        "lock_timeout": 60_000,
        "idle_in_transaction_session_timeout": 900_000,
    },
    "cli": {"statement_timeout": 0, "lock_timeout": 0, "idle_in_transaction_session_timeout": 0},
}

#: RFC 10.5: TCP keepalives and a bound on unacknowledged data, so a connection over a network
#: that silently drops packets fails in seconds instead of the system's two hours (libpq
#: applies them to TCP connections only).
TCP_OPTIONS: dict[str, int] = {
    "keepalives": 1,
    "keepalives_idle": 10,
    "keepalives_interval": 3,
    "keepalives_count": 3,
    "tcp_user_timeout": 20_000,
}


#: RFC 10.5: the same bounds on the server's end of each connection: a worker host that drops
#: off the network has its session (and its locks) ended in about 20 s, not after the role's
#: idle-transaction timeout or never (a session outside a transaction).
SERVER_TCP_SETTINGS: dict[str, int] = {
    "tcp_keepalives_idle": 10,
    "tcp_keepalives_interval": 3,
    "tcp_keepalives_count": 3,
    "tcp_user_timeout": 20_000,
}


def role_options(dsn: str, role: str) -> dict[str, Any]:
    """RFC 10.5: the connection parameters of ``role``: its timeouts and the server's TCP
    bounds (after any ``options`` the URL gives), and the client's TCP options."""
    given = str(conninfo_to_dict(dsn).get("options") or "")
    settings = {**ROLE_TIMEOUTS_MS[role], **SERVER_TCP_SETTINGS}
    return {
        "options": " ".join([given, *(f"-c {k}={v}" for k, v in settings.items())]).strip(),
        **TCP_OPTIONS,
    }


def resolve_dsn(database_url: str | None, data_dir: Path) -> str:
    """RFC 11.2: the configured URL as is, else the embedded server's."""
    return database_url or embedded.dsn(data_dir)


def _loads(data: bytes | str) -> Any:
    """A ``json``/``jsonb`` value by pydantic's Rust parser, on the server's UTF-8 bytes as they
    come (RFC 11.1). A list or retrieval parses four JSON columns a record: the standard
    library's decoder, even without its encoding sniffing, took 2 to 9 times as long."""
    return from_json(data)


def _configure(conn: psycopg.Connection) -> None:
    register_vector(conn)
    psycopg.types.json.set_json_loads(_loads, conn)


@contextlib.contextmanager
def _autocommit(conn: psycopg.Connection) -> Iterator[None]:
    """``conn`` without a transaction around its statements while the block runs (a read of
    one statement, RFC 13.2); back in the pool as it came."""
    conn.autocommit = True
    try:
        yield
    finally:
        if not conn.closed and conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.IDLE:
            conn.autocommit = False


@contextlib.contextmanager
def translate_errors() -> Iterator[None]:
    """Map driver failures to the core hierarchy at the storage boundary (RFC 10.2)."""
    try:
        yield
    except psycopg.errors.CheckViolation as exc:
        raise errors.InvalidInput(f"the database refused a value: {exc.diag.message_primary}") from exc
    except psycopg.DataError as exc:
        # SQLSTATE class 22 (a NUL in text, a value out of range) and the driver's own refusals:
        # the input's fault, never a 500; the accept-time checks normally catch these first.
        raise errors.InvalidInput(f"the database refused a value: {exc.diag.message_primary or exc}") from exc
    except psycopg.OperationalError as exc:  # AdminShutdown and PoolTimeout included
        # the driver's text names hosts, ports and socket paths: the log gets it, callers do not
        log.warning("Postgres is unavailable: %s", exc)
        raise errors.Unavailable("Postgres is unavailable") from exc
    except psycopg.errors.SerializationFailure as exc:
        raise errors.Unavailable("transaction conflict, retry") from exc


def _failure(exc: BaseException | None, conn: psycopg.Connection | None) -> str | None:
    """RFC 10.5: ``"timeout"`` (no pooled connection in time), ``"lost"`` (the connection died) or
    None (the server answered, or the pool was closed or full: no outage)."""
    if isinstance(exc, PoolTimeout):
        return "timeout"
    if not isinstance(exc, psycopg.OperationalError) or isinstance(exc, (PoolClosed, TooManyRequests)):
        return None
    state = exc.sqlstate
    if (
        (conn is not None and conn.broken)
        or state is None
        or state.startswith("08")
        or state in _CONNECTION_LOST
    ):
        return "lost"
    return None  # a statement the server refused (a cancelled query, a lock timeout ...)


class _Server:
    """One Postgres server: its pool, its circuit and the background check of both (RFC 10.5)."""

    def __init__(self, dsn: str, pool: ConnectionPool, retry_seconds: float) -> None:
        self.dsn = dsn
        self.pool = pool
        self.circuit = health.Circuit(retry_seconds)
        #: RFC 10.5: a server that stops answering opens the circuit within a second
        self.watch = hangs.Watch(dsn, self.circuit.failed)
        self._lock = threading.Lock()
        self._checking = False
        self._quiet_until = 0.0

    def failed(self, kind: str) -> None:
        """A request met a connection-level failure of ``kind``."""
        if self.circuit.is_open:
            self.circuit.failed()  # a trial (or a straggler) failed: wait another window
        else:
            # Confirm with a fresh connection before refusing everyone: one backend killed
            # or a pool short of connections under load is no outage.
            self._check(confirm=True, idle=kind == "lost")

    def down(self) -> None:
        """Readiness found the server unreachable: refuse requests and drop dead idle connections."""
        self.circuit.failed()
        self._check(confirm=False, idle=True)

    def _check(self, *, confirm: bool, idle: bool) -> None:
        with self._lock:
            if self._checking or (confirm and time.monotonic() < self._quiet_until):
                return
            self._checking = True
        # In the background: a probe or a pool check may wait on a dead host's timeouts.
        threading.Thread(
            target=self._run_check, args=(confirm, idle), daemon=True, name="membrane-db-check"
        ).start()

    def _run_check(self, confirm: bool, idle: bool) -> None:
        try:
            if confirm:
                try:
                    health.ping(self.dsn, VERIFY_TIMEOUT_SECONDS)
                except errors.Unavailable as exc:
                    log.warning(
                        "Postgres is unreachable; requests are refused for %.1f s at a time "
                        "until it answers: %s",
                        self.circuit.retry_seconds,
                        exc.__cause__,
                    )
                    self.circuit.failed()
                    idle = True
            if idle:
                # discard the idle connections that died with the server, all at once,
                # rather than each failing one request after it is back
                self.pool.check()
        except Exception:  # a background check must never raise; the next failure retries it
            log.debug("postgres check failed", exc_info=True)
        finally:
            with self._lock:
                self._checking = False
                self._quiet_until = time.monotonic() + self.circuit.retry_seconds


#: RFC 13.2: the server that served a read.
ServedBy = Literal["primary", "replica"]

#: A connection as the core's services see it; only ``storage`` imports psycopg itself.
Connection = psycopg.Connection


class Database:
    """A Postgres with a primary pool and an optional read pool (RFC 13.2).

    Opening one does not migrate (RFC 11.1): the entry point does, or passes
    ``run_migrations=True`` to have it done here first.

    RFC 10.5: ``timeout`` bounds the wait for a pooled connection (None: psycopg_pool's
    30 s); each server has a :class:`~membrane_core.storage.health.Circuit` that refuses
    requests at once for ``outage_retry_seconds`` after a confirmed connection failure.
    """

    def __init__(
        self,
        dsn: str,
        *,
        embedding_dim: int,
        read_dsn: str | None = None,
        min_size: int = 1,
        max_size: int = 8,
        run_migrations: bool = False,
        timeout: float | None = None,
        outage_retry_seconds: float = 1.0,
        role: str = "api",
        replica_wait_seconds: float = 0.5,
        replica_max_lag_seconds: float = 30.0,
    ) -> None:
        self.dsn = dsn
        self.embedding_dim = embedding_dim
        self.timeout = timeout
        self.replica_wait_seconds = replica_wait_seconds
        self.replica_max_lag_seconds = replica_max_lag_seconds
        #: RFC 13.2: reads sent to the primary although a replica is configured, by reason
        self.fallbacks: dict[str, int] = {"lagging": 0, "down": 0, "token": 0}
        opts: dict[str, Any] = {
            "min_size": min_size,
            "max_size": max_size,
            "configure": _configure,
            "open": True,
            "reconnect_timeout": RECONNECT_SECONDS,
        }
        if timeout is not None:
            opts["timeout"] = timeout
        with translate_errors():
            if run_migrations:
                migrate.migrate(dsn, embedding_dim)
            self.pool = ConnectionPool(
                dsn, kwargs={"autocommit": False, **role_options(dsn, role)}, name="membrane-primary", **opts
            )
            self.read_pool = (
                ConnectionPool(read_dsn, kwargs=role_options(read_dsn, role), name="membrane-read", **opts)
                if read_dsn
                else self.pool
            )
        self._primary = _Server(dsn, self.pool, outage_retry_seconds)
        self._replica = _Server(read_dsn, self.read_pool, outage_retry_seconds) if read_dsn else self._primary
        self._read_dsn = read_dsn
        self._monitor: replica.Monitor | None = None
        self._monitor_lock = threading.Lock()
        #: The primary's circuit (RFC 10.5): open while the primary is believed down.
        self.health = self._primary.circuit

    @contextlib.contextmanager
    def _connection(self, server: _Server, *, single: bool = False) -> Iterator[psycopg.Connection]:
        """A pooled connection inside one transaction, through the server's circuit (RFC 10.5).
        ``single``: the caller runs one statement, which is its own transaction: no ``BEGIN``
        and ``COMMIT`` round trips around it (RFC 13.2)."""
        server.circuit.admit()  # raises health.Outage while the server is believed down
        conn: psycopg.Connection | None = None
        try:
            with (
                translate_errors(),
                server.pool.connection() as conn,
                server.watch.using(conn),
                _autocommit(conn) if single else conn.transaction(),
            ):
                if server.circuit.is_open and not single:
                    server.circuit.succeeded()  # the server answered BEGIN: it is back
                yield conn
                if server.circuit.is_open:
                    server.circuit.succeeded()  # the server answered: it is back
        except errors.Unavailable as exc:
            kind = _failure(exc.__cause__, conn)
            if kind is not None:
                server.failed(kind)
            # else the server answered, or it is unclear: a trial's window was re-armed when
            # it was let through, so the next window tries again
            raise

    @contextlib.contextmanager
    def transaction(self, *, unbounded: bool = False) -> Iterator[psycopg.Connection]:
        """A primary connection inside one transaction, committed on success. ``unbounded``
        lifts the role's statement timeout for it (RFC 10.5: an import, an erasure)."""
        with self._connection(self._primary) as conn:
            if unbounded:
                conn.execute(q("transaction_unbounded"))
            yield conn

    @property
    def monitor(self) -> replica.Monitor | None:
        """RFC 13.2: the replica's replay and lag, sampled in the background; started by the
        first use, so a process that never reads the replica (a pool) never samples it."""
        if self._read_dsn is None:
            return None
        if self._monitor is None:
            with self._monitor_lock:
                if self._monitor is None:
                    self._monitor = replica.Monitor(self.dsn, self._read_dsn)
        return self._monitor

    @contextlib.contextmanager
    def reader(self, *, single: bool = False) -> Iterator[psycopg.Connection]:
        """A connection for reads that may lag (the replica where configured and in step,
        RFC 13.2); ``single`` as :meth:`read` takes it."""
        with self.read(single=single) as (conn, _):
            yield conn

    @contextlib.contextmanager
    def read(
        self, token: int | None = None, *, single: bool = False
    ) -> Iterator[tuple[psycopg.Connection, ServedBy]]:
        """RFC 13.2: a connection for a read and which server serves it (``replica`` or
        ``primary``). With ``token`` (a write's consistency token) the replica serves only
        once it has replayed the token, waiting at most ``replica_wait_seconds``; a replica
        that is down, hung or further behind than ``replica_max_lag_seconds`` serves nothing.
        Every such read goes to the primary at once. ``single``: the caller runs one statement
        (no transaction around it)."""
        if self.monitor is None:
            with self._connection(self._primary, single=single) as conn:
                yield conn, "primary"
            return
        reason = self._replica_refuses(token)
        if reason is None:
            with contextlib.ExitStack() as stack:
                try:
                    conn = stack.enter_context(self._connection(self._replica, single=single))
                    reason = None if token is None or self._caught_up(conn, token) else "token"
                except errors.Unavailable:
                    reason = "down"
                if reason is None:
                    yield conn, "replica"
                    return
        self.fallbacks[reason] += 1
        with self._connection(self._primary, single=single) as conn:
            yield conn, "primary"

    def _replica_refuses(self, token: int | None) -> str | None:
        """Why the replica may not serve a read, from the last sample alone (no round trip)."""
        assert self.monitor is not None
        seen = self.monitor.sample
        if self._replica.circuit.is_open or seen.replayed is None:
            return "down"
        if time.monotonic() - seen.at > 4 * replica.SAMPLE_SECONDS + 1.0:
            return "down"  # no sample for a while: the replica (or the monitor's link) hangs
        if seen.lag_seconds is not None and seen.lag_seconds > self.replica_max_lag_seconds:
            return "lagging"
        return None

    def _caught_up(self, conn: psycopg.Connection, token: int) -> bool:
        """RFC 13.2: whether the replica behind ``conn`` replays ``token`` within
        ``replica_wait_seconds``: the last sample first, then the replica itself."""
        assert self.monitor is not None
        seen = self.monitor.sample.replayed
        if seen is not None and seen >= token:
            return True
        deadline = time.monotonic() + self.replica_wait_seconds
        while True:
            if replica.replayed(conn, token):
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(replica.POLL_SECONDS)

    def position(self) -> int:
        """RFC 13.2: a consistency token covering every write committed before this call:
        the primary's WAL insert position (one statement: no transaction around it)."""
        with self._connection(self._primary, single=True) as conn:
            return replica.position(conn)

    def replica_state(self) -> dict[str, Any] | None:
        """RFC 13.2, 14.2: the replica's last sample and the reads sent to the primary, for
        readiness and the metrics; None without a replica."""
        if self.monitor is None:
            return None
        seen = self.monitor.sample
        return {
            "replayed": replica.format_lsn(seen.replayed) if seen.replayed is not None else None,
            "lag_seconds": seen.lag_seconds,
            "sampled_seconds_ago": round(time.monotonic() - seen.at, 3) if seen.at else None,
            "fallbacks": dict(self.fallbacks),
        }

    @contextlib.contextmanager
    def snapshot(self, share: str | None = None) -> Iterator[psycopg.Connection]:
        """RFC 15.1: a connection of its own on the read server, in one repeatable-read,
        read-only transaction in UTC: a long read (an export) sees one snapshot and holds no
        pooled connection while it streams. ``share``: the id of a snapshot another such
        connection exported (:func:`membrane_core.storage.transfer.share_snapshot`), which
        this one then reads too."""
        server = self._replica
        server.circuit.admit()
        with translate_errors(), psycopg.connect(server.dsn) as conn:
            _configure(conn)
            conn.isolation_level = psycopg.IsolationLevel.REPEATABLE_READ
            conn.read_only = True
            with conn.transaction():
                if share is not None:
                    conn.execute(sql.SQL("SET TRANSACTION SNAPSHOT {}").format(sql.Literal(share)))
                conn.execute("SET LOCAL TimeZone = 'UTC'")
                yield conn

    def ping(self, timeout: float = 2.0) -> None:
        """RFC 10.5, 14.2: readiness over a fresh connection; its outcome feeds the circuit."""
        try:
            health.ping(self.dsn, timeout)
        except errors.Unavailable:
            self._primary.down()
            raise
        self._primary.circuit.succeeded()

    def close(self) -> None:
        """Close every pool, and stop the watches and the replica's monitor."""
        if self._monitor is not None:
            self._monitor.close()
        self._primary.watch.close()
        self._replica.watch.close()
        if self.read_pool is not self.pool:
            self.read_pool.close()
        self.pool.close()
