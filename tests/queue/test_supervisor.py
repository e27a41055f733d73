"""``membrane run`` watches every child, the private redis-server and the embedded Postgres (RFC 13.1).

Real stacks with fewer pieces (no worker pools, beat or Flower): real processes are
killed and :meth:`Stack.watch` is asked what it saw.
"""

from __future__ import annotations

import dataclasses
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest
import redis

from membrane_cli.stack import (
    Stack,
    StackOptions,
    Watch,
    exit_status,
    pid_alive,
    port_open,
    spend_restart,
)
from membrane_core import Settings
from membrane_core.storage import embedded
from tests.support import services
from tests.support.services import EMBEDDING_DIM

EVENT = {"source_kind": "event", "scope": "supervisor", "content": {"text": "the broker came back"}}


@pytest.fixture
def clean_env(monkeypatch: pytest.MonkeyPatch) -> None:
    """The children inherit this process's environment: only what the test sets."""
    for name in list(os.environ):
        if name.startswith(("MEMBRANE_", "FLOWER_")):
            monkeypatch.delenv(name)
    monkeypatch.setenv("MEMBRANE_EMBEDDING_DIM", str(EMBEDDING_DIM))


def _options(data_dir: Path, restart_limit: int = 5, **postgres: Any) -> StackOptions:
    return StackOptions(
        data_dir=data_dir,
        api_port=services.free_port(),
        queues=(),
        beat=False,
        flower=False,
        restart_limit=restart_limit,
        restart_window=60.0,
        **postgres,
    )


def _kill(stack: Stack, name: str) -> int:
    child = next(c for c in stack.children if c.name == name)
    assert child.proc is not None
    os.kill(child.proc.pid, signal.SIGKILL)
    child.proc.wait(timeout=10)
    return child.proc.pid


def _look_until(stack: Stack, timeout: float = 10.0) -> Watch:
    """Call ``watch()`` about twice a second until it reports something."""
    deadline = time.monotonic() + timeout
    while True:
        look = stack.watch()
        if look.events or look.stop or time.monotonic() > deadline:
            return look
        time.sleep(0.5)


@pytest.fixture
def stack(clean_env: None, database_url: str, tmp_path: Path) -> Iterator[Stack]:
    """API and private redis-server on the test database."""
    s = Settings(database_url=database_url, redis_url=None, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM)
    st = Stack(s, _options(tmp_path))
    st.start(wait_ready=60)
    yield st
    st.stop()


def test_a_killed_redis_server_is_restarted_on_its_port_and_the_api_publishes_again(stack: Stack) -> None:
    redis_child = next(c for c in stack.children if c.name == "redis")
    port, url = redis_child.port, stack.redis_url
    assert port and url == f"redis://127.0.0.1:{port}/0"
    assert stack.watch() == Watch()  # nothing died, nothing to say

    old = _kill(stack, "redis")
    look = _look_until(stack)
    assert look.stop is None, look.stop
    assert len(look.events) == 1, look.events
    assert (
        f"redis (pid {old}) exited (killed by signal 9 (SIGKILL)); restarted on port {port}" in look.events[0]
    ), look.events
    assert redis_child.proc is not None and redis_child.proc.pid != old
    assert stack.redis_url == url and redis.Redis.from_url(url).ping()
    log = stack.supervisor_log.read_text()
    assert f"redis (pid {old}) exited (killed by signal 9 (SIGKILL)); restarted" in log, log

    # The API's broker connection comes back: readiness, then a capture reaches the queue.
    api = f"http://127.0.0.1:{stack.opts.api_port}"
    broker = redis.Redis.from_url(url)
    deadline = time.monotonic() + 20
    while broker.llen("ingest") == 0:
        assert time.monotonic() < deadline, "no capture was published after the restart"
        if httpx.get(f"{api}/readyz", timeout=5).status_code == 200:
            assert httpx.post(f"{api}/v1/captures", json=EVENT, timeout=10).status_code == 202
        time.sleep(0.3)

    # Any other child stops the stack, with its exit status in the message.
    api_pid = _kill(stack, "api")
    look = stack.watch()
    assert look.stop is not None and look.stop.startswith(
        f"api (pid {api_pid}) exited (killed by signal 9 (SIGKILL)); stopping the stack"
    ), look.stop
    assert "api (pid" in stack.supervisor_log.read_text()


