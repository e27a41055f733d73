"""A Postgres that stops answering (every process of it SIGSTOPped, as behind a partition that
drops packets) gets a 503 within a second, not a wait as long as the hang (RFC 10.5)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import httpx
import pytest

from api.app import create_app
from membrane_cli.stack import process_tree
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import InlineDispatcher
from membrane_core.storage import embedded
from tests.support.api import Server
from tests.support.services import EMBEDDING_DIM, PrivatePostgres

pytestmark = pytest.mark.slow


def _signal_all(pids: list[int], sig: signal.Signals) -> None:
    for pid in pids:
        try:
            os.kill(pid, sig)
        except ProcessLookupError:
            pass


def test_a_hung_postgres_gets_a_503_within_a_second_and_recovers(
    private_postgres: PrivatePostgres, tmp_path: Path
) -> None:
    settings = Settings(
        database_url=private_postgres.dsn,
        data_dir=tmp_path,
        embedding_dim=EMBEDDING_DIM,
        request_pool_timeout_seconds=5,  # the watch, not the pool's wait, must answer
    )
    membrane = Membrane(settings)
    app = create_app(settings, membrane=membrane, dispatcher=InlineDispatcher(membrane.inbox_worker))
    postmaster = embedded.postmaster(private_postgres.data_dir)
    assert postmaster is not None
    frozen: list[int] = []
    try:
        with Server(app) as server, httpx.Client(base_url=server.url, timeout=30) as client:
            for _ in range(3):  # the pool holds idle connections, as after any traffic
                assert client.get("/v1/records", params={"scope": "s"}).status_code == 200

            frozen = process_tree(postmaster.pid)
            _signal_all(frozen, signal.SIGSTOP)
            answers = []
            for path in ("/v1/records", "/v1/records", "/v1/operations"):
                t = time.monotonic()
                resp = client.get(path, params={"scope": "s"} if path == "/v1/records" else None)
                answers.append((resp.status_code, time.monotonic() - t))

            _signal_all(frozen, signal.SIGCONT)
            frozen = []
            deadline = time.monotonic() + 15
            back = None
            while time.monotonic() < deadline:
                back = client.get("/v1/records", params={"scope": "s"})
                if back.status_code == 200:
                    break
                time.sleep(0.2)
    finally:
        _signal_all(frozen, signal.SIGCONT)
        membrane.close()
    print("answers (status, seconds):", answers)
    assert [s for s, _ in answers] == [503, 503, 503], answers
    assert max(t for _, t in answers) < 1.0, answers
    assert back is not None and back.status_code == 200  # positive control: it recovers
