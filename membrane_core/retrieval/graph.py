"""Bounded breadth-first graph expansion around retrieval roots (RFC 8.4)."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from membrane_core.enums import RevisionStatus, Sensitivity
from membrane_core.requests import ExpandOptions
from membrane_core.results import ExpansionDiagnostics
from membrane_core.storage import retrieval
from membrane_core.storage.db import Connection
from membrane_core.trust import TrustPolicy, Visibility


@dataclass
class Expansion:
    """Neighbours in discovery order, the edges that reached them, and what the limits cut."""

    neighbors: list[tuple[uuid.UUID, Visibility, str]] = field(default_factory=list)
    edges: list[tuple[uuid.UUID, str, uuid.UUID]] = field(default_factory=list)
    #: projected bytes of each neighbour, and the neighbours the hops hydrated (RFC 8.3)
    bytes: dict[uuid.UUID, int] = field(default_factory=dict)
    records: dict[uuid.UUID, retrieval.Stored] = field(default_factory=dict)
    hops_done: int = 0
    node_limit_applied: bool = False
    edge_limit_applied: bool = False
    filtered_in_python: int = 0

    def diagnostics(self) -> ExpansionDiagnostics:
        """RFC 8.6: what the expansion returned and which limit cut it."""
        return ExpansionDiagnostics(
            hops=self.hops_done,
            neighbors=len(self.neighbors),
            edges=len(self.edges),
            node_limit_applied=self.node_limit_applied,
            edge_limit_applied=self.edge_limit_applied,
            filtered_in_python=self.filtered_in_python,
        )


def status_allowed(
    status: str, *, include_retracted: bool, include_contested: bool, include_proposed: bool = False
) -> bool:
    """RFC 5.1, 5.7: retracted and proposed only when asked for; contested unless excluded."""
    if status == RevisionStatus.RETRACTED.value:
        return include_retracted
    if status == RevisionStatus.CONTESTED.value:
        return include_contested
    if status == RevisionStatus.PROPOSED.value:
        return include_proposed
    return True


def expand(
    conn: Connection,
    f: retrieval.ReadFilter,
    policy: TrustPolicy,
    roots: Sequence[tuple[uuid.UUID, Visibility]],
    opts: ExpandOptions,
    *,
    budget: int,
    target_visible: Callable[[str, str], bool],
    first_hop: tuple[Sequence[uuid.UUID], retrieval.Hop] | None = None,
) -> Expansion:
    """RFC 8.4: breadth-first over relations in both directions from ``roots``.

    One query per hop fetches the edges touching the frontier whose far end passes the
    scope, time and status filters in SQL and is shown in full (a view omits relations to
    any other record, RFC 2.5); each neighbour is checked again here. A redacted root is
    returned but never expanded from, and a redacted record is never a neighbour. The
    expansion stops at ``opts.hops`` hops, ``opts.max_nodes`` neighbours and
    ``opts.max_edges`` edges, whichever comes first. Each hop also hydrates the neighbours
    it discovers while their running projected bytes stay within ``budget`` (RFC 8.3).
    ``first_hop = (roots, hop)`` is a first hop already run from ``roots`` (with the
    retrieval's own statement); it is used when ``roots`` are exactly these roots.
    """
    out = Expansion()
    known: dict[uuid.UUID, Visibility] = dict(roots)
    expanded: set[uuid.UUID] = set()
    frontier = [rid for rid, vis in roots if vis == "full"]
    seen_edges: set[tuple[uuid.UUID, str, uuid.UUID]] = set()
    for _ in range(opts.hops):
        remaining = opts.max_edges - len(out.edges)
        if not frontier or remaining <= 0:
            out.edge_limit_applied = out.edge_limit_applied or (bool(frontier) and remaining <= 0)
            break
        max_rows = 2 * remaining + 1
        if first_hop is not None and not expanded and set(first_hop[0]) == set(known):
            hop = first_hop[1]
        else:
            hop = retrieval.graph_hop(
                conn,
                f,
                frontier,
                expanded=sorted(expanded),
                known=list(known),
                max_rows=max_rows,
                max_edges=remaining,
                max_new=opts.max_nodes - len(out.neighbors),
                max_bytes=budget - sum(out.bytes.values()),
                target_visible=target_visible,
            )
        rows = hop.rows
        out.records.update(hop.records)
        expanded.update(frontier)
        out.hops_done += 1
        if len(rows) >= max_rows:
            out.edge_limit_applied = True
        nxt: list[uuid.UUID] = []
        for row in rows:
            key = (row.source_id, row.predicate, row.target_id)
            if key in seen_edges:
                continue
            vis = policy.visibility(row.scope, Sensitivity(row.sensitivity))
            if vis != "full" or not status_allowed(
                row.status,
                include_retracted=f.include_retracted,
                include_contested=f.include_contested,
                include_proposed=f.include_proposed,
            ):
                out.filtered_in_python += 1
                continue
            if len(out.edges) >= opts.max_edges:
                out.edge_limit_applied = True
                break
            if row.other not in known:
                if len(out.neighbors) >= opts.max_nodes:
                    out.node_limit_applied = True
                    continue
                known[row.other] = vis
                out.neighbors.append((row.other, vis, row.status))
                out.bytes[row.other] = row.bytes
                nxt.append(row.other)
            seen_edges.add(key)
            out.edges.append(key)
        frontier = nxt
    return out
