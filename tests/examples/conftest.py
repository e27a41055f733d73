"""Fixtures of the example tests: the live API and a scripted chat model."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest
from membrane_client import Client

from tests.support.api import ServeFn
from tests.support.scripted_model import ScriptedModel, Step


@pytest.fixture
def scripted_model() -> Iterator[Callable[[dict[int, Step]], ScriptedModel]]:
    """``scripted_model(script)`` → a started :class:`ScriptedModel`, stopped after the test."""
    started: list[ScriptedModel] = []

    def start(script: dict[int, Step]) -> ScriptedModel:
        model = ScriptedModel(script)
        model.thread.start()
        started.append(model)
        return model

    yield start
    for model in started:
        model.server.shutdown()
        model.server.server_close()
        model.thread.join(10)


@pytest.fixture
def membrane_url(serve: ServeFn) -> str:
    """The base URL of a live API without keys that processes writes in-process."""
    return str(serve().base_url).rstrip("/")


@pytest.fixture
def sdk(membrane_url: str) -> Iterator[Client]:
    """The SDK on the live API of ``membrane_url``."""
    with Client(membrane_url, timeout=30.0, backoff=0.01) as client:
        yield client
