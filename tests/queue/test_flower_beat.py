"""Flower behind basic auth on the same broker, and beat's schedule (RFC 9.5, 14.1)."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

import beat_schedule
from membrane_core import Settings
from tests.support import services
from tests.support.processes import ROOT
from workers.app import QUEUES, TASK_ROUTES, app, beat_argv, flower_argv, worker_argv


def _env(redis_url: str, **extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("MEMBRANE_", "FLOWER_"))}
    env.update(MEMBRANE_REDIS_URL=redis_url, PYTHONPATH=str(ROOT), **extra)
    return env


def _get(url: str, auth: tuple[str, str] | None = None, timeout: float = 60.0) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while True:
        try:
            return httpx.get(url, auth=auth, timeout=5)
        except httpx.TransportError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.2)


def test_flower_requires_basic_auth(redis_url: str, tmp_path: Path) -> None:
    port = services.free_port()
    argv = flower_argv(Settings(), port=port)
    assert not any("secret" in a for a in argv)  # the credentials never reach the argv
    refused = subprocess.run(argv, env=_env(redis_url), cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert refused.returncode != 0 and "MEMBRANE_FLOWER_BASIC_AUTH" in refused.stderr
    log = (tmp_path / "flower.log").open("wb")
    proc = subprocess.Popen(
        argv,
        env=_env(redis_url, MEMBRANE_FLOWER_BASIC_AUTH="admin:secret"),
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    try:
        url = f"http://127.0.0.1:{port}/api/workers"
        assert _get(url).status_code == 401
        assert _get(url, auth=("admin", "wrong")).status_code == 401
        assert _get(url, auth=("admin", "secret")).status_code == 200
    finally:
        proc.terminate()
        proc.wait(timeout=20)
        log.close()


def test_open_flower_is_an_explicit_choice() -> None:
    argv = flower_argv(Settings(), open_access=True)
    assert argv[-1] == "--open"
    assert argv[:3] == [sys.executable, "-m", "workers.flower"]


def test_beat_schedule_from_settings() -> None:
    plain = beat_schedule.build(Settings(beat_prune_seconds=0))
    assert set(plain) == {
        "redispatch-stale-operations",
        "reap-expired-claims",
        "purge-finished-operations",
        "review-expiry",
        "maintenance-decay",
        "maintenance-consolidate",
    }
    no_expiry = beat_schedule.build(Settings(beat_prune_seconds=0, beat_review_seconds=0))
    assert set(no_expiry) == set(plain) - {"review-expiry"}
    assert plain["maintenance-decay"]["kwargs"] == {"job": "decay"}
    assert plain["redispatch-stale-operations"]["options"]["expires"] == 10.0
    full = beat_schedule.build(
        Settings(embedding_provider="hashing", llm_provider="deterministic", beat_embed_seconds=2)
    )
    assert full["embedding-batch"] == {
        "task": "membrane.embed_batch",
        "schedule": 2.0,
        "kwargs": {},
        "options": {"expires": 2.0},
    }
    assert "extraction-batch" in full and "maintenance-prune" in full
    for entry in full.values():
        assert entry["task"] in app.tasks or entry["task"] in TASK_ROUTES


def test_app_configuration_and_argv() -> None:
    conf = app.conf
    assert conf.task_acks_late and conf.task_reject_on_worker_lost
    assert conf.worker_prefetch_multiplier == 1
    assert conf.worker_send_task_events and conf.task_send_sent_event
    assert {q.name for q in conf.task_queues} == set(QUEUES)
    assert {r["queue"] for r in TASK_ROUTES.values()} == set(QUEUES)
    argv = worker_argv("llm")
    assert argv[argv.index("-Q") + 1] == "llm" and "-E" in argv
    with pytest.raises(ValueError):
        worker_argv("nope")
    assert beat_argv("/tmp/s")[-3:-1] == ["-s", "/tmp/s"]
