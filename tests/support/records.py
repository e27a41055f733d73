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


#: The question that names a superseded fact's old value (see :func:`superseded_kite`).
KITE_QUESTION = {
    "query": "is the red kite kept in the blue shed",
    "scopes": ["s"],
    "memory_types": ["semantic"],
}


def superseded_kite(m: Membrane, policy: TrustPolicy) -> tuple[uuid.UUID, uuid.UUID]:
    """In scope ``s``: the fact "red kite kept in blue shed" superseded by "... garage", beside
    another kite's fact, all embedded; ``(old, new)``. :data:`KITE_QUESTION` names the old one."""
    obs = {"source_kind": "observation", "scope": "s"}
    old = m.capture(
        {**obs, "content": {"subject": "red kite", "predicate": "kept in", "object": "blue shed"}}, policy
    ).record_ids[1]
    m.capture({**obs, "content": {"subject": "green kite", "predicate": "kept in", "object": "loft"}}, policy)
    evidence = [{"kind": "observation", "ref": "seen there"}]
    new = m.revisions.supersede(
        old, {"record": {"object": "garage"}, "rationale": "moved", "evidence": evidence}, policy
    )
    m.embedding.run_batch()
    return old, new


#: A buried work item (RFC 9.4): as a job leaves one after its last failed attempt.
BURY = (
    "INSERT INTO work_items (kind, target_id, attempts, last_error, dead) VALUES (%s, %s, 5, %s, true)"
    " ON CONFLICT (kind, target_id) DO UPDATE"
    " SET dead = true, attempts = 5, last_error = EXCLUDED.last_error RETURNING id"
)


def bury(url: str, record_id: uuid.UUID | str, kind: str = "decay", error: str = "boom") -> int:
    """Bury a ``kind`` work item of the record with ``error`` as its last error; its id."""
    with psycopg.connect(url) as conn:
        row = conn.execute(BURY, (kind, record_id, error)).fetchone()
    assert row is not None
    return int(row[0])
