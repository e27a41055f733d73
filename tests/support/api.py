"""The live API of the tests: uvicorn in a background thread, and a broker that is down."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import httpx
import uvicorn
from fastapi import FastAPI

from tests.support import services

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
