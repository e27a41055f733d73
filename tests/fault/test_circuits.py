"""The outage and publishing circuits on their own (RFC 10.5)."""

from __future__ import annotations

import contextlib
import threading
import time
import uuid
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import psycopg
import pytest

from membrane_core import errors
from membrane_core.enums import OperationKind
from membrane_core.storage import health
from membrane_core.storage.db import Database, translate_errors
from tests.support.services import EMBEDDING_DIM
from workers.dispatch import CeleryDispatcher


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def test_circuit_refuses_for_a_window_then_lets_one_through() -> None:
    clock = Clock()
    circuit = health.Circuit(1.0, clock=clock)
    circuit.admit()  # closed: everyone passes
    circuit.failed()
    with pytest.raises(health.Outage) as refused:
        circuit.admit()
    assert isinstance(refused.value, errors.Unavailable) and refused.value.retry_after == 1
    clock.now += 1.0
    circuit.admit()  # the trial
    with pytest.raises(health.Outage):
        circuit.admit()  # the next waits for the window the trial started
    circuit.succeeded()
    circuit.admit()
    assert not circuit.is_open


def test_a_data_error_is_invalid_input_not_a_500(db: Database) -> None:
    with pytest.raises(errors.InvalidInput), translate_errors():
        raise psycopg.errors.InvalidTextRepresentation("invalid input syntax")
    with pytest.raises(errors.InvalidInput), db.transaction() as conn:
        conn.execute("SELECT %s::text", ("a\x00b",))  # a NUL: refused by the driver, class 22
    with db.reader() as conn:  # the pool and the circuit are unharmed
        assert conn.execute("SELECT 1").fetchone() == (1,)
    assert not db.health.is_open


def _settled(database: Database) -> None:
    # the background confirmation (a fresh connection) has finished
    deadline = time.monotonic() + 10
    while database._primary._checking and time.monotonic() < deadline:
        time.sleep(0.01)


def test_a_pool_short_of_connections_under_load_is_no_outage(database_url: str) -> None:
    database = Database(
        database_url, embedding_dim=EMBEDDING_DIM, run_migrations=False, min_size=1, max_size=1, timeout=0.2
    )
    try:
        held, release = threading.Event(), threading.Event()

        def hold() -> None:
            with database.transaction():
                held.set()
                release.wait(10)

        holder = threading.Thread(target=hold)
        holder.start()
        held.wait(10)
        with pytest.raises(errors.Unavailable), database.transaction():
            pass
        _settled(database)
        release.set()
        holder.join(10)
        assert not database.health.is_open  # the server answered the confirmation
        with database.transaction() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        database.close()


def test_a_killed_backend_is_no_outage(database_url: str) -> None:
    database = Database(
        database_url, embedding_dim=EMBEDDING_DIM, run_migrations=False, min_size=1, max_size=1, timeout=2
    )
    try:
        with database.reader() as conn:
            pid = conn.info.backend_pid
        with psycopg.connect(database_url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))  # waits for its exit
        with pytest.raises(errors.Unavailable), database.reader() as conn:
            conn.execute("SELECT 1")
        _settled(database)
        assert not database.health.is_open
        with database.reader() as conn:
            assert conn.execute("SELECT 1").fetchone() == (1,)
    finally:
        database.close()


class DeadBroker:
    """Stands in for a Celery app whose broker refuses connections, counting the attempts."""

    def __init__(self) -> None:
        self.attempts = 0
        self.up = False

    @contextlib.contextmanager
    def producer_or_acquire(self) -> Iterator[Any]:
        self.attempts += 1
        if not self.up:
            raise ConnectionRefusedError("connection refused")
        yield SimpleNamespace(connection=SimpleNamespace(ensure_connection=lambda **_: None))

    def send_task(self, *args: Any, **kwargs: Any) -> None:
        return None


def test_publishing_pauses_after_a_failure_and_one_publish_retries() -> None:
    clock, app = Clock(), DeadBroker()
    dispatcher = CeleryDispatcher(app, retry_seconds=2.0, clock=clock)  # type: ignore[arg-type]
    ids = [uuid.uuid4()]
    assert dispatcher.publish(OperationKind.CAPTURE, ids) is False
    assert [dispatcher.publish(OperationKind.CAPTURE, ids) for _ in range(50)] == [False] * 50
    assert app.attempts == 1  # skipped at once while the window runs
    clock.now += 2.0
    app.up = True
    assert dispatcher.publish(OperationKind.CAPTURE, ids) is True
    assert dispatcher.publish(OperationKind.CAPTURE, ids) is True
    assert app.attempts == 3 and not dispatcher.is_open
