"""``membrane run`` restarts a crashed embedded Postgres under a capture load (RFC 13.1, 10.5, 9.2).

The real supervisor as a process tree: its own embedded Postgres, private redis-server, API,
the five worker pools and beat. The server is stopped with ``pg_ctl stop -m immediate`` (every
backend dies at once, as in a crash) while a client posts batches of captures; the supervisor
starts it again, the children ride out the outage, and every accepted capture is written once.
"""

from __future__ import annotations

import os
import re
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from membrane_cli.stack import QUEUES, pid_alive
from membrane_core.storage import embedded
from tests.support import services
from tests.support.load import committed_once
from tests.support.processes import Proc, wait_until
from tests.support.services import EMBEDDING_DIM

pytestmark = [pytest.mark.integration, pytest.mark.slow]  # an embedded Postgres of its own

#: Batches of captures the client posts, each under its own Idempotency-Key.
BATCHES = 60
PER_BATCH = 50
#: Accepted batches before the crash.
BEFORE_CRASH = 20


@dataclass
class Answer:
    """One request of the load: when it was sent, how long it took, what it got."""

    sent: float
    elapsed: float
    status: int | None  # None: no answer (a transport error or the client's timeout)


@dataclass
class Batches:
    """One client thread posting ``BATCHES`` batches, each retried with its key until accepted."""

    url: str
    answers: list[Answer] = field(default_factory=list)
    #: batch index -> (when it was accepted, its operations in the order of its captures)
    accepted: dict[int, tuple[float, list[dict[str, Any]]]] = field(default_factory=dict)
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        with httpx.Client(base_url=self.url, timeout=10.0) as client:
            for b in range(BATCHES):
                body = {
                    "captures": [
                        {"source_kind": "event", "scope": "outage", "content": {"text": f"event {b}.{i}"}}
                        for i in range(PER_BATCH)
                    ]
                }
                while not self.stop.is_set():
                    t0 = time.monotonic()
                    try:
                        resp = client.post(
                            "/v1/captures:batch", json=body, headers={"Idempotency-Key": f"outage-{b}"}
                        )
                    except httpx.HTTPError:
                        self.answers.append(Answer(t0, time.monotonic() - t0, None))
                        time.sleep(0.2)
                        continue
                    self.answers.append(Answer(t0, time.monotonic() - t0, resp.status_code))
                    if resp.status_code in (200, 202):
                        self.accepted[b] = (time.monotonic(), resp.json()["operations"])
                        break
                    time.sleep(0.2)  # 503 while Postgres is down: the same batch, the same key
                time.sleep(0.05)


def _started(supervisor_log: Path) -> dict[str, int]:
    """Name -> pid of every child the supervisor log says it started (the last start wins)."""
    found = re.findall(r" started (\S+) \(pid (\d+)\)$", supervisor_log.read_text(), re.MULTILINE)
    return {name: int(pid) for name, pid in found}


def _succeeded(dsn: str) -> int:
    with psycopg.connect(dsn, connect_timeout=5) as conn:
        row = conn.execute(
            "SELECT count(*) FROM operations WHERE kind = 'capture' AND status = 'succeeded'"
        ).fetchone()
    return int(row[0]) if row else 0


def test_a_crashed_embedded_postgres_is_restarted_and_no_accepted_capture_is_lost(
    tmp_path: Path, pg_ctl: Callable[..., None]
) -> None:
    api_port = services.free_port()
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("MEMBRANE_", "FLOWER_"))},
        "MEMBRANE_DATA_DIR": str(tmp_path),  # no database or broker URL: embedded and private
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_EMBEDDING_PROVIDER": "none",
        "MEMBRANE_PORT": str(api_port),
        "COLUMNS": "500",  # the printed events on one line each
    }
    run = Proc([sys.executable, "-m", "membrane_cli.main", "run", "--no-flower"], env, tmp_path / "run.out")
    supervisor_log, pidfile = tmp_path / "logs" / "supervisor.log", tmp_path / "pg" / "postmaster.pid"
    try:
        run.wait_for("Ctrl-C stops every process", timeout=120)
        children = _started(supervisor_log)
        assert set(children) == {"redis", "api", "beat", *(f"worker-{q}" for q in QUEUES)}
        before = embedded.postmaster(tmp_path)
        assert before is not None and before.socket_dir is not None
        dsn = f"postgresql://postgres@/postgres?host={before.socket_dir}&port={before.port}"

        load = Batches(f"http://127.0.0.1:{api_port}")
        thread = threading.Thread(target=load.run, name="batches", daemon=True)
        thread.start()
        try:
            wait_until(lambda: len(load.accepted) >= BEFORE_CRASH, 60, "captures accepted before the crash")
            # not waiting (-W): the server is back, with a new pid, before pg_ctl would see it gone
            pg_ctl(tmp_path / "pg", "-m", "immediate", "-W", "stop")
            wait_until(
                lambda: "the embedded Postgres restarted" in supervisor_log.read_text(), 30, "a restart"
            )
            restarted = time.monotonic()
            thread.join(90)
            assert not thread.is_alive(), f"{len(load.accepted)} of {BATCHES} batches accepted"
        finally:
            load.stop.set()

        # the supervisor restarted the server on its socket and said so, in its log and output
        log = supervisor_log.read_text()
        assert f"the embedded Postgres stopped ({pidfile} is gone); starting it again on socket" in log, log
        assert re.search(
            r"the embedded Postgres restarted on socket .* \(restart 1 of at most 3 within 300 s\)", log
        )
        assert "stopping" not in log, log
        assert "the embedded Postgres restarted on socket" in run.text(), run.text()[-3000:]
        after = embedded.postmaster(tmp_path)
        assert after is not None and after.pid != before.pid
        assert (after.socket_dir, after.port) == (before.socket_dir, before.port)

        # the stack rode it out: the supervisor runs, no child was started again or is gone
        assert run.popen.poll() is None
        assert _started(supervisor_log) == children
        assert all(pid_alive(pid) for pid in children.values()), children

        # the API answered throughout: 503 while the server was down, each at once
        assert all(a.status is not None for a in load.answers), [a for a in load.answers if a.status is None]
        assert {a.status for a in load.answers} <= {200, 202, 503}, {a.status for a in load.answers}
        refused = [a for a in load.answers if a.status == 503]
        assert refused, "no request met the outage"
        assert max(a.elapsed for a in refused) < 5.0, refused
        # captures succeed again after the restart (positive control)
        assert sum(1 for t, _ in load.accepted.values() if t > restarted) >= 5

        # every accepted capture ends as one succeeded operation with its one record
        operations = [op for _, ops in load.accepted.values() for op in ops]
        assert len(operations) == len({op["operation_id"] for op in operations}) == BATCHES * PER_BATCH
        wait_until(lambda: _succeeded(dsn) >= BATCHES * PER_BATCH, 60, "every capture written")
        committed_once(dsn, operations)
        assert _succeeded(dsn) == BATCHES * PER_BATCH  # nothing doubled
    finally:
        run.stop()
        left_running = pidfile.exists()
        if left_running:  # a supervisor that died leaves its server: not for the next tests
            embedded.stop(tmp_path)
    assert run.popen.returncode == 0, run.text()[-3000:]
    assert "stopped." in run.text()
    assert not left_running  # the stack stopped the restarted server
