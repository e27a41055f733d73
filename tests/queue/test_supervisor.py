"""``membrane run`` watches every child, the private redis-server and the embedded Postgres (RFC 13.1).

Real stacks with fewer pieces (no worker pools, beat or Flower): real processes are
killed and :meth:`Stack.watch` is asked what it saw.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from membrane_cli.stack import Stack, StackOptions, Watch, exit_status, pid_alive, port_open
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


def _options(data_dir: Path, restart_limit: int = 5) -> StackOptions:
    return StackOptions(
        data_dir=data_dir,
        api_port=services.free_port(),
        queues=(),
        beat=False,
        flower=False,
        restart_limit=restart_limit,
        restart_window=60.0,
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
@pytest.mark.parametrize("how", ["stopped", "killed"])
def test_the_embedded_postgres_going_away_stops_the_stack(clean_env: None, tmp_path: Path, how: str) -> None:
    st = Stack(
        Settings(database_url=None, redis_url=None, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM),
        _options(tmp_path),
    )
    st.start(wait_ready=60)
    try:
        assert st.embedded and st.watch() == Watch()  # a running server is not reported
        pidfile = st.pgdata / "postmaster.pid"
        if how == "stopped":
            embedded.stop(tmp_path)  # pg_ctl stop: the pid file goes
            why = f"{pidfile} is gone"
        else:
            postmaster = int(pidfile.read_text().split()[0])
            os.kill(postmaster, signal.SIGKILL)  # the pid file stays, its process does not
            why = f"its postmaster, pid {postmaster}, is not running"
        look = _look_until(st)
        assert look.stop == (
            f"the embedded Postgres stopped ({why}); stopping the stack. "
            f"Postgres log: {tmp_path / 'pg' / 'log'}"
        ), look
        assert look.stop in st.supervisor_log.read_text()
    finally:
        st.stop()
    assert not port_open("127.0.0.1", st.opts.api_port)


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
