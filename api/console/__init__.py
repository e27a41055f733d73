"""The memory console, served at ``/console`` (RFC 10.8).

Server-rendered pages (Jinja2, htmx shipped in the package) over the same core services as the
JSON routes; a session cookie instead of a bearer header. Why this stack:
docs/design/console.md.
"""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.staticfiles import StaticFiles

from api.console import corrections, pipeline, render, review, routes


def install(app: FastAPI) -> None:
    """RFC 10.8: the console's routes, its static assets and its security headers; none of it is
    in ``/openapi.json``, whose contract stays the JSON routes."""
    app.mount(render.STATIC, StaticFiles(directory=render.HERE / "static"), name="console-static")
    for router in (routes.router, corrections.router, pipeline.router, review.router):
        app.include_router(router)
    app.add_middleware(render.Headers)
