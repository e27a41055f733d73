"""A deploy's stop under load: SIGTERM a prefork ingest pool mid-batch (RFC 9.5).

The pool runs the command line and environment ``membrane run`` and compose give it
(``worker_argv``, ``WORKER_ENV``) on a real redis-server and Postgres, with a backlog of
3,000 captures. One batch is held inside its transaction (an advisory lock on its fact key)
when the whole process group gets SIGTERM, as ``membrane run`` sends it. The pool waits its
soft-shutdown bound for the batch, gives the message back to Redis and exits; a second pool
started afterwards finishes the rest. No beat runs, so only the returned message can bring
the held captures back.
"""

from __future__ import annotations

import contextlib
import os
import re
import signal
import subprocess
import time
from pathlib import Path

import psycopg
import pytest
import redis

from membrane_core import Membrane
from membrane_core.enums import OperationKind
from membrane_core.storage.records import norm_term
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.processes import Proc, wait_until
from tests.support.sql import scalar
from workers.app import WORKER_ENV, worker_argv
from workers.dispatch import CeleryDispatcher

pytestmark = pytest.mark.slow

DEV = DEVELOPMENT_POLICY

#: Captures in the backlog: three ingest messages of 1,000.
CAPTURES = 3000

#: The drill's soft-shutdown bound: shorter than the deployed one (``SOFT_SHUTDOWN_SECONDS``)
#: to keep the drill short, and than the lock timeout that would end the held batch itself.
SOFT_SECONDS = 3.0

#: What the pool may take beyond its soft-shutdown bound to cancel, give back and exit.
EXIT_MARGIN_SECONDS = 10.0

OBSERVATION: dict[str, object] = {
    "source_kind": "observation",
    "scope": "proj",
    "content": {"subject": "user", "predicate": "likes", "object": "tea"},
}


def event(i: int) -> dict[str, object]:
    return {"source_kind": "event", "scope": "proj", "content": {"text": f"deploy step {i}"}}


def fact_lock_key() -> str:
    return chr(31).join(["proj", norm_term("user"), norm_term("likes"), norm_term("tea")])


def pool(worker_env: dict[str, str], log: Path) -> Proc:
    """The ingest pool as deployed, two prefork processes, each message only its own ids, with
    the drill's soft-shutdown bound (Celery reads settings given after the command)."""
    env = {**worker_env, **WORKER_ENV, "MEMBRANE_INGEST_DRAIN": "0"}
    argv = [*worker_argv("ingest", concurrency=2), f"worker_soft_shutdown_timeout={SOFT_SECONDS}"]
    proc = Proc(argv, env, log)
    proc.wait_for("ready.")
    return proc


def sigterm_group(proc: Proc) -> float:
    """SIGTERM the pool's process group (``membrane run``'s stop); seconds until it exited."""
    start = time.monotonic()
    os.killpg(proc.popen.pid, signal.SIGTERM)
    proc.popen.wait(timeout=SOFT_SECONDS + 2 * EXIT_MARGIN_SECONDS)
    return time.monotonic() - start


def tasks(proc: Proc, outcome: str) -> set[str]:
    """Ids of the ingest tasks whose log line says ``outcome`` (received, succeeded)."""
    return set(re.findall(rf"Task membrane\.ingest\[([0-9a-f-]+)\] {outcome}", proc.text()))


def count(url: str, status: str) -> int:
    return scalar(url, "SELECT count(*) FROM operations WHERE kind = 'capture' AND status = %s", status)


