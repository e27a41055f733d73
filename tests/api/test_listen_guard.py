"""RFC 7.5 per request: without API keys only loopback is served, however the app was started."""

from __future__ import annotations

import asyncio

import httpx

from api.app import create_app
from membrane_core import Membrane
from membrane_core.operations import RecordingDispatcher


def _get_all(membrane: Membrane, urls: list[str]) -> list[httpx.Response]:
    app = create_app(membrane=membrane, dispatcher=RecordingDispatcher())

    async def run() -> list[httpx.Response]:
        async with app.router.lifespan_context(app):
            transport = httpx.ASGITransport(app=app)  # no network: the URL only fills the scope
            async with httpx.AsyncClient(transport=transport) as client:
                return [await client.post(u, json={"query": "x"}) for u in urls]

    return asyncio.run(run())


def test_non_loopback_address_is_refused_without_keys(membrane: Membrane) -> None:
    loop, v6, public = _get_all(membrane, ["http://127.0.0.1/v1/retrieve",
                                           "http://[::1]/v1/retrieve",
                                           "http://10.1.2.3/v1/retrieve"])
    assert loop.status_code == 200 and v6.status_code == 200  # positive controls
    assert public.status_code == 403
    assert "MEMBRANE_API_KEYS" in public.json()["error"]["message"]
