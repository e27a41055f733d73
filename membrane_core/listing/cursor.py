"""Opaque keyset cursors (RFC 10.7): the last position of a page, bound to the filters and
the caller that made it, so a cursor is never read under other filters."""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from typing import Any

from membrane_core import errors

_VERSION = 1


def fingerprint(actor: str, filters: dict[str, Any]) -> str:
    """A short digest of who listed and by which filters."""
    text = json.dumps(
        {"actor": actor, "filters": filters}, sort_keys=True, default=str, separators=(",", ":")
    )
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode(position: dict[str, Any], fp: str) -> str:
    """The cursor of ``position`` under the filters of ``fp``."""
    raw = json.dumps({"v": _VERSION, "p": position, "f": fp}, separators=(",", ":"), default=str)
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode(cursor: str, fp: str) -> dict[str, Any]:
    """The position a cursor holds; ``InvalidInput`` naming ``cursor`` when it is not one of
    ours or was made under other filters."""
    try:
        raw = json.loads(base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)))
        ok = isinstance(raw, dict) and raw.get("v") == _VERSION and isinstance(raw.get("p"), dict)
    except (ValueError, binascii.Error, UnicodeDecodeError):
        ok = False
    if not ok:
        raise bad("is not a cursor this server made")
    if raw.get("f") != fp:
        raise bad("was made for other filters; list again from the first page")
    position: dict[str, Any] = raw["p"]
    return position


def bad(why: str) -> errors.InvalidInput:
    return errors.InvalidInput(
        f"cursor {why}", details=[{"field": "cursor", "message": why, "type": "value_error"}]
    )
