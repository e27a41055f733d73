"""Reading from a streaming replica without reading stale corrections (RFC 13.2).

A write's answer carries a consistency token: the primary's WAL insert position read after
the write committed, so at or past the end of its commit record. A replica shows the write
once it has replayed that position. :class:`Monitor` samples both servers' positions in the
background; a read with a token uses the replica when the last sample shows it replayed,
else asks the replica itself for up to ``replica_wait_seconds``, else reads the primary.
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from dataclasses import dataclass

import psycopg

from membrane_core import errors
from membrane_core.storage.queries import q

log = logging.getLogger(__name__)

#: How often the monitor samples the primary's position and the replica's replay.
SAMPLE_SECONDS = 0.25
#: How often a read waiting for its token asks the replica again.
POLL_SECONDS = 0.01
#: How long the read that starts the monitor waits for its first sample (else: the primary).
FIRST_SAMPLE_SECONDS = 1.0
#: Connect timeout of the monitor's connections (libpq's least is 2 s).
CONNECT_SECONDS = 2


def parse_lsn(token: str) -> int:
    """A WAL position (``16/B374D848``) as a number; ``InvalidInput`` for anything else."""
    try:
        hi, lo = token.strip().split("/")
        value = (int(hi, 16) << 32) | int(lo, 16)
    except ValueError:
        raise errors.InvalidInput(
            f"consistency token {token[:40]!r} is not a WAL position like 0/16B3748",
            details=[{"field": "min_lsn", "message": "a WAL position like 0/16B3748", "type": "value_error"}],
        ) from None
    if not 0 <= value < 1 << 64:
        raise errors.InvalidInput(f"consistency token {token[:40]!r} is out of range")
    return value


def format_lsn(value: int) -> str:
    """A WAL position as Postgres writes it."""
    return f"{value >> 32:X}/{value & 0xFFFFFFFF:X}"


@dataclass(frozen=True)
class Sample:
    """One look at both servers: the replica's replayed position (None: unreachable, or not
    a standby), how far behind it was, and when the look was taken."""

    replayed: int | None
    lag_seconds: float | None
    at: float


class Monitor:
    """RFC 13.2: the replica's replay and lag, sampled every ``SAMPLE_SECONDS`` on
    connections of its own (a hung server delays the samples, never a request)."""

    def __init__(self, primary_dsn: str, replica_dsn: str) -> None:
        self.primary_dsn = primary_dsn
        self.replica_dsn = replica_dsn
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="membrane-replica-monitor")
        self._conns: dict[str, psycopg.Connection] = {}
        self.sample = Sample(None, None, 0.0)
        self._sampled = threading.Event()
        self._thread.start()
        # the read that starts the monitor decides on its first sample, if it comes in time
        self._sampled.wait(FIRST_SAMPLE_SECONDS)

    def _conn(self, dsn: str) -> psycopg.Connection:
        conn = self._conns.get(dsn)
        if conn is None or conn.closed or conn.broken:
            conn = self._conns[dsn] = psycopg.connect(dsn, autocommit=True, connect_timeout=CONNECT_SECONDS)
        return conn

    def _drop(self, dsn: str) -> None:
        conn = self._conns.pop(dsn, None)
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                conn.close()

    def _look(self) -> Sample:
        try:
            head = self._conn(self.primary_dsn).execute(q("replica_primary_position")).fetchone()
        except psycopg.Error:
            self._drop(self.primary_dsn)
            head = None
        try:
            row = self._conn(self.replica_dsn).execute(q("replica_replay")).fetchone()
        except psycopg.Error:
            self._drop(self.replica_dsn)
            return Sample(None, None, time.monotonic())
        if row is None or row[0] is None:  # not in recovery: no standby
            return Sample(None, None, time.monotonic())
        replayed = parse_lsn(row[0])
        # caught up with the primary's position read just before: no lag, however long ago
        # the last transaction was replayed
        caught_up = head is not None and head[0] is not None and replayed >= parse_lsn(head[0])
        lag = 0.0 if caught_up else max(0.0, float(row[1] or 0.0))
        return Sample(replayed, lag, time.monotonic())

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample = self._look()
            except Exception:  # the monitor outlives anything a sample meets
                log.debug("replica sample failed", exc_info=True)
            self._sampled.set()
            self._stop.wait(SAMPLE_SECONDS)

    def close(self) -> None:
        """Stop sampling and close the monitor's connections."""
        self._stop.set()
        self._thread.join(5)
        for dsn in list(self._conns):
            self._drop(dsn)


def position(conn: psycopg.Connection) -> int:
    """The primary's WAL insert position: a consistency token for what committed before."""
    row = conn.execute(q("replica_primary_position")).fetchone()
    return parse_lsn(row[0]) if row and row[0] else 0


def replayed(conn: psycopg.Connection, token: int) -> bool:
    """Whether the replica behind ``conn`` has replayed ``token`` (one statement)."""
    row = conn.execute(q("replica_replayed"), {"lsn": format_lsn(token)}).fetchone()
    return bool(row and row[0])
