"""How a LangGraph store item is kept as a Membrane record (RFC 10.9.1); pure, no I/O.

A namespace is a scope: the store's ``scope_prefix`` followed by the labels joined with
``.``, which LangGraph forbids inside a label, so the rule reverses. A key is the tag
``langgraph.key:<first 40 hex digits of sha256(key)>`` on a working record of that scope,
which also carries the tag ``langgraph``; the exact namespace, key, value and first
creation time are in the record's metadata under ``langgraph``.
"""

from __future__ import annotations

import hashlib
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from langgraph.store.base import InvalidNamespaceError, MatchCondition
from langgraph.store.base.embed import get_text_at_path

from membrane_client.models import Record

#: Every record the store writes carries this tag.
ITEM_TAG = "langgraph"
#: The tag of one key: this prefix and a digest of the key (tags are at most 128 characters).
KEY_TAG_PREFIX = "langgraph.key:"
#: Where the item lives in the record's metadata.
META = "langgraph"
SEPARATOR = "."
#: RFC 2.4: the longest scope, and the longest working ``context_summary``.
MAX_SCOPE = 256
MAX_SUMMARY = 4096
#: What a stored item is to the working record's task model: complete.
TASK_STATE = "done"
#: RFC 6.1: the longest maximum age the server gives a record (100 years).
MAX_AGE_LIMIT_SECONDS = 100 * 365 * 86400

__all__ = [
    "ITEM_TAG",
    "KEY_TAG_PREFIX",
    "Stored",
    "capture_body",
    "index_text",
    "key_tag",
    "matches_condition",
    "matches_filter",
    "max_age_seconds",
    "namespace_of",
    "revised_body",
    "scope_of",
    "stored",
]


def scope_of(namespace: Sequence[str], prefix: str) -> str:
    """The scope of ``namespace``: ``prefix`` + the labels joined with ``.``.

    A label with a ``.``, none at all, an empty or blank label, or one with spaces at either
    end (the server strips a scope) would not come back the same: those are refused.
    """
    if not namespace:
        raise InvalidNamespaceError("a namespace needs at least one label")
    for label in namespace:
        if not isinstance(label, str) or not label.strip() or label != label.strip() or SEPARATOR in label:
            raise InvalidNamespaceError(
                f"namespace label {label!r} of {tuple(namespace)}: a label is a non-empty string "
                "without '.' and without spaces at either end"
            )
    scope = prefix + SEPARATOR.join(namespace)
    if len(scope) > MAX_SCOPE:
        raise InvalidNamespaceError(f"namespace {tuple(namespace)} makes a scope over {MAX_SCOPE} characters")
    return scope


def namespace_of(scope: str, prefix: str) -> tuple[str, ...] | None:
    """The namespace whose scope is ``scope``, or ``None`` when no namespace maps there."""
    if not scope.startswith(prefix) or len(scope) == len(prefix):
        return None
    labels = tuple(scope[len(prefix) :].split(SEPARATOR))
    return labels if all(labels) else None


def key_tag(key: str) -> str:
    """The tag that finds ``key`` among a scope's records."""
    return KEY_TAG_PREFIX + hashlib.sha256(key.encode()).hexdigest()[:40]


def index_text(value: Mapping[str, Any], fields: Sequence[str] | None) -> str:
    """The text retrieval indexes for ``value``: the ``fields`` (LangGraph paths, ``$`` the
    whole value) joined, at most a working summary long; empty without fields."""
    if not fields:
        return ""
    parts = [text for path in fields for text in get_text_at_path(dict(value), path)]
    return " ".join(parts).strip()[:MAX_SUMMARY]


@dataclass(frozen=True)
class Stored:
    """One version of an item, read back from its record."""

    record_id: UUID
    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None
    ttl_minutes: float | None
    score: float | None

    def expired(self, now: datetime) -> bool:
        """True once its TTL has passed (RFC 10.9.1)."""
        return self.expires_at is not None and self.expires_at <= now


def stored(record: Record, prefix: str) -> Stored | None:
    """The item ``record`` holds, or ``None`` when it holds none the store wrote for its scope
    (another writer's record, a redacted one, or one of another ``scope_prefix``)."""
    meta = record.metadata.get(META) if not record.redacted else None
    namespace = namespace_of(record.scope, prefix)
    if not isinstance(meta, dict) or namespace is None or tuple(meta.get("namespace") or ()) != namespace:
        return None
    key, value = meta.get("key"), meta.get("value")
    if not isinstance(key, str) or not isinstance(value, dict) or record.created_at is None:
        return None
    expires = meta.get("expires_at")
    ttl = meta.get("ttl_minutes")
    return Stored(
        record_id=record.id,
        namespace=namespace,
        key=key,
        value=value,
        created_at=datetime.fromisoformat(meta.get("created_at") or record.created_at.isoformat()),
        updated_at=record.created_at,
        expires_at=datetime.fromisoformat(expires) if isinstance(expires, str) else None,
        ttl_minutes=float(ttl) if isinstance(ttl, int | float) else None,
        score=record.score,
    )


