"""Keys that rotate without a restart: the key file, SIGHUP and ``not_after`` (RFC 10.3)."""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.api import ApiProcess, ServeFn, api_env
from tests.support.processes import ROOT

SCOPE = "rot"
POLICY = {"read_scopes": [SCOPE], "write_scopes": [SCOPE]}
EVENT = {"source_kind": "event", "scope": SCOPE, "content": {"text": "rotated"}}


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def write_atomically(path: Path, keys: Any) -> None:
    """What RFC 10.3 asks of whoever edits the file: a new file renamed over the old."""
    tmp = path.with_suffix(".tmp")
    tmp.write_text(keys if isinstance(keys, str) else json.dumps(keys))
    os.replace(tmp, path)


def status(client: httpx.Client, key: str) -> int:
    return client.post("/v1/captures", json=EVENT, headers=bearer(key)).status_code


def wait_for_status(client: httpx.Client, key: str, code: int, timeout: float = 5.0) -> float:
    """Seconds until ``key`` answers ``code``."""
    start = time.monotonic()
    while status(client, key) != code:
        assert time.monotonic() - start < timeout, f"{key} did not turn {code} in {timeout}s"
        time.sleep(0.05)
    return time.monotonic() - start


def test_a_changed_key_file_is_read_within_about_a_second(serve: ServeFn, tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    write_atomically(path, {"old-key": POLICY})
    client = serve(keys_file=path)
    assert status(client, "old-key") == 202  # control: the file's key is served
    assert status(client, "new-key") == 401

    write_atomically(path, {"new-key": POLICY})
    assert wait_for_status(client, "new-key", 202) < 2.5  # at most one check a second
    resp = client.post("/v1/captures", json=EVENT, headers=bearer("old-key"))
    assert resp.status_code == 401 and resp.json()["error"]["message"] == "unknown API key"


def test_a_file_that_fails_to_load_keeps_the_previous_keys_and_says_why(
    serve: ServeFn, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = tmp_path / "keys.json"
    write_atomically(path, {"first-key": POLICY})
    client = serve(keys_file=path)
    caplog.set_level(logging.INFO, logger="api.auth")

    def errors() -> list[str]:
        return [r.getMessage() for r in caplog.records if r.name == "api.auth" and r.levelno >= logging.ERROR]

    broken = [
        ("{not json", "not valid JSON"),
        ({"first-key": {**POLICY, "not_after": "2030-01-01T00:00:00"}}, "no time zone"),
        ({"first-key": {**POLICY, "captures_per_second": 0}}, "captures_per_second must be a positive"),
        ({}, "names no key"),
    ]
    for n, (content, problem) in enumerate(broken, start=1):
        write_atomically(path, content)
        deadline = time.monotonic() + 5
        while len(errors()) < n:
            assert time.monotonic() < deadline, f"no error logged for {problem!r}"
            assert status(client, "first-key") == 202  # the previous ring serves throughout
            time.sleep(0.05)
        assert problem in errors()[-1] and str(path) in errors()[-1]
    time.sleep(1.2)  # more checks of the same broken file: nothing new to say
    assert status(client, "first-key") == 202
    assert len(errors()) == len(broken)

    write_atomically(path, {"second-key": POLICY})  # control: a good file is loaded again
    wait_for_status(client, "second-key", 202)
    assert status(client, "first-key") == 401


def _run_api(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, "-m", "api", "--host", "127.0.0.1", "--port", "1"]
    return subprocess.run(argv, env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)


def test_a_key_file_that_does_not_load_refuses_the_start(tmp_path: Path) -> None:
    # the refusal comes before anything connects: nothing listens at these addresses
    def run(**env: str) -> subprocess.CompletedProcess[str]:
        return _run_api(api_env("postgresql://127.0.0.1:1/none", "redis://127.0.0.1:1/0", tmp_path, **env))

    path = tmp_path / "keys.json"
    path.write_text('{"k": {"read_scopes": ["a"], "not_after": "tomorrow"}}')
    out = run(MEMBRANE_API_KEYS_FILE=str(path))
    assert out.returncode == 2
    assert f"MEMBRANE_API_KEYS_FILE={path}" in out.stderr and "not_after" in out.stderr

    missing = run(MEMBRANE_API_KEYS_FILE=str(tmp_path / "no"))
    assert missing.returncode == 2 and "cannot be read" in missing.stderr

    path.write_text(json.dumps({"k": POLICY}))
    both = run(MEMBRANE_API_KEYS_FILE=str(path), MEMBRANE_API_KEYS=json.dumps({"other": POLICY}))
    assert both.returncode == 2 and "both set" in both.stderr


@pytest.mark.queue
@pytest.mark.slow
def test_sighup_reloads_the_key_file_at_once(database_url: str, redis_url: str, tmp_path: Path) -> None:
    path = tmp_path / "keys.json"
    path.write_text(json.dumps({"key-aaaa-0001": POLICY}))
    api = ApiProcess(
        api_env(database_url, redis_url, tmp_path, MEMBRANE_API_KEYS_FILE=str(path)), tmp_path / "api.log"
    )
    try:
        api.wait_ready()
        with httpx.Client(base_url=api.url, timeout=10) as client:
            assert status(client, "key-aaaa-0001") == 202
            # the same size, inode and modification time: the file looks unchanged to the check
            before, after = path.stat(), json.dumps({"key-bbbb-0002": POLICY})
            assert len(after) == before.st_size
            with path.open("r+") as f:
                f.write(after)
            os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
            time.sleep(1.5)
            assert status(client, "key-bbbb-0002") == 401  # control: only the signal reloads it
            api.proc.popen.send_signal(signal.SIGHUP)
            wait_for_status(client, "key-bbbb-0002", 202)
            assert status(client, "key-aaaa-0001") == 401
            assert api.proc.popen.poll() is None  # SIGHUP did not end the process
    finally:
        api.stop()
    assert "API keys loaded from" in api.proc.text()


def test_a_key_past_its_not_after_is_401_saying_it_expired(serve: ServeFn) -> None:
    now = datetime.now(UTC)
    keys = {
        "expired-key": {**POLICY, "not_after": (now - timedelta(days=1)).isoformat()},
        "valid-key": {**POLICY, "not_after": (now + timedelta(days=30)).isoformat()},
        "soon-key": {**POLICY, "not_after": (now + timedelta(seconds=2)).isoformat()},
    }
    client = serve(keys=keys)
    resp = client.post("/v1/captures", json=EVENT, headers=bearer("expired-key"))
    assert resp.status_code == 401
    assert resp.json()["error"] == {"code": "unauthorized", "message": "API key expired", "details": []}
    assert resp.headers["www-authenticate"] == "Bearer"
    assert status(client, "valid-key") == 202  # control: a key before its not_after
    assert status(client, "soon-key") == 202
    time.sleep(max(0.0, (now + timedelta(seconds=2.1) - datetime.now(UTC)).total_seconds()))
    assert client.post("/v1/captures", json=EVENT, headers=bearer("soon-key")).json()["error"]["message"] == (
        "API key expired"
    )
