"""The listen and TLS guard every entry point applies before it serves (RFC 7.5).

The API, Flower, a worker pool's ``/metrics`` and ``membrane run`` share these rules, so they
live below all of them: ``api`` and ``workers`` import this module, and it imports neither.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membrane_core import errors

__all__ = ["Listen", "check_credentials", "check_listen", "is_loopback", "plan_listen", "tls_files"]


def is_loopback(host: str) -> bool:
    """True when ``host`` only accepts local connections (RFC 7.5)."""
    if host in {"localhost", "ip6-localhost"}:
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def check_listen(host: str, keys: Mapping[str, Any]) -> None:
    """RFC 7.5: refuse a non-loopback address unless API keys are configured."""
    if not keys and not is_loopback(host):
        raise errors.Forbidden(
            f"refusing to listen on {host!r} without API keys: set MEMBRANE_API_KEYS or bind to 127.0.0.1",
            details=[{"field": "host", "message": "non-loopback without API keys", "type": "forbidden"}],
        )


@dataclass(frozen=True)
class Listen:
    """How an entry point serves (RFC 7.5): its TLS files, if any, and what to warn about."""

    certfile: Path | None = None
    keyfile: Path | None = None
    warning: str | None = None

    @property
    def scheme(self) -> str:
        """``https`` with TLS files, else ``http``."""
        return "https" if self.certfile else "http"


def tls_files(certfile: Path | str | None, keyfile: Path | str | None) -> tuple[Path, Path] | None:
    """RFC 7.5: ``MEMBRANE_TLS_CERTFILE`` and ``MEMBRANE_TLS_KEYFILE``, both or neither, both existing."""
    # An empty variable (``${VAR:-}`` in compose) reaches Settings as Path("."): unset.
    certfile, keyfile = (None if v is None or str(v) in {"", "."} else v for v in (certfile, keyfile))
    if certfile is None and keyfile is None:
        return None
    given = {"MEMBRANE_TLS_CERTFILE": certfile, "MEMBRANE_TLS_KEYFILE": keyfile}
    missing = [name for name, value in given.items() if value is None]
    if missing:
        other = next(name for name in given if name not in missing)
        raise errors.InvalidInput(
            f"{other} is set but {missing[0]} is not: TLS needs both",
            details=[{"field": missing[0], "message": "missing", "type": "missing"}],
        )
    for name, value in given.items():
        if not Path(str(value)).is_file():
            raise errors.InvalidInput(
                f"{name}={value} does not exist or is not a file",
                details=[{"field": name, "message": "no such file", "type": "not_found"}],
            )
    return Path(str(certfile)), Path(str(keyfile))


def check_credentials(
    host: str, credentials: str, *, tls: tuple[Path, Path] | None, allow_insecure: bool
) -> str | None:
    """RFC 7.5: credentials never travel in plaintext off loopback.

    On a non-loopback ``host``, serving ``credentials`` (what the clients send, e.g.
    "API keys") needs TLS or ``MEMBRANE_ALLOW_INSECURE_CREDENTIALS=true``; the latter
    is returned as a warning to log at start. Raises ``Forbidden`` otherwise.
    """
    if tls is not None or is_loopback(host):
        return None
    if allow_insecure:
        return (
            f"serving {credentials} over plain HTTP on {host!r} because "
            "MEMBRANE_ALLOW_INSECURE_CREDENTIALS=true: they travel in plaintext "
            "unless a TLS proxy terminates in front of this server"
        )
    raise errors.Forbidden(
        f"refusing to accept {credentials} over plain HTTP on {host!r}: set "
        "MEMBRANE_TLS_CERTFILE and MEMBRANE_TLS_KEYFILE to serve HTTPS, or set "
        "MEMBRANE_ALLOW_INSECURE_CREDENTIALS=true if TLS terminates in front of this "
        "server, or bind to 127.0.0.1",
        details=[{"field": "host", "message": "credentials in plaintext off loopback", "type": "forbidden"}],
    )


def plan_listen(
    host: str,
    keys: Mapping[str, Any],
    *,
    certfile: Path | str | None = None,
    keyfile: Path | str | None = None,
    allow_insecure: bool = False,
) -> Listen:
    """RFC 7.5, every rule for the API on ``host``; raises before anything is built or bound.

    No keys: loopback only (:func:`check_listen`). Keys off loopback: TLS or the
    insecure opt-in (:func:`check_credentials`). TLS files are checked whenever set.
    """
    check_listen(host, keys)
    tls = tls_files(certfile, keyfile)
    warning = check_credentials(host, "API keys", tls=tls, allow_insecure=allow_insecure) if keys else None
    certs, keys_file = tls or (None, None)
    return Listen(certfile=certs, keyfile=keys_file, warning=warning)
