"""The API over a benchmark's own store, served on a loopback port in a thread (RFC 14.1)."""

from __future__ import annotations

import threading
import time

import uvicorn

from membrane_cli.stack import free_port
from membrane_core import Membrane
from membrane_core.inbox.submit import RecordingDispatcher


class Served:
    """``membrane``'s API on a free loopback port, with no broker and no rate limiter: a
    benchmark measures the reads, not a Redis round trip (RFC 10.6: no limit without keys)."""

    def __init__(self, membrane: Membrane) -> None:
        from api.app import create_app
        from api.ratelimit import Unlimited

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.app = create_app(membrane=membrane, dispatcher=RecordingDispatcher(), rate_limiter=Unlimited())
        config = uvicorn.Config(
            self.app, host="127.0.0.1", port=self.port, log_level="warning", access_log=False
        )
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def __enter__(self) -> Served:
        self.thread.start()
        deadline = time.monotonic() + 60
        while not self.server.started:
            if not self.thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the API did not start")
            time.sleep(0.02)
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.should_exit = True
        self.thread.join(20)
