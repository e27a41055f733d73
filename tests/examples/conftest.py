"""Fixtures of the example tests: the live API and a scripted chat model."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from membrane_client import Client

from tests.support.api import ServeFn


@pytest.fixture
def membrane_url(serve: ServeFn) -> str:
    """The base URL of a live API without keys that processes writes in-process."""
    return str(serve().base_url).rstrip("/")


@pytest.fixture
def sdk(membrane_url: str) -> Iterator[Client]:
    """The SDK on the live API of ``membrane_url``."""
    with Client(membrane_url, timeout=30.0, backoff=0.01) as client:
        yield client
