"""A server that stops answering: found within a second, and the requests waiting on it cut
loose (RFC 10.5).

A connection to a Postgres that hangs (stopped, or behind a partition that drops packets)
waits as long as the hang lasts: the server cannot enforce its own ``statement_timeout``
while it is stopped, and the host's TCP stack keeps acknowledging. So the process watches
its own connections: when one has waited on the server for ``HANG_AFTER_SECONDS``, a probe
asks the server a protocol question on a fresh socket (an ``SSLRequest``, which the server
answers with one byte before any authentication). A server that answers is slow, not hung,
and the statement's own timeout bounds it. One that does not answer within
``PROBE_SECONDS`` is hung: the circuit opens, and the socket of every connection waiting
on it is shut down, so each of their requests fails at once as a lost connection (503).
"""

from __future__ import annotations

import contextlib
import logging
import os
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterator

import psycopg
from psycopg.conninfo import conninfo_to_dict

log = logging.getLogger(__name__)

#: RFC 10.5: how long a connection waits on the server before the server is probed.
HANG_AFTER_SECONDS = 0.25
#: RFC 10.5: how long the probe waits for the server's one-byte answer.
PROBE_SECONDS = 0.4
#: How often the watch looks at the connections in use.
TICK_SECONDS = 0.05
#: After the server answered a probe, the next one waits this long: a long statement (a sweep,
#: an export) is probed once a second, not at every tick.
REPROBE_SECONDS = 1.0

#: The protocol's ``SSLRequest``: length 8, code 80877103. The server answers ``S`` or ``N``.
_SSL_REQUEST = struct.pack("!II", 8, 80877103)


def _address(dsn: str) -> tuple[int, str | tuple[str, int]]:
    """The socket family and address of the first host ``dsn`` names."""
    info = conninfo_to_dict(dsn)
    host = str(info.get("host") or info.get("hostaddr") or "/tmp").split(",")[0]
    port = int(str(info.get("port") or "5432").split(",")[0])
    if host.startswith("/"):
        return socket.AF_UNIX, f"{host}/.s.PGSQL.{port}"
    return socket.AF_INET6 if ":" in host else socket.AF_INET, (host, port)


def answers(dsn: str, timeout: float = PROBE_SECONDS) -> bool:
    """Whether the server behind ``dsn`` answers a protocol message within ``timeout``
    seconds. A refused or reset connection is no answer either."""
    try:
        family, address = _address(dsn)
        with socket.socket(family, socket.SOCK_STREAM) as sock:
            sock.settimeout(timeout)
            sock.connect(address)
            sock.sendall(_SSL_REQUEST)
            return sock.recv(1) in (b"S", b"N")
    except (OSError, ValueError, psycopg.Error):
        return False


def cut(conn: psycopg.Connection) -> None:
    """Shut down ``conn``'s socket from another thread: the thread waiting on it wakes to a
    closed connection. The descriptor stays the driver's to close."""
    with contextlib.suppress(OSError, ValueError, psycopg.Error):
        fd = os.dup(conn.fileno())
        with socket.socket(fileno=fd) as sock:
            sock.shutdown(socket.SHUT_RDWR)


class Watch:
    """RFC 10.5: the connections of one server in use, and a thread that probes the server when
    one has had a command in progress (``ACTIVE``: sent, not yet answered) for too long.

    ``on_hang`` runs once per hang found (the circuit opens there); the waiting connections
    are cut after it. The thread starts with the first connection taken and stops with
    :meth:`close`.
    """

    def __init__(
        self,
        dsn: str,
        on_hang: Callable[[], None],
        *,
        hang_after: float = HANG_AFTER_SECONDS,
        probe_seconds: float = PROBE_SECONDS,
    ) -> None:
        self.dsn = dsn
        self.on_hang = on_hang
        self.hang_after = hang_after
        self.probe_seconds = probe_seconds
        #: connection id -> (connection, when its command in progress was first seen, or None)
        self._busy: dict[int, tuple[psycopg.Connection, float | None]] = {}
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._closed = threading.Event()
        self._answered_at = 0.0

    @contextlib.contextmanager
    def using(self, conn: psycopg.Connection) -> Iterator[None]:
        """Count ``conn`` as waiting on the server while the block runs."""
        key = id(conn)
        with self._lock:
            self._busy[key] = (conn, None)
            if self._thread is None and not self._closed.is_set():
                self._thread = threading.Thread(target=self._run, daemon=True, name="membrane-db-watch")
                self._thread.start()
        try:
            yield
        finally:
            with self._lock:
                self._busy.pop(key, None)

    def _overdue(self, now: float) -> list[psycopg.Connection]:
        """The connections whose command has been in progress for ``hang_after``; notes when
        each in-progress command was first seen (a reading of libpq's status, no call)."""
        out = []
        with self._lock:
            for key, (conn, since) in list(self._busy.items()):
                active = conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE
                if not active:
                    self._busy[key] = (conn, None)
                elif since is None:
                    self._busy[key] = (conn, now)
                elif now - since >= self.hang_after:
                    out.append(conn)
        return out

    def _run(self) -> None:
        while not self._closed.wait(TICK_SECONDS):
            try:
                self._tick()
            except Exception:  # the watch must outlive anything a tick meets
                log.debug("connection watch tick failed", exc_info=True)

    def _tick(self) -> None:
        now = time.monotonic()
        if not self._overdue(now) or now - self._answered_at < REPROBE_SECONDS:
            return
        if answers(self.dsn, self.probe_seconds):
            self._answered_at = time.monotonic()  # slow, not hung: its statement timeout bounds it
            return
        stuck = self._overdue(time.monotonic())
        log.warning(
            "Postgres does not answer within %.1f s; %d waiting connection(s) cut",
            self.probe_seconds,
            len(stuck),
        )
        self.on_hang()
        for conn in stuck:
            cut(conn)

    def close(self) -> None:
        """Stop the thread."""
        self._closed.set()