def test_sigterm_mid_batch_loses_nothing_and_does_nothing_twice(
    live: Membrane,
    worker_env: dict[str, str],
    dispatcher: CeleryDispatcher,
    database_url: str,
    redis_url: str,
    tmp_path: Path,
) -> None:
    bodies: list[dict[str, object]] = [OBSERVATION, *(event(i) for i in range(CAPTURES - 1))]
    views = []
    for start in range(0, CAPTURES, 1000):  # the API's batch limit
        views += live.inbox.submit_captures(bodies[start : start + 1000], DEV)
    ids = [v.operation_id for v in views]
    dbname = psycopg.conninfo.conninfo_to_dict(database_url)["dbname"]
    # The first message's batch blocks inside its transaction, after its COPYs, on the key
    # of the observation's fact.
    blocker = psycopg.connect(database_url)
    blocker.execute("SELECT pg_advisory_xact_lock(hashtextextended(%s, 7214))", (fact_lock_key(),))
    procs: list[Proc] = []
    try:
        first = pool(worker_env, tmp_path / "first.log")
        procs.append(first)
        assert dispatcher.publish(OperationKind.CAPTURE, ids)

        def held_while_the_rest_went_through() -> bool:
            waiting = scalar(
                database_url,
                "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                "AND wait_event_type = 'Lock' AND wait_event = 'advisory'",
                dbname,
            )
            return waiting == 1 and count(database_url, "succeeded") == CAPTURES - 1000

        wait_until(held_while_the_rest_went_through, 60, "two batches done and the first held")
        stopped = sigterm_group(first)
        blocker.rollback()  # an orphaned backend, if any, now runs into its dead client
        wait_until(
            lambda: (
                scalar(
                    database_url,
                    "SELECT count(*) FROM pg_stat_activity WHERE datname = %s "
                    "AND state <> 'idle' AND pid <> pg_backend_pid()",
                    dbname,
                )
                == 0
            ),
            30,
            "the held transaction ended",
        )
        # the held batch waited out the soft bound, was cancelled and its message given back
        assert SOFT_SECONDS * 0.9 <= stopped <= SOFT_SECONDS + EXIT_MARGIN_SECONDS, stopped
        assert "Initiating Soft Shutdown" in first.text()
        assert not tasks(first, "retry") and not tasks(first, "raised")  # not ended some other way
        assert count(database_url, "queued") == 1000 and count(database_url, "succeeded") == CAPTURES - 1000
        assert scalar(database_url, "SELECT count(*) FROM memory_records") == CAPTURES - 1000
        assert redis.Redis.from_url(redis_url).llen("ingest") == 1  # the held message, returned

        second = pool(worker_env, tmp_path / "second.log")
        procs.append(second)
        wait_until(lambda: count(database_url, "succeeded") == CAPTURES, 60, "every capture written")
        wait_until(lambda: bool(tasks(second, "succeeded")), 30, "the second pool's task ended")
        # what the second pool ran is the held message itself, not a retry or a re-dispatch
        held = tasks(first, "received") - tasks(first, "succeeded")
        assert len(tasks(first, "received")) == 3 and len(held) == 1
        assert tasks(second, "received") == held == tasks(second, "succeeded")
        # an idle pool does not wait out the bound (worker_enable_soft_shutdown_on_idle off)
        time.sleep(1.0)  # the pool's main process has the task's result
        assert sigterm_group(second) <= SOFT_SECONDS + EXIT_MARGIN_SECONDS
        assert "Initiating Soft Shutdown" not in second.text() and "Cold shutdown" in second.text()
    finally:
        blocker.close()
        for proc in procs:
            with contextlib.suppress(ProcessLookupError, subprocess.TimeoutExpired):
                proc.kill()

    done = live.inbox.wait(ids, 0)
    assert [v.record_ids[0] for v in done] == [v.record_id for v in views]
    assert count(database_url, "succeeded") == CAPTURES
    # one record per capture, plus the fact the observation asserts; each written once
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == CAPTURES + 1
    assert scalar(database_url, "SELECT count(DISTINCT id) FROM memory_records") == CAPTURES + 1
    assert scalar(database_url, "SELECT count(*) FROM audit_log") == CAPTURES + 1
    assert scalar(database_url, "SELECT count(*) FROM memory_records WHERE type = 'semantic'") == 1
