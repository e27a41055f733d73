"""``/docs`` (Swagger UI) and ``/redoc`` from assets shipped in the package (RFC 10.1).

FastAPI's own pages load their JavaScript and CSS from a CDN and stay blank without
internet access. These are the same pages (FastAPI's ``get_swagger_ui_html`` and
``get_redoc_html``) pointing at copies under ``api/static/``, served at
``/docs/assets``; ``api/static/README.md`` gives their versions and licenses. Like
FastAPI's pages, and like ``/openapi.json``, they answer without an API key: they hold
the API's description and no data.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.openapi.docs import get_redoc_html, get_swagger_ui_html, get_swagger_ui_oauth2_redirect_html
from fastapi.staticfiles import StaticFiles
from starlette.requests import Request
from starlette.responses import HTMLResponse

#: The shipped Swagger UI and ReDoc files.
STATIC = Path(__file__).resolve().parent / "static"
#: Where they are served.
ASSETS = "/docs/assets"
#: RFC 10.1: the pages load nothing from another host. ReDoc's sidebar shows Redocly's logo
#: from Redocly's CDN; under this policy the browser does not fetch it and ReDoc hides it.
#: The policy is about hosts: inline code and ``new Function``, which the bundles use, stay.
CSP = "default-src 'self' 'unsafe-inline' 'unsafe-eval' data: blob:"
DOCS = "/docs"
REDOC = "/redoc"


def _root(request: Request) -> str:
    """The prefix a proxy mounts the API under (``root_path``), as FastAPI's pages use it."""
    return str(request.scope.get("root_path", "")).rstrip("/")


def install(app: FastAPI) -> None:
    """RFC 10.1: serve ``/docs``, its OAuth2 redirect page, ``/redoc`` and their assets.

    ``app`` is built with ``docs_url=None, redoc_url=None``, so that FastAPI adds none of
    its CDN pages.
    """
    openapi_url = app.openapi_url
    if openapi_url is None:
        raise ValueError("the documentation pages render /openapi.json: keep openapi_url")
    oauth2_url = app.swagger_ui_oauth2_redirect_url
    app.mount(ASSETS, StaticFiles(directory=STATIC), name="docs-assets")

    def swagger_ui(request: Request) -> HTMLResponse:
        root = _root(request)
        page = get_swagger_ui_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - Swagger UI",
            swagger_js_url=f"{root}{ASSETS}/swagger-ui/swagger-ui-bundle.js",
            swagger_css_url=f"{root}{ASSETS}/swagger-ui/swagger-ui.css",
            swagger_favicon_url=f"{root}{ASSETS}/swagger-ui/favicon-32x32.png",
            oauth2_redirect_url=root + oauth2_url if oauth2_url else None,
            init_oauth=app.swagger_ui_init_oauth,
            swagger_ui_parameters=app.swagger_ui_parameters,
        )
        page.headers["Content-Security-Policy"] = CSP
        return page

    def swagger_ui_redirect(request: Request) -> HTMLResponse:
        return get_swagger_ui_oauth2_redirect_html()

    def redoc(request: Request) -> HTMLResponse:
        root = _root(request)
        page = get_redoc_html(
            openapi_url=root + openapi_url,
            title=f"{app.title} - ReDoc",
            redoc_js_url=f"{root}{ASSETS}/redoc/redoc.standalone.js",
            redoc_favicon_url=f"{root}{ASSETS}/swagger-ui/favicon-32x32.png",
            with_google_fonts=False,
        )
        page.headers["Content-Security-Policy"] = CSP
        return page

    app.add_route(DOCS, swagger_ui, include_in_schema=False)
    if oauth2_url:
        app.add_route(oauth2_url, swagger_ui_redirect, include_in_schema=False)
    app.add_route(REDOC, redoc, include_in_schema=False)
