"""Postgres stopped hard under a capture load, then started again (RFC 10.5, 9.1)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import InlineDispatcher
from tests.support.api import Server
from tests.support.load import Load, committed_once
from tests.support.services import EMBEDDING_DIM, PrivatePostgres

pytestmark = pytest.mark.slow

#: The client's timeout: every request must be answered well within it.
CLIENT_TIMEOUT = 2.0


def test_postgres_outage_answers_503_at_once_and_recovers_without_a_restart(
    private_postgres: PrivatePostgres,
    tmp_path: Path,
) -> None:
    settings = Settings(database_url=private_postgres.dsn, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM)
    membrane = Membrane(settings)  # the pools and circuit an API process builds (RFC 10.5)
    app = create_app(settings, membrane=membrane, dispatcher=InlineDispatcher(membrane.inbox_worker))
    try:
        with Server(app) as server, Load(server.url, CLIENT_TIMEOUT) as load:
            load.wait_for(lambda: len(load.accepted) >= 20, 20, "captures accepted")

            private_postgres.stop_hard()
            down = time.monotonic()
            time.sleep(3.0)  # three outage windows: refusals at once and one trial in each
            outage = load.since(down)
            with httpx.Client(base_url=server.url, timeout=CLIENT_TIMEOUT) as probe:
                ready = probe.get("/readyz")

            up = time.monotonic()
            private_postgres.start()
            # recovery without restarting the app: the first trial after the server is back
            load.wait_for(
                lambda: any(o.status == 202 for o in load.since(up)),
                15,
                "a capture accepted after the restart",
            )
            back = len(load.accepted)
            load.wait_for(lambda: len(load.accepted) >= back + 10, 15, "more captures accepted")

        # every request was answered within the client's timeout: none is an exception
        assert all(o.status is not None for o in load.outcomes), [
            o.error for o in load.outcomes if o.status is None
        ][:3]
        assert ready.status_code == 503 and "Retry-After" in ready.headers
        assert ready.json()["checks"]["postgres"] == "unavailable"
        assert len(outage) >= 20 and all(o.status == 503 for o in outage), [o.status for o in outage]
        for o in outage:
            assert o.body["error"]["code"] == "unavailable"
            assert int(o.headers["retry-after"]) >= 1
            assert "socket" not in o.body["error"]["message"]  # the driver's text stays in the log
        assert {o.status for o in load.outcomes} <= {200, 202, 503}, sorted({o.status for o in load.outcomes})

        # the inbox after recovery: process what is queued, then count
        while membrane.inbox_worker.process_captures(drain=10_000, worker="test")["claimed"]:
            pass
        committed_once(private_postgres.dsn, load.accepted)
    finally:
        membrane.close()
