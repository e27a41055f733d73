"""The broker killed and restarted under a capture load (RFC 10.5, 9.5)."""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import pytest

from membrane_core import Membrane, Settings
from membrane_core.enums import OperationKind, OperationStatus
from tests.support.api import ServeFn
from tests.support.load import Load, committed_once
from tests.support.processes import ROOT, Proc
from tests.support.services import EMBEDDING_DIM, Redis
from workers.app import make_app

pytestmark = [pytest.mark.queue, pytest.mark.slow]

#: The client's timeout: every write must be answered within it.
CLIENT_TIMEOUT = 1.0


def test_writes_stay_fast_while_the_broker_is_killed_and_beat_recovers_them(
    serve: ServeFn,
    api_membrane: Membrane,
    killable_redis: Redis,
    database_url: str,
    tmp_path: Path,
) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env.update(
        MEMBRANE_DATABASE_URL=database_url,
        MEMBRANE_REDIS_URL=killable_redis.url,
        MEMBRANE_EMBEDDING_DIM=str(EMBEDDING_DIM),
        MEMBRANE_DATA_DIR=str(tmp_path),
        MEMBRANE_POOL_MAX_SIZE="4",
        MEMBRANE_REDISPATCH_AFTER_SECONDS="1",
        PYTHONPATH=str(ROOT),
    )
    worker = Proc(
        [
            sys.executable,
            "-m",
            "celery",
            "-A",
            "workers.app:app",
            "worker",
            "-Q",
            "ingest,maintenance",
            "-c",
            "1",
            "-n",
            "fault@%h",
            "--loglevel=INFO",
            "--without-gossip",
            "--without-mingle",
            "-E",
        ],
        env,
        tmp_path / "worker.log",
    )
    try:
        worker.wait_for("ready.")
        client = serve(broker_url=killable_redis.url)  # the app's real Celery dispatcher
        with Load(str(client.base_url), CLIENT_TIMEOUT) as load:
            load.wait_for(lambda: len(load.accepted) >= 20, 20, "captures accepted")
            down = time.monotonic()
            killable_redis.kill()  # every message it held is lost with it
            load.wait_for(
                lambda: time.monotonic() > down + 3.0 and len(load.since(down)) >= 20,
                20,
                "captures during the outage",
            )
            killable_redis.start()
            up = time.monotonic()
            load.wait_for(lambda: time.monotonic() > up + 2.0, 20, "captures after the restart")

        # every write was answered 202 within the client's timeout, the broker down or not
        writes = [o for o in load.outcomes if o.method == "POST"]
        assert all(o.status == 202 for o in writes), [(o.status, o.error) for o in writes if o.status != 202][
            :3
        ]
        assert sum(o.started >= down and o.started < up for o in writes) >= 10
        assert all(o.status == 200 for o in load.outcomes if o.method == "GET")

        # beat's re-dispatch through the restarted broker; the worker reconnects on its own
        ids = [a["operation_id"] for a in load.accepted]
        beat = make_app(Settings(redis_url=killable_redis.url))
        deadline = time.monotonic() + 25
        while True:
            beat.send_task("membrane.redispatch")
            views = api_membrane.inbox.wait(ids, 1.5)
            if all(v.status is OperationStatus.SUCCEEDED for v in views):
                break
            assert time.monotonic() < deadline, worker.text()[-3000:]
        beat.close()
        assert all(v.kind is OperationKind.CAPTURE for v in views)
        committed_once(database_url, load.accepted)
    finally:
        worker.stop()
