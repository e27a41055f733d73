"""One request id from the API's log line to the ingest worker's, in JSON lines (RFC 14.3).

The API runs as ``python -m api --workers 2`` (uvicorn's spawned worker processes, not the
test's process) and the ingest pool as a real Celery worker, both on the test's Postgres
and redis-server with ``MEMBRANE_LOG_FORMAT=json``; their log files are parsed line by line.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.processes import Proc, Spawn, wait_until
from tests.support.services import free_port

pytestmark = pytest.mark.slow

JSON_LOGS = {"MEMBRANE_LOG_FORMAT": "json", "MEMBRANE_LOG_LEVEL": "INFO"}
CAPTURE = {"source_kind": "event", "scope": "proj", "content": {"text": "deployed the API"}}
KEY = f"key-{uuid.uuid4().hex}"
KEYS = {KEY: {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "high"}}


def lines(path: Path) -> list[dict[str, Any]]:
    """Every JSON object line of a log file (a Celery worker also prints its banner)."""
    out = []
    for line in path.read_text(errors="replace").splitlines():
        if line.startswith("{"):
            out.append(json.loads(line))
    return out


def names(line: dict[str, Any], operation_id: str) -> bool:
    return operation_id in line.get("operation_ids", ())


@contextlib.contextmanager
def api(env: dict[str, str], log: Path) -> Iterator[tuple[httpx.Client, Proc]]:
    port = free_port()
    argv = [sys.executable, "-m", "api", "--port", str(port), "--workers", "2"]
    proc = Proc(argv, {**env, **JSON_LOGS, "MEMBRANE_API_KEYS": json.dumps(KEYS)}, log)
    try:
        client = httpx.Client(
            base_url=f"http://127.0.0.1:{port}", headers={"Authorization": f"Bearer {KEY}"}, timeout=30
        )

        def ready() -> bool:
            assert proc.popen.poll() is None, proc.text()
            with contextlib.suppress(httpx.HTTPError):
                return client.get("/readyz").status_code == 200
            return False

        try:
            wait_until(ready, 90, "the API's /readyz")
            yield client, proc
        finally:
            client.close()
    finally:
        proc.stop()


def capture(client: httpx.Client, request_id: str) -> str:
    resp = client.post("/v1/captures?wait=20", json=CAPTURE, headers={"X-Request-ID": request_id})
    assert resp.status_code == 200, resp.text  # finished by the worker within the wait
    assert resp.headers["X-Request-ID"] == request_id
    body = resp.json()
    assert body["status"] == "succeeded" and body["request_id"] == request_id
    return str(body["operation_id"])


def test_one_request_id_in_the_api_and_the_worker_log(
    spawn: Spawn, worker_env: dict[str, str], tmp_path: Path
) -> None:
    worker = spawn("worker", "ingest", env=JSON_LOGS)
    with api(worker_env, tmp_path / "api.log") as (client, server):
        ours, other = f"test-{uuid.uuid4().hex}", f"other-{uuid.uuid4().hex}"
        op, other_op = capture(client, ours), capture(client, other)
        # the operation keeps the id of the request that submitted it, whoever reads it
        got = client.get(f"/v1/operations/{op}")
        assert got.json()["request_id"] == ours and got.headers["X-Request-ID"] not in (ours, other)
        # an id that is not a sane token (a space, too long) is replaced, not logged
        unsafe = "a b" + "x" * 200
        made = client.get(f"/v1/operations/{op}", headers={"X-Request-ID": unsafe}).headers["X-Request-ID"]
        assert made != unsafe and len(made) == 32

        def access_line(request_id: str) -> dict[str, Any] | None:
            for line in lines(server.log):
                if line.get("logger") == "api.access" and line.get("request_id") == request_id:
                    return line
            return None

        wait_until(lambda: access_line(other) is not None, 20, "the API's access lines")
    # a worker logs the task's outcome after its commit, which may follow the API's answer
    wait_until(lambda: any(names(w, other_op) for w in lines(worker.log)), 20, "the worker's lines")
    api_lines, worker_lines = lines(server.log), lines(worker.log)

    # the API's line: the capture's access line, from a spawned uvicorn worker process
    access = access_line(ours)
    assert access is not None, server.text()[-3000:]
    assert access["method"] == "POST" and access["path"] == "/v1/captures" and access["status"] == 200
    assert names(access, op) and access["duration_ms"] > 0
    assert access["pid"] != server.popen.pid  # not uvicorn's supervisor: a worker it spawned
    assert access["actor"] == "key:" + hashlib.sha256(KEY.encode()).hexdigest()[:12]
    assert not any(KEY in json.dumps(line) for line in api_lines + worker_lines)  # never the key
    # every line the API processes wrote is JSON, uvicorn's own included
    text = [t for t in server.text().splitlines() if t.strip()]
    assert len(text) == len(api_lines), [t for t in text if not t.startswith("{")]
    assert any(line.get("logger") == "uvicorn.error" for line in api_lines)

    # the worker's line: the task that wrote the capture, with the same request id
    done = [w for w in worker_lines if w.get("request_id") == ours and names(w, op)]
    assert done, worker.text()[-3000:]
    assert any(w["task"] == "membrane.ingest" and "succeeded" in w["message"] for w in done), done
    assert all(w["pid"] != worker.popen.pid for w in done)  # the pool's child ran it

    # the other request's id is on the other capture's lines, and never on this one's
    for line in api_lines + worker_lines:
        if names(line, op):
            assert line.get("request_id") == ours, line
        if line.get("request_id") == ours:
            assert not names(line, other_op), line
    assert any(names(w, other_op) and w.get("request_id") == other for w in worker_lines)  # control
    assert access_line(made) is not None  # control: that request has its line, with the new id
    assert not any("a bxxx" in json.dumps(line) for line in api_lines)
