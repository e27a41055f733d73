"""API tests over real HTTP: uvicorn in a thread on a free port, real Postgres per test."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import pytest
import uvicorn
from fastapi import FastAPI
from pydantic import SecretStr

from api.app import create_app
from membrane_core import Membrane, Settings
from membrane_core.operations import InlineDispatcher
from membrane_core.storage.db import Database
from tests.support import services


class Server:
    """A uvicorn server for one app in a background thread."""

    def __init__(self, app: FastAPI) -> None:
        self.port = services.free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="on", access_log=False)
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


@pytest.fixture
def api_membrane(settings: Settings, db: Database) -> Membrane:
    """A Membrane on the test database with the real clock (operations wait on real time)."""
    return Membrane(settings, database=db)


ServeFn = Callable[..., httpx.Client]


@pytest.fixture
def serve(api_membrane: Membrane) -> Iterator[ServeFn]:
    """``serve(dispatcher=..., keys=..., **create_app_kwargs)`` → an httpx client on a live server."""
    stack: list[Any] = []

    def start(*, dispatcher: Any = None, keys: dict[str, Any] | None = None,
              headers: dict[str, str] | None = None, broker_url: str | None = None,
              metrics_token: str | None = None, **kwargs: Any) -> httpx.Client:
        settings = api_membrane.settings
        if keys is not None:
            settings = settings.model_copy(update={"api_keys": keys})
        if metrics_token is not None:
            settings = settings.model_copy(update={"metrics_token": SecretStr(metrics_token)})
        if broker_url is not None:  # the app builds its real Celery dispatcher on this broker
            settings = settings.model_copy(update={"redis_url": broker_url})
        elif dispatcher is None:
            dispatcher = InlineDispatcher(api_membrane.inbox_worker)
        app = create_app(settings, membrane=api_membrane, dispatcher=dispatcher, **kwargs)
        server = Server(app).__enter__()
        client = httpx.Client(base_url=server.url, headers=headers or {}, timeout=60)
        stack.append((server, client))
        return client

    yield start
    for server, client in reversed(stack):
        client.close()
        server.__exit__()


@pytest.fixture
def client(serve: ServeFn) -> httpx.Client:
    """A client of a server without API keys, processing writes in-process."""
    return serve()