def _metadata(
    namespace: Sequence[str],
    key: str,
    value: Mapping[str, Any],
    created_at: datetime | None,
    now: datetime,
    ttl: float | None,
) -> dict[str, Any]:
    """The first version's creation time is its record's: only later versions carry it."""
    meta: dict[str, Any] = {"namespace": list(namespace), "key": key, "value": dict(value)}
    if created_at is not None:
        meta["created_at"] = created_at.isoformat()
    if ttl is not None:
        if not math.isfinite(ttl) or ttl <= 0:
            raise ValueError(f"ttl is minutes above zero, got {ttl!r}")
        meta["ttl_minutes"] = ttl
        meta["expires_at"] = (now + timedelta(minutes=ttl)).isoformat()
    return {META: meta}


def max_age_seconds(ttl: float) -> int:
    """RFC 10.9.1: a TTL in minutes as the record's maximum age (RFC 6.1): whole seconds,
    rounded up so that the server prunes no earlier than the item expires, at most the
    server's limit."""
    return min(MAX_AGE_LIMIT_SECONDS, max(1, math.ceil(ttl * 60)))


def _payload(key: str, text: str) -> dict[str, Any]:
    return {"thread_id": key_tag(key), "task_state": TASK_STATE, "context_summary": text}


def capture_body(
    scope: str,
    namespace: Sequence[str],
    key: str,
    value: Mapping[str, Any],
    *,
    text: str,
    now: datetime,
    ttl: float | None,
    sensitivity: str | None,
) -> dict[str, Any]:
    """The capture of a key's first version: a working record (RFC 3.1) whose maximum age is
    the TTL (RFC 3.3)."""
    body: dict[str, Any] = {
        "source_kind": "working_state",
        "scope": scope,
        "content": _payload(key, text),
        "tags": [ITEM_TAG, key_tag(key)],
        "metadata": _metadata(namespace, key, value, None, now, ttl),
    }
    if sensitivity is not None:
        body["sensitivity"] = sensitivity
    if ttl is not None:
        body["max_age_seconds"] = max_age_seconds(ttl)
    return body


def revised_body(
    current: Stored, value: Mapping[str, Any], *, text: str, now: datetime, ttl: float | None
) -> dict[str, Any]:
    """The new version of a supersede: the whole working payload, the tags, the metadata with
    the first version's creation time (RFC 5.2.1), and the TTL as its maximum age."""
    body: dict[str, Any] = {
        "payload": _payload(current.key, text),
        "tags": [ITEM_TAG, key_tag(current.key)],
        "metadata": _metadata(current.namespace, current.key, value, current.created_at, now, ttl),
    }
    if ttl is not None:
        body["max_age_seconds"] = max_age_seconds(ttl)
    return body


def matches_condition(condition: MatchCondition, namespace: tuple[str, ...]) -> bool:
    """LangGraph's namespace match: a prefix or a suffix, ``*`` standing for any one label."""
    path = tuple(condition.path)
    if len(namespace) < len(path):
        return False
    labels = (
        namespace[: len(path)]
        if condition.match_type == "prefix"
        else namespace[len(namespace) - len(path) :]
    )
    return all(want in ("*", have) for want, have in zip(path, labels, strict=True))


_COMPARE = {
    "$gt": lambda a, b: a > b,
    "$gte": lambda a, b: a >= b,
    "$lt": lambda a, b: a < b,
    "$lte": lambda a, b: a <= b,
}


def _operator(value: Any, name: str, operand: Any) -> bool:
    if name == "$eq":
        return bool(value == operand)
    if name == "$ne":
        return bool(value != operand)
    if name not in _COMPARE:
        raise ValueError(f"unsupported filter operator {name!r} ($eq, $ne, $gt, $gte, $lt, $lte)")
    try:
        return bool(_COMPARE[name](float(value), float(operand)))
    except (TypeError, ValueError):  # a missing or non-numeric field does not compare
        return False


def _matches(value: Any, wanted: Any) -> bool:
    if isinstance(wanted, dict):
        if any(str(k).startswith("$") for k in wanted):
            return all(_operator(value, name, operand) for name, operand in wanted.items())
        return isinstance(value, dict) and all(_matches(value.get(k), v) for k, v in wanted.items())
    if isinstance(wanted, list | tuple):
        return (
            isinstance(value, list | tuple)
            and len(value) == len(wanted)
            and all(_matches(v, w) for v, w in zip(value, wanted, strict=True))
        )
    return bool(value == wanted)


def matches_filter(value: Mapping[str, Any], wanted: Mapping[str, Any] | None) -> bool:
    """A search filter as LangGraph documents it: each top-level field equal (nested objects
    compared field by field), or compared with ``$eq``, ``$ne``, ``$gt``, ``$gte``, ``$lt``,
    ``$lte``."""
    return all(_matches(value.get(field), want) for field, want in (wanted or {}).items())
