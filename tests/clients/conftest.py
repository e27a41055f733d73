"""Fixtures of the SDK tests: the SDK on the live API."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from membrane_client import Client

from tests.support.api import ServeFn


@pytest.fixture
def sdk(serve: ServeFn) -> Iterator[Client]:
    """The SDK on a live server without keys that processes writes in-process."""
    http = serve()
    with Client(str(http.base_url), timeout=30.0, backoff=0.01) as client:
        yield client
