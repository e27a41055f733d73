"""API keys mapped to server-side trust policies and rate limits (RFC 10.3, 10.6, 7.1, 7.5)."""

from __future__ import annotations

import hashlib
import logging
import math
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol

from api.ratelimit import RateLimits
from membrane_core import Settings, errors
from membrane_core.enums import Sensitivity

# RFC 7.5: the listen and TLS guard lives below the entry points that share it; named here too
# for the API's callers.
from membrane_core.listen import Listen as Listen
from membrane_core.listen import check_credentials as check_credentials
from membrane_core.listen import check_listen as check_listen
from membrane_core.listen import is_loopback as is_loopback
from membrane_core.listen import plan_listen as plan_listen
from membrane_core.listen import tls_files as tls_files
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

log = logging.getLogger(__name__)


def _digest(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def fingerprint(key: str) -> str:
    """The first 12 hex digits of the key's SHA-256: names a key without revealing it (RFC 10.3)."""
    return _digest(key)[:12]


#: RFC 10.3, 10.6: the fields of one key's entry.
KEY_FIELDS = frozenset(
    {
        "read_scopes",
        "write_scopes",
        "max_sensitivity",
        "actor",
        "operator",
        "reviewer",
        "review",
        "erase",
        "requests_per_second",
        "captures_per_second",
        "burst",
        "not_after",
    }
)

#: RFC 10.6: the limits of a key whose entry sets none: the defaults of the ``MEMBRANE_RATE_*``
#: settings (an entry point passes the deployment's own).
DEFAULT_LIMITS = RateLimits(
    **{
        name: float(Settings.model_fields[f"rate_{name}"].default)
        for name in ("requests_per_second", "captures_per_second", "burst")
    }
)


def policy_from_config(key: str, config: Mapping[str, Any]) -> TrustPolicy:
    """RFC 10.3: one ``MEMBRANE_API_KEYS`` entry as a policy; the actor never reveals the key."""
    if not isinstance(config, Mapping):
        raise ValueError("each MEMBRANE_API_KEYS entry must be an object")
    unknown = set(config) - KEY_FIELDS
    if unknown:
        raise ValueError(f"unknown MEMBRANE_API_KEYS fields: {', '.join(sorted(unknown))}")
    operator = config.get("operator", False)
    if not isinstance(operator, bool):
        raise ValueError("MEMBRANE_API_KEYS: operator must be true or false")
    reviewer = config.get("reviewer", False)
    if not isinstance(reviewer, bool):
        raise ValueError("MEMBRANE_API_KEYS: reviewer must be true or false")
    erase = config.get("erase", False)
    if not isinstance(erase, bool):
        raise ValueError("MEMBRANE_API_KEYS: erase must be true or false")
    review = config.get("review", "none")
    if review not in ("none", "required"):
        raise ValueError('MEMBRANE_API_KEYS: review must be "required" or "none"')
    return TrustPolicy(
        operator=operator,
        reviewer=reviewer,
        review_required=review == "required",
        erase=erase,
        read_scopes=frozenset(config.get("read_scopes", [])),
        write_scopes=frozenset(config.get("write_scopes", [])),
        max_sensitivity=Sensitivity(config.get("max_sensitivity", Sensitivity.LOW.value)),
        actor=str(config.get("actor") or f"key:{fingerprint(key)}"),
    )


def limits_from_config(config: Mapping[str, Any], defaults: RateLimits = DEFAULT_LIMITS) -> RateLimits:
    """RFC 10.6: the entry's rates and burst, each a positive number, else the defaults'."""
    values: dict[str, float] = {}
    for name in ("requests_per_second", "captures_per_second", "burst"):
        value = config.get(name, getattr(defaults, name))
        if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
            raise ValueError(f"MEMBRANE_API_KEYS: {name} must be a positive number, not {value!r}")
        values[name] = float(value)
    return RateLimits(**values)


def not_after_from_config(config: Mapping[str, Any]) -> datetime | None:
    """RFC 10.3: the entry's ``not_after``, an ISO 8601 timestamp with its time zone."""
    value = config.get("not_after")
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value) if isinstance(value, str) else None
    except ValueError:
        when = None
    if when is None:
        raise ValueError(f"MEMBRANE_API_KEYS: not_after must be an ISO 8601 timestamp, not {value!r}")
    if when.utcoffset() is None:
        raise ValueError(f"MEMBRANE_API_KEYS: not_after {value!r} has no time zone (add Z or +00:00)")
    return when


