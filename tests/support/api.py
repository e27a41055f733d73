"""The live API of the tests: uvicorn in a background thread or a real ``python -m api`` process,
and a broker that is down."""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from tests.support import services
from tests.support.processes import ROOT, Proc

#: The ``serve`` fixture: ``serve(dispatcher=..., keys=..., **create_app_kwargs)`` → a client.
ServeFn = Callable[..., httpx.Client]


class Server:
    """A uvicorn server for one app in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            app, host="127.0.0.1", port=self.port, log_level="warning", lifespan="on", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, name="uvicorn", daemon=True)

    def __enter__(self) -> Server:
        self.thread.start()
        deadline = time.monotonic() + 20
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)


class BrokenDispatcher:
    """A broker that is down: every publish fails."""

    def __init__(self) -> None:
        self.calls = 0

    def publish(self, kind: Any, operation_ids: Any) -> bool:
        self.calls += 1
        raise ConnectionError("broker down")


def api_env(database_url: str, redis_url: str, data_dir: Path, **extra: str) -> dict[str, str]:
    """The environment of a ``python -m api`` process on the test's database and Redis."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMBRANE_")}
    env.update(
        MEMBRANE_DATABASE_URL=database_url,
        MEMBRANE_REDIS_URL=redis_url,
        MEMBRANE_EMBEDDING_DIM=str(services.EMBEDDING_DIM),
        MEMBRANE_EMBEDDING_PROVIDER="none",
        MEMBRANE_DATA_DIR=str(data_dir),
        MEMBRANE_POOL_MAX_SIZE="2",
        PYTHONPATH=str(ROOT),
    )
    env.update(extra)
    return env


class ApiProcess:
    """``python -m api`` on a free loopback port, in its own process (its own key ring, limiter)."""

    def __init__(self, env: dict[str, str], log: Path, *, workers: int = 1) -> None:
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        argv = [sys.executable, "-m", "api", "--host", "127.0.0.1", "--port", str(self.port)]
        if workers > 1:
            argv += ["--workers", str(workers)]
        self.proc = Proc(argv, env, log)

    def wait_ready(self, timeout: float = 60.0) -> ApiProcess:
        """Block until ``/healthz`` answers; RuntimeError if the process exits first."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.popen.poll() is not None:
                raise RuntimeError(f"the API exited ({self.proc.popen.returncode}):\n{self.proc.text()}")
            try:
                if httpx.get(f"{self.url}/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.TransportError:
                pass
            time.sleep(0.1)
        raise TimeoutError(f"the API did not answer in {timeout}s:\n{self.proc.text()[-3000:]}")

    def stop(self) -> None:
        self.proc.stop()
