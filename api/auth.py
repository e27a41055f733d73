"""API keys mapped to server-side trust policies (RFC 10.3, 7.1, 7.5)."""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from membrane_core import errors
from membrane_core.enums import Sensitivity
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def policy_from_config(key: str, config: Mapping[str, Any]) -> TrustPolicy:
    """RFC 10.3: one ``MEMBRANE_API_KEYS`` entry as a policy; the actor never reveals the key."""
    if not isinstance(config, Mapping):
        raise ValueError("each MEMBRANE_API_KEYS entry must be an object")
    unknown = set(config) - {"read_scopes", "write_scopes", "max_sensitivity", "actor", "operator"}
    if unknown:
        raise ValueError(f"unknown MEMBRANE_API_KEYS fields: {', '.join(sorted(unknown))}")
    operator = config.get("operator", False)
    if not isinstance(operator, bool):
        raise ValueError("MEMBRANE_API_KEYS: operator must be true or false")
    return TrustPolicy(
        operator=operator,
        read_scopes=frozenset(config.get("read_scopes", [])),
        write_scopes=frozenset(config.get("write_scopes", [])),
        max_sensitivity=Sensitivity(config.get("max_sensitivity", Sensitivity.LOW.value)),
        actor=str(config.get("actor") or f"key:{_digest(key)[:12]}"),
    )


class KeyRing:
    """Bearer keys → policies; without keys every caller gets the development policy (RFC 7.5)."""

    def __init__(
        self, keys: Mapping[str, Mapping[str, Any]] | None = None, *, metrics_token: str | None = None
    ) -> None:
        # Keyed by digest so a lookup never compares secrets character by character.
        self._policies = {_digest(k): policy_from_config(k, v) for k, v in (keys or {}).items()}
        self._metrics_token = _digest(metrics_token) if metrics_token else None
        # RFC 9.1, 10.3: operations and idempotency keys belong to the actor, so two keys may
        # share one only with one policy (a rotated key), never to widen each other's reach
        by_actor: dict[str, TrustPolicy] = {}
        for policy in self._policies.values():
            other = by_actor.setdefault(policy.actor, policy)
            if other != policy:
                raise ValueError(
                    f"MEMBRANE_API_KEYS: actor {policy.actor!r} is given to keys with "
                    "different policies; an actor's keys must share one policy"
                )

    @property
    def enabled(self) -> bool:
        """True when API keys are configured."""
        return bool(self._policies)

    def authenticate(self, authorization: str | None) -> TrustPolicy:
        """RFC 10.3: the policy of the presented bearer key; 401 when missing or unknown."""
        if not self._policies:
            return DEVELOPMENT_POLICY
        if not authorization:
            raise errors.Unauthorized("missing Authorization: Bearer <key> header")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.Unauthorized("the Authorization header must be 'Bearer <key>'")
        policy = self._policies.get(_digest(token.strip()))
        if policy is None:
            raise errors.Unauthorized("unknown API key")
        return policy

    def authenticate_scraper(self, authorization: str | None) -> None:
        """RFC 10.1, 14.2: ``GET /metrics`` with keys configured takes an operator's key or
        ``MEMBRANE_METRICS_TOKEN``; 401 without either, 403 for another key."""
        if not self._policies:
            return
        if self._metrics_token and authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer" and _digest(token.strip()) == self._metrics_token:
                return
        if not self.authenticate(authorization).operator:
            raise errors.Forbidden("GET /metrics needs an operator key or MEMBRANE_METRICS_TOKEN")


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