@dataclass(frozen=True)
class ApiKey:
    """One configured key, without the key: its policy, rate limits and expiry (RFC 10.3, 10.6)."""

    policy: TrustPolicy
    limits: RateLimits
    not_after: datetime | None = None
    #: :func:`fingerprint` of the key.
    fingerprint: str = ""

    def expired(self, now: datetime) -> bool:
        """True from ``not_after`` on."""
        return self.not_after is not None and now >= self.not_after


def key_from_config(key: str, config: Mapping[str, Any], defaults: RateLimits = DEFAULT_LIMITS) -> ApiKey:
    """RFC 10.3, 10.6: one entry of the key ring; raises ``ValueError`` naming what is wrong."""
    policy = policy_from_config(key, config)
    return ApiKey(
        policy=policy,
        limits=limits_from_config(config, defaults),
        not_after=not_after_from_config(config),
        fingerprint=fingerprint(key),
    )


def parse_keys(
    keys: Mapping[str, Mapping[str, Any]], defaults: RateLimits = DEFAULT_LIMITS
) -> dict[str, ApiKey]:
    """RFC 10.3: the key ring by digest; refuses an actor given different policies or limits."""
    entries = {_digest(k): key_from_config(k, v, defaults) for k, v in keys.items()}
    # RFC 9.1, 10.3: operations and idempotency keys belong to the actor, so two keys may
    # share one only with one policy (a rotated key), never to widen each other's reach;
    # and one actor spends from one pair of buckets (RFC 10.6), so with one limit too
    by_actor: dict[str, ApiKey] = {}
    for entry in entries.values():
        other = by_actor.setdefault(entry.policy.actor, entry)
        if (other.policy, other.limits) != (entry.policy, entry.limits):
            raise ValueError(
                f"MEMBRANE_API_KEYS: actor {entry.policy.actor!r} is given to keys with "
                "different policies; an actor's keys must share one policy and one rate limit"
            )
    return entries


def _now() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class _Ring:
    """One loaded ring: the keys by digest and the limits by actor, replaced whole on reload."""

    entries: dict[str, ApiKey]
    limits: dict[str, RateLimits]

    @classmethod
    def of(cls, entries: dict[str, ApiKey]) -> _Ring:
        return cls(entries, {e.policy.actor: e.limits for e in entries.values()})


class KeySource(Protocol):
    """Where a key ring is re-read from (RFC 10.3): :class:`api.keyfile.KeyFile`."""

    @property
    def path(self) -> Path:
        """What the log names."""
        ...

    def changed(self) -> bool:
        """Whether it changed since it was last read (cheap, rate-limited)."""
        ...

    def read(self) -> dict[str, dict[str, Any]]:
        """The keys; ``ValueError`` naming the problem when they cannot be used."""
        ...


