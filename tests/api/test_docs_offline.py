"""``/docs`` and ``/redoc`` render without network: their assets ship in the package (RFC 10.1).

Each page is loaded from the live API in headless Chromium with every other host
unreachable (``tests/support/browser.py``); the rendered DOM must list the API's
operations, and the page must have asked nothing of another host. The stock FastAPI page,
whose script comes from a CDN, is the negative control: under the same conditions it
renders nothing and its request to the CDN shows in the net log.
"""

from __future__ import annotations

import re
from pathlib import Path

import httpx
from fastapi import FastAPI

from tests.support import browser
from tests.support.api import ServeFn, Server

#: An absolute http(s) URL anywhere in a text.
ABSOLUTE = re.compile(r"https?://", re.IGNORECASE)
#: The ``src`` and ``href`` attributes of an HTML text.
LINKS = re.compile(r"""\b(?:src|href)=["']([^"']+)["']""")


def _spec(client: httpx.Client) -> dict[str, dict[str, dict[str, str]]]:
    spec: dict[str, dict[str, dict[str, str]]] = client.get("/openapi.json").json()["paths"]
    return spec


def _served_locally(client: httpx.Client, page: str) -> list[str]:
    """The page's HTML names no other host, and each asset it names is served: its links."""
    resp = client.get(page)
    assert resp.status_code == 200
    assert ABSOLUTE.findall(resp.text) == [], resp.text
    assert resp.headers["content-security-policy"].startswith("default-src 'self'")
    links = LINKS.findall(resp.text)
    for link in links:
        assert link.startswith("/docs/assets/"), link
        assert client.get(link).status_code == 200, link
    return links


def _origin(client: httpx.Client) -> str:
    return str(client.base_url).rstrip("/")


def test_swagger_ui_lists_every_path_without_network(client: httpx.Client, tmp_path: Path) -> None:
    links = _served_locally(client, "/docs")
    assert "/docs/assets/swagger-ui/swagger-ui-bundle.js" in links

    page = browser.load(f"{_origin(client)}/docs", tmp_path)
    rendered = set(re.findall(r'data-path="([^"]+)"', page.dom))
    assert {"/v1/captures", "/v1/retrieve", "/v1/records/{record_id}"} <= rendered  # positive control
    assert rendered == set(_spec(client))

    origin = _origin(client)
    assert f"{origin}/docs/assets/swagger-ui/swagger-ui-bundle.js" in page.requests  # the log is read
    assert f"{origin}/openapi.json" in page.requests
    assert [url for url in page.requests if not url.startswith(f"{origin}/")] == []


def test_redoc_lists_every_operation_without_network(client: httpx.Client, tmp_path: Path) -> None:
    links = _served_locally(client, "/redoc")
    assert "/docs/assets/redoc/redoc.standalone.js" in links

    page = browser.load(f"{_origin(client)}/redoc", tmp_path)
    rendered = set(re.findall(r'id="operation/([^"]+)"', page.dom))
    expected = {op["operationId"] for ops in _spec(client).values() for op in ops.values()}
    assert {"capture", "retrieve", "get_record"} <= rendered  # positive control
    assert rendered == expected
    assert "/v1/captures:batch" in page.dom

    origin = _origin(client)
    assert f"{origin}/docs/assets/redoc/redoc.standalone.js" in page.requests
    # ReDoc's sidebar would show Redocly's logo from Redocly's CDN; the page's policy stops it
    assert [url for url in page.requests if not url.startswith(f"{origin}/")] == []


def test_a_page_whose_script_comes_from_a_cdn_renders_nothing(tmp_path: Path) -> None:
    stock = FastAPI()  # FastAPI's own /docs: Swagger UI from cdn.jsdelivr.net

    @stock.post("/v1/captures")
    def capture() -> None: ...

    with Server(stock) as server:
        assert ABSOLUTE.findall(httpx.get(f"{server.url}/docs").text)  # names the CDN
        page = browser.load(f"{server.url}/docs", tmp_path)
    assert 'data-path="/v1/captures"' not in page.dom
    assert any(url.startswith("https://cdn.jsdelivr.net/") for url in page.requests), page.requests


def test_the_pages_answer_without_a_key_as_the_api_description_does(serve: ServeFn) -> None:
    keyed = serve(keys={"ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "operator": True}})
    assert keyed.post("/v1/retrieve", json={}).status_code == 401  # positive control: keys are on
    for path in (
        "/openapi.json",
        "/docs",
        "/docs/oauth2-redirect",
        "/redoc",
        "/docs/assets/swagger-ui/swagger-ui.css",
    ):
        assert keyed.get(path).status_code == 200, path
    assert keyed.get("/docs/assets/none.js").status_code == 404