def test_the_restart_budget_stops_the_stack(clean_env: None, tmp_path: Path) -> None:
    st = Stack(Settings(redis_url=None, data_dir=tmp_path), _options(tmp_path, restart_limit=2))
    st.start_redis()
    try:
        port = st.children[0].port
        assert port is not None
        for n in (1, 2):
            _kill(st, "redis")
            look = st.watch()
            assert look.stop is None and f"restart {n} of at most 2 within 60 s" in look.events[0], look
            assert port_open("127.0.0.1", port)
        _kill(st, "redis")
        look = st.watch()
        assert (
            look.stop is not None
            and "after 2 restarts within 60 s (at most 2); stopping the stack" in look.stop
        ), look.stop
        assert not port_open("127.0.0.1", port)  # not started a third time
    finally:
        st.stop()


@pytest.mark.integration  # starts an embedded Postgres of its own
def test_a_clean_shutdown_of_the_embedded_postgres_stops_the_stack(clean_env: None, tmp_path: Path) -> None:
    """``membrane db stop`` is an operator's: not restarted (a crash is, test_supervisor_postgres.py)."""
    st = Stack(
        Settings(database_url=None, redis_url=None, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM),
        _options(tmp_path),
    )
    st.start(wait_ready=60)
    try:
        assert st.embedded and st.watch() == Watch()  # a running server is not reported
        pidfile = st.pgdata / "postmaster.pid"
        embedded.stop(tmp_path)  # pg_ctl stop -m fast: the pid file goes
        look = _look_until(st)
        assert look.stop == (
            f"the embedded Postgres was shut down ({pidfile} is gone); stopping the stack. "
            f"Postgres log: {tmp_path / 'pg' / 'log'}"
        ), look
        assert look.events == []
        assert look.stop in st.supervisor_log.read_text()
        assert not pidfile.exists()  # not started again
    finally:
        st.stop()
    assert not port_open("127.0.0.1", st.opts.api_port)


def _ready(stack: Stack) -> int:
    return httpx.get(f"http://127.0.0.1:{stack.opts.api_port}/readyz", timeout=5).status_code


def _ready_again(stack: Stack, timeout: float = 10.0) -> None:
    deadline = time.monotonic() + timeout
    while _ready(stack) != 200:
        assert time.monotonic() < deadline, "the API did not get ready again"
        time.sleep(0.2)


@pytest.mark.integration  # starts an embedded Postgres of its own
def test_a_crashed_embedded_postgres_is_restarted_on_its_socket_until_its_budget_is_spent(
    clean_env: None, tmp_path: Path, pg_ctl: Callable[..., None]
) -> None:
    st = Stack(
        Settings(database_url=None, redis_url=None, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM),
        _options(tmp_path, postgres_restart_limit=2, postgres_restart_window=300.0),
    )
    st.start(wait_ready=60)
    try:
        first = embedded.postmaster(tmp_path)
        assert first is not None and first.socket_dir is not None and st.postmaster == first
        api_pid = st.pids()["api"]
        pidfile, log = st.pgdata / "postmaster.pid", tmp_path / "pg" / "log"
        socket = f"socket {first.socket_dir} (port {first.port})"
        seen = [first.pid]
        for n, how in ((1, "immediate"), (2, "killed")):
            if how == "immediate":
                pg_ctl(st.pgdata, "-m", "immediate", "stop")  # every backend dies at once: a crash
                why = f"{pidfile} is gone"
            else:
                os.kill(seen[-1], signal.SIGKILL)  # the pid file stays, its process does not
                why = f"its postmaster, pid {seen[-1]}, is not running"
            look = _look_until(st)
            assert look.stop is None, look.stop
            again = embedded.postmaster(tmp_path)
            assert again is not None and again.pid not in seen
            assert (again.socket_dir, again.port) == (first.socket_dir, first.port)  # every URL holds
            seen.append(again.pid)
            assert look.events[0] == f"the embedded Postgres stopped ({why}); starting it again on {socket}"
            assert look.events[1].startswith(
                f"the embedded Postgres restarted on {socket} as pid {again.pid}, accepting connections after"
            ), look.events
            assert look.events[1].endswith(f"(restart {n} of at most 2 within 300 s). Postgres log: {log}")
            assert all(event in st.supervisor_log.read_text() for event in look.events)
            assert log.read_text().count("automatic recovery in progress") == n  # crash recovery ran
            _ready_again(st)  # the API's pool reconnected, without restarting the API
            assert st.pids()["api"] == api_pid

        pg_ctl(st.pgdata, "-m", "immediate", "stop")
        look = _look_until(st)
        assert look.stop == (
            f"the embedded Postgres stopped ({pidfile} is gone) after 2 restarts within 300 s "
            f"(at most 2); stopping the stack. Postgres log: {log}"
        ), look
        assert look.stop in st.supervisor_log.read_text()
        assert not pidfile.exists() and _ready(st) == 503  # not started a third time
    finally:
        st.stop()