class KeyRing:
    """Bearer keys → policies; without keys every caller gets the development policy (RFC 7.5).

    RFC 10.3: with a :class:`KeySource` (the key file) the ring follows the file: :meth:`refresh`
    re-reads it when it changed (checked at most once a second) and :meth:`reload` at once
    (SIGHUP). A file that fails to load leaves the previous ring in place.
    """

    def __init__(
        self,
        keys: Mapping[str, Mapping[str, Any]] | None = None,
        *,
        metrics_token: str | None = None,
        limits: RateLimits = DEFAULT_LIMITS,
        source: KeySource | None = None,
        clock: Callable[[], datetime] = _now,
    ) -> None:
        self._defaults = limits
        self._source = source
        self._clock = clock
        self._lock = threading.Lock()
        # Keyed by digest so a lookup never compares secrets character by character. Replaced
        # whole on reload: a reader sees the old ring or the new one, never a mix.
        self._ring = _Ring.of(parse_keys(keys or {}, limits))
        self._metrics_token = _digest(metrics_token) if metrics_token else None

    @property
    def enabled(self) -> bool:
        """True when API keys are configured."""
        return bool(self._ring.entries)

    @property
    def follows_file(self) -> bool:
        """True when the ring is re-read from a key file (RFC 10.3)."""
        return self._source is not None

    def refresh(self) -> None:
        """RFC 10.3: re-read the key file if it changed since it was last read (cheap otherwise)."""
        if self._source is not None and self._source.changed():
            self.reload()

    def reload(self) -> None:
        """RFC 10.3: re-read the key file now; a file that fails to load keeps the current ring."""
        source = self._source
        if source is None:
            return
        with self._lock:
            try:
                entries = parse_keys(source.read(), self._defaults)
                if self._ring.entries and not entries:
                    raise ValueError(
                        "it names no key, which would serve the development policy; "
                        "restart the API to run without keys"
                    )
            except ValueError as exc:
                log.error(
                    "MEMBRANE_API_KEYS_FILE=%s not loaded, the previous keys stay in use: %s",
                    source.path,
                    exc,
                )
                return
            self._ring = _Ring.of(entries)
        log.info("API keys loaded from %s", source.path, extra={"api_keys": len(entries)})

    def authenticate(self, authorization: str | None) -> TrustPolicy:
        """RFC 10.3: the policy of the presented bearer key; 401 when missing, unknown or expired."""
        entries = self._ring.entries
        if not entries:
            return DEVELOPMENT_POLICY
        if not authorization:
            raise errors.Unauthorized("missing Authorization: Bearer <key> header")
        scheme, _, token = authorization.partition(" ")
        if scheme.lower() != "bearer" or not token.strip():
            raise errors.Unauthorized("the Authorization header must be 'Bearer <key>'")
        entry = entries.get(_digest(token.strip()))
        if entry is None:
            raise errors.Unauthorized("unknown API key")
        if entry.not_after is not None and entry.expired(self._clock()):
            raise errors.Unauthorized("API key expired")
        return entry.policy

    def authenticate_key(self, key: str) -> str:
        """RFC 10.8: the digest of a key the console's sign-in form presented; 401 when unknown
        or expired. The console's session holds the digest, never the key."""
        digest = _digest(key.strip())
        self.policy_of(digest)
        return digest

    def policy_of(self, digest: str) -> TrustPolicy:
        """RFC 10.8: the policy of the key with this digest, re-read on every console request so
        that a removed or expired key ends its sessions at once; 401 otherwise."""
        entry = self._ring.entries.get(digest)
        if entry is None:
            raise errors.Unauthorized("unknown API key")
        if entry.not_after is not None and entry.expired(self._clock()):
            raise errors.Unauthorized("API key expired")
        return entry.policy

    def limits(self, actor: str) -> RateLimits | None:
        """RFC 10.6: the rate limits of a key's actor; None without keys (no limit)."""
        return self._ring.limits.get(actor)

    def authenticate_scraper(self, authorization: str | None) -> None:
        """RFC 10.1, 14.2: ``GET /metrics`` with keys configured takes an operator's key or
        ``MEMBRANE_METRICS_TOKEN``; 401 without either, 403 for another key."""
        if not self._ring.entries:
            return
        if self._metrics_token and authorization:
            scheme, _, token = authorization.partition(" ")
            if scheme.lower() == "bearer" and _digest(token.strip()) == self._metrics_token:
                return
        if not self.authenticate(authorization).operator:
            raise errors.Forbidden("GET /metrics needs an operator key or MEMBRANE_METRICS_TOKEN")
