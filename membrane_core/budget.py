"""Byte and nesting-depth budgets for client-supplied JSON (RFC 2.4)."""

from __future__ import annotations

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
            details=[{"field": field, "message": f"nesting depth exceeds {max_depth}",
                      "type": "depth_budget"}],
        )
    size = len(encoded)
    if size > max_bytes:
        raise errors.PayloadTooLarge(
            f"{field} is {size} bytes, over the budget of {max_bytes}",
            details=[{"field": field, "message": f"{size} bytes exceeds {max_bytes}",
                      "type": "byte_budget"}],
        )
