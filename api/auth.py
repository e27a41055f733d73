"""API keys mapped to server-side trust policies (RFC 10.3, 7.1, 7.5)."""

from __future__ import annotations

import hashlib
import ipaddress
from collections.abc import Mapping
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
    unknown = set(config) - {"read_scopes", "write_scopes", "max_sensitivity", "actor"}
    if unknown:
        raise ValueError(f"unknown MEMBRANE_API_KEYS fields: {', '.join(sorted(unknown))}")
    return TrustPolicy(
        read_scopes=frozenset(config.get("read_scopes", [])),
        write_scopes=frozenset(config.get("write_scopes", [])),
        max_sensitivity=Sensitivity(config.get("max_sensitivity", Sensitivity.LOW.value)),
        actor=str(config.get("actor") or f"key:{_digest(key)[:12]}"),
    )


class KeyRing:
    """Bearer keys → policies; without keys every caller gets the development policy (RFC 7.5)."""

    def __init__(self, keys: Mapping[str, Mapping[str, Any]] | None = None) -> None:
        # Keyed by digest so a lookup never compares secrets character by character.
        self._policies = {_digest(k): policy_from_config(k, v) for k, v in (keys or {}).items()}
        # RFC 9.1, 10.3: operations and idempotency keys belong to the actor, so two keys may
        # share one only with one policy (a rotated key), never to widen each other's reach
        by_actor: dict[str, TrustPolicy] = {}
        for policy in self._policies.values():
            other = by_actor.setdefault(policy.actor, policy)
            if other != policy:
                raise ValueError(f"MEMBRANE_API_KEYS: actor {policy.actor!r} is given to keys with "
                                 "different policies; an actor's keys must share one policy")

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
            f"refusing to listen on {host!r} without API keys: set MEMBRANE_API_KEYS "
            "or bind to 127.0.0.1",
            details=[{"field": "host", "message": "non-loopback without API keys",
                      "type": "forbidden"}],
        )
