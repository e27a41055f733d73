"""Server-rendered pages: the Jinja2 environment, the console's headers and its error pages
(RFC 10.8).

Memory content is untrusted (an agent may have captured a web page's HTML or script):
autoescape is on for every template and no template marks memory content safe; the
Content-Security-Policy forbids inline script and inline style, so that even markup that got
through would not run.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import jinja2
from fastapi.routing import APIRoute
from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response

from api import errors as api_errors
from api.console import session
from api.metrics import ASGIApp, Message, Receive, Scope, Send
from membrane_core import errors

log = logging.getLogger(__name__)

HERE = Path(__file__).resolve().parent
PREFIX = "/console"
STATIC = f"{PREFIX}/static"

#: RFC 10.8: nothing inline runs or styles the page, nothing loads from another host.
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
#: RFC 10.8: on every console answer. ``same-origin``: no other origin learns a console URL
#: (they name records and filters), while a form's POST keeps the ``Origin`` header the CSRF
#: check reads (under ``no-referrer`` browsers send ``Origin: null``).
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
}


def _json(value: Any) -> str:
    """Pretty-printed JSON of a payload; the template escapes it like any text."""
    return json.dumps(value, indent=2, ensure_ascii=False, sort_keys=True, default=str)


def _when(value: datetime | None) -> str:
    """A time in UTC to the second, as every page shows it."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%d %H:%M:%S UTC")


def _iso(value: datetime | None) -> str:
    """A time as the value of a ``datetime-local`` input (UTC, milliseconds)."""
    if value is None:
        return ""
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def _span(value: datetime | None) -> str:
    """How far ``value`` is from now, in its two largest units (``3 d 4 h``, ``12 min``): a
    proposal's age and the time left before it expires (RFC 5.7)."""
    if value is None:
        return ""
    seconds = int(abs((datetime.now(UTC) - value).total_seconds()))
    parts = [(seconds // 86400, "d"), (seconds % 86400 // 3600, "h"), (seconds % 3600 // 60, "min")]
    first = next((i for i, (n, _) in enumerate(parts) if n), None)
    if first is None:
        return f"{seconds} s"
    return " ".join(f"{n} {unit}" for n, unit in parts[first : first + 2] if n)


def _query(params: dict[str, Any], **changes: Any) -> str:
    """A query string of ``params`` with ``changes``; empty values left out."""
    merged = {**params, **changes}
    pairs: list[tuple[str, str]] = []
    for name, value in merged.items():
        for item in value if isinstance(value, list | tuple) else [value]:
            if item not in (None, ""):
                pairs.append((name, str(item)))
    return urlencode(pairs)


ENV = jinja2.Environment(
    loader=jinja2.FileSystemLoader(HERE / "templates"),
    autoescape=True,  # every template, whatever its name (RFC 10.8)
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)
ENV.filters["pretty"] = _json
ENV.filters["when"] = _when
ENV.filters["iso"] = _iso
ENV.filters["span"] = _span
ENV.globals["query"] = _query
ENV.globals["static"] = STATIC
ENV.globals["prefix"] = PREFIX


def page(
    request: Request,
    found: session.Viewer | None,
    template: str,
    context: dict[str, Any],
    *,
    status: int = 200,
) -> HTMLResponse:
    """Render ``template`` for ``found``; sets the session cookie when the request started one."""
    html = ENV.get_template(template).render(request=request, viewer=found, **context)
    response = HTMLResponse(html, status_code=status)
    if found is not None and found.issue:
        session.set_cookie(response, request, found)
    return response


def redirect(url: str, found: session.Viewer | None = None, request: Request | None = None) -> Response:
    """303 to ``url`` (after a POST, a GET); carries a new session cookie when there is one."""
    response = RedirectResponse(url, status_code=303)
    if found is not None and request is not None and found.issue:
        session.set_cookie(response, request, found)
    return response


def error_page(request: Request, exc: errors.MembraneError) -> Response:
    """A core error as a page at its status (RFC 10.2); 401 sends the browser to sign in."""
    status = api_errors.status_of(exc)
    if status == 401:
        target = f"{PREFIX}/signin"
        if request.method == "GET" and request.url.path != target:
            target += "?" + urlencode({"next": request.url.path})
        response = redirect(target)
        if not isinstance(exc, session.SignInRequired):  # a key that no longer signs in
            session.clear_cookie(response, request)
        return response
    if status >= 500 and status != 503:
        log.error("console error", exc_info=exc)
    html = ENV.get_template("error.html").render(
        request=request,
        viewer=None,
        status=status,
        code=exc.code,
        message=exc.message if status < 500 or status == 503 else "internal error",
        details=exc.details,
    )
    headers = {"Retry-After": str(getattr(exc, "retry_after", 1))} if status in (429, 503) else None
    return HTMLResponse(html, status_code=status, headers=headers)


class ConsoleRoute(APIRoute):
    """A console route: a core error becomes an HTML page, not the API's JSON body."""

    def get_route_handler(self) -> Callable[[Request], Coroutine[Any, Any, Response]]:
        handler = super().get_route_handler()

        async def handle(request: Request) -> Response:
            try:
                return await handler(request)
            except errors.MembraneError as exc:
                return error_page(request, exc)

        return handle


class Headers:
    """RFC 10.8: the console's security headers on every answer under ``/console``, and
    ``Cache-Control: no-store`` on its pages (its static assets may be cached)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path = str(scope.get("path", ""))
        if scope["type"] != "http" or not (path == PREFIX or path.startswith(PREFIX + "/")):
            await self.app(scope, receive, send)
            return
        static = path.startswith(STATIC + "/")

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                raw = [(k, v) for k, v in message.get("headers", []) if k.decode().lower() not in _OURS]
                raw += [(k.lower().encode(), v.encode()) for k, v in HEADERS.items()]
                if not static:
                    raw.append((b"cache-control", b"no-store"))
                message = {**message, "headers": raw}
            await send(message)

        await self.app(scope, receive, with_headers)


_OURS = {name.lower() for name in HEADERS} | {"cache-control"}
