"""API tests over real HTTP: uvicorn in a thread on a free port, real Postgres per test."""

from __future__ import annotations

import httpx
import pytest

from tests.support.api import ServeFn


@pytest.fixture
def client(serve: ServeFn) -> httpx.Client:
    """A client of a server without API keys, processing writes in-process."""
    return serve()
