"""Records planted for the read-path tests, and the caller they are hidden from."""

from __future__ import annotations

import uuid

import psycopg

from membrane_core import Membrane
from membrane_core.enums import Sensitivity
from membrane_core.trust import TrustPolicy

#: Reads scope ``a`` up to ``low``: the caller every planted hidden record is hidden from.
CALLER = TrustPolicy(read_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.LOW, actor="caller")


def capture(
    m: Membrane, text: str, *, scope: str = "a", sensitivity: str = "low", entities: list[str] | None = None
) -> uuid.UUID:
    """The episode of one event capture."""
    content: dict[str, object] = {"text": text}
    if entities:
        content["entities"] = entities
    return m.capture(
        {"source_kind": "event", "scope": scope, "sensitivity": sensitivity, "content": content}
    ).record_ids[0]


def link(url: str, *edges: tuple[uuid.UUID, str, uuid.UUID]) -> None:
    """Insert relations ``(source, predicate, target)`` directly."""
    with psycopg.connect(url) as conn, conn.cursor() as cur:
        cur.executemany("INSERT INTO relations (source_id, predicate, target_id) VALUES (%s, %s, %s)", edges)
