"""A record's correction chain as typed nodes and edges (RFC 10.7, 5.2, 5.5)."""

from __future__ import annotations

import uuid
from collections import deque
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from membrane_core import errors
from membrane_core.enums import RevisionStatus, Sensitivity
from membrane_core.listing.results import Evidence, Lineage, LineageEdge, LineageKind
from membrane_core.results import RecordView
from membrane_core.revision.history import opened_entry
from membrane_core.sealing import Sealer
from membrane_core.storage import audit, listing, records, retrieval
from membrane_core.storage.db import Database
from membrane_core.trust import TrustPolicy, Visibility

#: RFC 10.7: the most records a lineage shows, and the most corrections it walks away from
#: its record.
MAX_NODES = 100
MAX_DEPTH = 32

#: A correction: its kind, the record it runs from and the one it runs to.
Link = tuple[LineageKind, uuid.UUID, uuid.UUID]

#: A correction relation as an edge: its kind and whether the edge runs against the relation.
_EDGES: dict[str, tuple[LineageKind, bool]] = {
    "supersedes": ("supersedes", False),
    "superseded_by": ("supersedes", True),
    "contests": ("contests", False),
    "contested_by": ("contests", True),
}


def build(
    db: Database,
    record_id: uuid.UUID,
    trust: TrustPolicy,
    *,
    sealer: Sealer,
    as_of: datetime | None,
    now: datetime,
) -> Lineage:
    """RFC 10.7: the records ``record_id`` is connected to by corrections, as the caller may
    see them: a hidden record is left out with its edges, and the walk does not pass through
    it (so no edge reveals that one lies between); a redacted one is shown as metadata and its
    edges carry no rationale or evidence. ``NotFound`` when the record itself is hidden."""
    with db.reader() as conn:
        nodes, rels, entries = listing.lineage(
            conn, record_id, as_of=as_of, max_nodes=MAX_NODES, max_depth=MAX_DEPTH
        )
        vis = {n.id: trust.visibility(n.scope, Sensitivity(n.sensitivity)) for n in nodes[:MAX_NODES]}
        if vis.get(record_id, "hidden") == "hidden":
            raise errors.NotFound(f"record {record_id} not found")
        links = _corrections(rels, entries)
        kept = _reachable(record_id, links, {i for i, v in vis.items() if v != "hidden"})
        rows = records.hydrate_rows(conn, sorted(kept), as_of=as_of)
        targets = sorted({rel["target_id"] for row in rows.values() for rel in row["relations"]})
        shown = {
            t
            for t, a in retrieval.access(conn, targets).items()
            if trust.visibility(a.scope, a.sensitivity) == "full"
        }
    status = {n.id: n.status for n in nodes}
    order = [n.id for n in nodes if n.id in kept and n.id in rows]
    views = {rid: _view(rows[rid], vis[rid], status[rid], shown, sealer, now) for rid in order}
    edges = [
        _edge(kind, source, target, vis, status, entries, views, sealer)
        for kind, source, target in links
        if source in views and target in views
    ]
    return Lineage(
        record_id=record_id,
        nodes=[views[rid] for rid in order],
        edges=edges,
        truncated=len(nodes) > MAX_NODES,
    )


def _reachable(start: uuid.UUID, links: Sequence[Link], visible: set[uuid.UUID]) -> set[uuid.UUID]:
    """The visible records reached from ``start`` by corrections through visible records only."""
    near: dict[uuid.UUID, set[uuid.UUID]] = {}
    for _, source, target in links:
        if source in visible and target in visible:
            near.setdefault(source, set()).add(target)
            near.setdefault(target, set()).add(source)
    seen, todo = {start}, deque([start])
    while todo:
        for other in near.get(todo.popleft(), ()):
            if other not in seen:
                seen.add(other)
                todo.append(other)
    return seen


def _view(
    row: dict[str, Any],
    visibility: Visibility,
    status: str,
    shown: set[uuid.UUID],
    sealer: Sealer,
    now: datetime,
) -> RecordView:
    """RFC 7.3, 2.5: a node as the caller may see it; relations only to records shown in full."""
    row = {**row, "relations": [r for r in row["relations"] if r["target_id"] in shown]}
    stored = retrieval.Stored.of(row)
    redacted = visibility == "redacted"
    if not redacted:
        stored = stored.opened(sealer)
    return stored.view(salience=stored.salience_at(now), status=status, redacted=redacted)


def _corrections(rels: Iterable[listing.LineageRelation], entries: Sequence[audit.AuditRow]) -> list[Link]:
    """RFC 10.7, 5.2: the relations that are corrections, each once as ``(kind, source,
    target)`` in the order they were made. ``derived_from`` is a merge or a fork when the
    newer record's ``create`` entry says so; a fact derived from its episode (RFC 3.4) is
    no correction."""
    created = {e.record_id: e.details for e in entries if e.action.value == "create"}
    out: dict[Link, None] = {}
    for rel in rels:
        if rel.predicate == "derived_from":
            made = created.get(rel.source_id, {})
            if "merged_from" in made:
                out[("merged_into", rel.target_id, rel.source_id)] = None
            elif "forked_from" in made:
                out[("forked_from", rel.source_id, rel.target_id)] = None
            continue
        kind, reverse = _EDGES[rel.predicate]
        out[(kind, rel.target_id, rel.source_id) if reverse else (kind, rel.source_id, rel.target_id)] = None
    return list(out)


def _edge(
    kind: LineageKind,
    source: uuid.UUID,
    target: uuid.UUID,
    vis: dict[uuid.UUID, Visibility],
    status: dict[uuid.UUID, str],
    entries: Sequence[audit.AuditRow],
    views: dict[uuid.UUID, RecordView],
    sealer: Sealer,
) -> LineageEdge:
    entry = _entry(kind, source, target, entries)
    full = vis[source] == "full" and vis[target] == "full"
    rationale = None
    if entry is not None and full:
        rationale = opened_entry(sealer, entry, entry.details)[0]
    newer = target if kind in ("merged_into",) else source
    evidence = []
    payload = views[newer].payload if full else None
    if payload and isinstance(payload.get("evidence"), list):
        evidence = [Evidence(kind=str(e.get("kind")), ref=str(e.get("ref"))) for e in payload["evidence"]]
    return LineageEdge(
        kind=kind,
        source_id=source,
        target_id=target,
        actor=entry.actor if entry is not None else None,
        at=entry.ts if entry is not None else None,
        rationale=rationale,
        evidence=evidence,
        target_status=RevisionStatus(status[target]),
    )


def _entry(
    kind: LineageKind, source: uuid.UUID, target: uuid.UUID, entries: Sequence[audit.AuditRow]
) -> audit.AuditRow | None:
    """The audit entry that records a correction (RFC 5.2): on the corrected record, naming
    the other one."""
    s, t = str(source), str(target)
    for e in entries:
        d = e.details
        if kind == "supersedes" and e.record_id == target and d.get("superseded_by") == s:
            return e
        if kind == "merged_into" and e.record_id == source and d.get("merged_into") == t:
            return e
        if kind == "forked_from" and e.record_id == target and d.get("variant_id") == s:
            return e
        if kind == "contests" and e.record_id == target and d.get("contesting_record_id") == s:
            return e
    return None
