"""Shared HTTP plumbing for the OpenAI-compatible adapters (RFC 12.1, RFC 12.2).

The one place where httpx errors become provider errors: timeouts, connection
failures, HTTP 408, 429 and 5xx are transient (worth a retry); any other 4xx,
a redirect, a malformed URL or a body that is not JSON is permanent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Self

import httpx

from membrane_core.providers.base import ProviderError, TransientProviderError

__all__ = ["build_client", "endpoint", "post_json"]

#: Characters of a failed response body quoted in the error message.
EXCERPT_CHARS = 200

_TRANSIENT_STATUS = frozenset({408, 429})

_TRANSIENT_TRANSPORT = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
    httpx.ProxyError,
)


def build_client(
    *,
    api_key: str | None,
    timeout: float,
    transport: httpx.BaseTransport | None,
) -> httpx.Client:
    """One reusable client with Bearer auth when a key is given (RFC 12.1)."""
    headers = {"Accept": "application/json"}
    if api_key:
        headers["Authorization"] = f"Bearer {api_key}"
    return httpx.Client(headers=headers, timeout=httpx.Timeout(timeout), transport=transport)


def endpoint(base_url: str, path: str) -> str:
    """``base_url`` joined with ``path`` with exactly one slash between."""
    return f"{base_url.rstrip('/')}/{path.lstrip('/')}"


def _excerpt(response: httpx.Response) -> str:
    try:
        text = response.text
    except (UnicodeDecodeError, LookupError):
        return "<undecodable body>"
    text = " ".join(text.split())
    if len(text) > EXCERPT_CHARS:
        return text[:EXCERPT_CHARS] + "..."
    return text


def post_json(client: httpx.Client, url: str, payload: Mapping[str, object]) -> object:
    """POST ``payload`` as JSON and return the decoded JSON answer (RFC 12.1).

    Raises ``TransientProviderError`` or ``ProviderError`` as described in the
    module docstring; never an httpx exception.
    """
    try:
        response = client.post(url, json=payload)
    except _TRANSIENT_TRANSPORT as exc:
        raise TransientProviderError(f"POST {url} failed: {type(exc).__name__}: {exc}") from exc
    except (httpx.HTTPError, httpx.InvalidURL) as exc:
        raise ProviderError(f"POST {url} failed: {type(exc).__name__}: {exc}") from exc
    status = response.status_code
    if status in _TRANSIENT_STATUS or status >= 500:
        raise TransientProviderError(f"POST {url} returned HTTP {status}: {_excerpt(response)}")
    if not 200 <= status < 300:
        raise ProviderError(f"POST {url} returned HTTP {status}: {_excerpt(response)}")
    try:
        return response.json()
    except ValueError as exc:
        raise ProviderError(f"POST {url} returned a body that is not JSON: {_excerpt(response)}") from exc


class ClientOwner:
    """Owns one reused ``httpx.Client``; closes it on ``close()`` or leaving a ``with``."""

    _client: httpx.Client

    def close(self) -> None:
        """Close the underlying HTTP client."""
        self._client.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
