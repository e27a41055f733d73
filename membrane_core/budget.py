"""Byte and nesting-depth budgets for client-supplied JSON, and what it may hold (RFC 2.4)."""

from __future__ import annotations

import math
from typing import Any

import pydantic_core

from membrane_core import errors

#: Largest JSON encoding of a capture's ``content`` or a record payload (RFC 2.4).
MAX_PAYLOAD_BYTES = 256 * 1024
#: Deepest nesting of objects and arrays in client JSON (RFC 2.4).
MAX_PAYLOAD_DEPTH = 16
#: Largest JSON encoding of a capture's ``metadata`` (RFC 2.4).
MAX_METADATA_BYTES = 16 * 1024


def json_depth(value: Any, limit: int) -> int:
    """Nesting depth of ``value``; stops counting once ``limit`` is passed."""
    depth = 0
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, level = stack.pop()
        if isinstance(item, dict):
            children: Any = item.values()
        elif isinstance(item, list | tuple):
            children = item
        else:
            continue
        depth = max(depth, level)
        if depth > limit:
            return depth
        stack.extend((child, level + 1) for child in children)
    return depth


def encoded_size(value: Any) -> int:
    """Bytes of the compact UTF-8 JSON encoding of ``value``."""
    return len(pydantic_core.to_json(value, fallback=str))


def check_json_budget(value: Any, *, field: str, max_bytes: int, max_depth: int) -> None:
    """Refuse ``value`` when it is over ``max_bytes`` or nested deeper than ``max_depth``.

    RFC 2.4: the error names the field and the budget that was exceeded.
    """
    encoded = pydantic_core.to_json(value, fallback=str)
    # Fast path: fewer brackets in the whole encoding than the limit bounds the depth
    # (brackets inside strings only over-count, which falls back to the exact walk).
    brackets = encoded.count(b"{") + encoded.count(b"[")
    depth = brackets if brackets <= max_depth else json_depth(value, max_depth)
    if depth > max_depth:
        raise errors.PayloadTooLarge(
            f"{field} is nested deeper than {max_depth} levels",
            details=[
                {"field": field, "message": f"nesting depth exceeds {max_depth}", "type": "depth_budget"}
            ],
        )
    size = len(encoded)
    if size > max_bytes:
        raise errors.PayloadTooLarge(
            f"{field} is {size} bytes, over the budget of {max_bytes}",
            details=[{"field": field, "message": f"{size} bytes exceeds {max_bytes}", "type": "byte_budget"}],
        )


def check_storable(value: Any, *, field: str = "") -> None:
    """Refuse a NUL character (U+0000, in a string or a key) or a non-finite number anywhere in
    ``value`` (RFC 2.4): Postgres stores neither, so what is kept would differ from what was sent.

    One C-level encoding of the value decides the common case; only a suspect encoding (which
    the same characters inside a string also produce) is walked to find the offending path.
    """
    encoded = pydantic_core.to_json(value, inf_nan_mode="constants", fallback=str)
    if b"\\u0000" not in encoded and b"NaN" not in encoded and b"Infinity" not in encoded:
        return
    found = _unstorable(value, field)
    if found is None:
        return
    path, kind = found
    name = path or "body"
    if kind == "nul":
        raise errors.InvalidInput(
            f"{name} contains a NUL character (U+0000), which cannot be stored",
            details=[{"field": path, "message": "NUL character (U+0000)", "type": "nul_character"}],
        )
    raise errors.InvalidInput(
        f"{name} is not a finite number (NaN, Infinity and out-of-range numbers are refused)",
        details=[{"field": path, "message": "not a finite number", "type": "finite_number"}],
    )


def _unstorable(value: Any, root: str) -> tuple[str, str] | None:
    """The first path (``a.b.0``) holding a NUL or a non-finite float, with which it is."""
    stack: list[tuple[Any, str]] = [(value, root)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return path, "nul"
        elif isinstance(item, float):
            if not math.isfinite(item):
                return path, "finite"
        elif isinstance(item, dict):
            for key, child in item.items():
                name = _join(path, str(key).replace("\x00", "\\u0000"))
                if isinstance(key, str) and "\x00" in key:
                    return name, "nul"
                stack.append((child, name))
        elif isinstance(item, list | tuple):
            stack.extend((child, _join(path, str(i))) for i, child in enumerate(item))
    return None


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part