@pytest.mark.integration  # starts an embedded Postgres of its own
def test_an_embedded_postgres_that_does_not_come_back_in_time_stops_the_stack(
    clean_env: None, tmp_path: Path, pg_ctl: Callable[..., None]
) -> None:
    st = Stack(
        Settings(database_url=None, redis_url=None, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM),
        _options(tmp_path, postgres_start_timeout=3.0),
    )
    st.start(wait_ready=60)
    try:
        # read at the next start only: the server refuses to start
        with (st.pgdata / "postgresql.auto.conf").open("a") as conf:
            conf.write("shared_buffers = 'not a size'\n")
        pg_ctl(st.pgdata, "-m", "immediate", "stop")
        started = time.monotonic()
        look = _look_until(st, timeout=20)
        assert 3.0 <= time.monotonic() - started < 15  # tried until the start timeout, no longer
        assert look.stop == (
            f"the embedded Postgres stopped ({st.pgdata / 'postmaster.pid'} is gone) and did not accept "
            "connections within 3 s of a restart (pg_ctl start: exit status 1); stopping the stack. "
            f"Postgres log: {st.pgdata / 'log'}"
        ), look
        assert "shared_buffers" in st.postgres_log.read_text()  # its log says why
        assert look.stop in st.supervisor_log.read_text()
    finally:
        st.stop()


def test_restarts_are_counted_within_a_sliding_window() -> None:
    times: list[float] = []
    assert [spend_restart(times, now, 3, 300.0) for now in (0.0, 10.0, 20.0)] == [True, True, True]
    assert not spend_restart(times, 299.0, 3, 300.0)  # a fourth within 300 s of the first
    assert times == [0.0, 10.0, 20.0]  # a refused restart is not counted
    assert spend_restart(times, 300.0, 3, 300.0)  # the first has left the window
    assert times == [10.0, 20.0, 300.0]
    assert not spend_restart(times, 309.0, 3, 300.0)
    assert spend_restart(times, 320.0, 3, 300.0) and times == [300.0, 320.0]
    assert not spend_restart([], 0.0, 0, 60.0)  # no budget: never restarted


def test_liveness_and_exit_status_words() -> None:
    proc = subprocess.Popen([sys.executable, "-c", "import sys; sys.stdin.read()"], stdin=subprocess.PIPE)
    try:
        assert pid_alive(proc.pid)  # positive control
        assert proc.stdin is not None
        proc.stdin.close()
        deadline = time.monotonic() + 10
        while pid_alive(proc.pid):  # exited, not yet reaped: a zombie is not alive
            assert time.monotonic() < deadline
            time.sleep(0.05)
    finally:
        proc.wait(10)
    assert not pid_alive(proc.pid)
    assert exit_status(3) == "exit status 3"
    assert exit_status(-9) == "killed by signal 9 (SIGKILL)"


@pytest.mark.integration  # starts an embedded Postgres of its own and a replica of it
def test_replica_runs_a_streaming_standby_the_api_reads(clean_env: None, tmp_path: Path) -> None:
    """RFC 13.1, 13.2: ``membrane run --replica`` makes a hot standby beside the data, gives
    the children its URL for reads, and the API's retrieval is served by it."""
    st = Stack(
        Settings(database_url=None, redis_url=None, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM),
        dataclasses.replace(_options(tmp_path), replica=True),
    )
    st.start(wait_ready=60)
    try:
        assert st.read_dsn is not None and "standby" in st.read_dsn
        assert (tmp_path / "standby" / "pg" / "standby.signal").exists()
        with psycopg.connect(st.read_dsn) as conn:
            assert conn.execute("SELECT pg_is_in_recovery()").fetchone() == (True,)
        got = httpx.post(
            f"http://127.0.0.1:{st.opts.api_port}/v1/retrieve", json={"query": "anything"}, timeout=10
        )
        assert got.status_code == 200 and got.json()["diagnostics"]["served_by"] == "replica", got.text
    finally:
        st.stop()
    assert not (tmp_path / "standby" / "pg" / "postmaster.pid").exists()  # stopped with the stack
