"""What the record page draws: the decay curve from the closed form and the correction chain as a
timeline (RFC 6.1, 6.3, 10.7, 10.8). Pure functions of views; the templates escape every label."""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any
from uuid import UUID

from membrane_core import decay
from membrane_core.enums import DeletionPolicy, RevisionStatus
from membrane_core.listing.results import Lineage, LineageEdge
from membrane_core.models import AuditHistory
from membrane_core.policy import Policy
from membrane_core.results import RecordView

#: RFC 6.3: prune takes a record at or below ``max(floor, PRUNE_EPSILON)``.
PRUNE_EPSILON = 0.001
WIDTH, HEIGHT, PAD = 640, 180, 28
SAMPLES = 96


@dataclass(frozen=True)
class Curve:
    """A record's salience over time, drawn as an SVG polyline (RFC 6.1)."""

    points: str
    half_life: str
    floor: float
    floor_y: float
    now_x: float
    start: datetime
    end: datetime
    base: float
    current: float
    deletion: str
    #: when prune may take the record, or why it never will (RFC 6.3)
    prune_at: datetime | None
    prune_note: str
    prune_x: float | None
    width: int = WIDTH
    height: int = HEIGHT
    pad: int = PAD


def duration(seconds: float) -> str:
    """A duration in its largest whole unit, for a label."""
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            value = seconds / size
            return f"{value:.3g} {unit}"
    return f"{seconds:.3g} s"


def _clock(view: RecordView, audit: AuditHistory | None) -> tuple[datetime, float | None]:
    """When the decay clock last restarted and the base salience then, from the audit log:
    the latest reinforce or penalty entry (its ``after``), else the record's creation."""
    for entry in reversed(audit.entries if audit else []):
        if entry.action == "reinforce" or (
            entry.action == "decay" and entry.details.get("operation") == "penalize"
        ):
            after = entry.details.get("after")
            return entry.timestamp, float(after) if isinstance(after, int | float) else None
    return view.recorded_at, None


def decay_curve(view: RecordView, audit: AuditHistory | None, policy: Policy, now: datetime) -> Curve:
    """RFC 6.1, 6.3: the closed form from the last restart of the clock, with the floor, the
    present and the moment prune may take the record. The profile is the deployment's for the
    record's type (a view carries no lifecycle); the base is read back from the current salience
    when it is above the floor, else from the audit log."""
    profile = policy.decay_profile(view.type)
    half_life, floor = profile.half_life_seconds, profile.min_salience
    restarted, logged = _clock(view, audit)
    elapsed = max(0.0, (now - restarted).total_seconds())
    if view.salience > floor and view.salience > 0:
        base = view.salience * math.pow(2.0, elapsed / half_life)
    else:
        base = logged if logged is not None else 1.0
    threshold = max(floor, PRUNE_EPSILON)
    to_threshold = half_life * math.log2(base / threshold) if base > threshold else 0.0
    deletion = policy.deletion[view.type]
    prune_at: datetime | None = None
    if view.status is not RevisionStatus.ACTIVE:
        note = f"never: prune keeps a {view.status.value} record (RFC 5.3)"
    elif deletion is not DeletionPolicy.AUTO_PRUNE:
        note = f"never: deletion policy {deletion.value} (only an explicit delete)"
    else:
        prune_at = restarted + timedelta(seconds=to_threshold)
        note = "from " + prune_at.strftime("%Y-%m-%d %H:%M:%S UTC") + f" (salience at {threshold:g})"
    span = max(4.0 * half_life, 1.25 * to_threshold, 1.25 * elapsed, 1.0)
    end = restarted + timedelta(seconds=span)
    top = max(base, 1.0)

    def x(t: float) -> float:
        return PAD + (WIDTH - 2 * PAD) * t / span

    def y(value: float) -> float:
        return HEIGHT - PAD - (HEIGHT - 2 * PAD) * value / top

    points = []
    for i in range(SAMPLES + 1):
        t = span * i / SAMPLES
        value = decay.decayed(
            base, restarted, half_life, floor, restarted + timedelta(seconds=t), pinned=False
        )
        points.append(f"{x(t):.1f},{y(value):.1f}")
    return Curve(
        points=" ".join(points),
        half_life=duration(half_life),
        floor=floor,
        floor_y=round(y(floor), 1),
        now_x=round(x(elapsed), 1),
        start=restarted,
        end=end,
        base=base,
        current=view.salience,
        deletion=deletion.value,
        prune_at=prune_at,
        prune_note=note,
        prune_x=round(x(to_threshold), 1) if prune_at is not None else None,
    )


def headline(view: RecordView) -> str:
    """A record in one line: a fact's triple, an episode's text, an entity's name ..."""
    if view.redacted or view.payload is None:
        return f"{view.type.value} record (redacted)"
    p: dict[str, Any] = view.payload
    if view.type.value == "semantic":
        return f"{p.get('subject', '')} {p.get('predicate', '')} {p.get('object', '')}"
    for name in ("text", "context_summary", "canonical_name", "skill_name", "intent"):
        value = p.get(name)
        if isinstance(value, str) and value:
            return value if len(value) <= 160 else value[:157] + "..."
    return view.summary or view.type.value


@dataclass(frozen=True)
class Step:
    """One record of a correction chain, in the order it was recorded, with its edges."""

    node: RecordView
    title: str
    current: bool
    #: edges out of this record (it supersedes, was merged into, forked from, contests)
    out: list[LineageEdge]
    #: edges into it (it was superseded by ... )
    into: list[LineageEdge]


def timeline(lineage: Lineage) -> list[Step]:
    """RFC 10.7: the lineage's records oldest first, each with the corrections around it."""
    nodes = sorted(lineage.nodes, key=lambda n: (n.recorded_at, str(n.id)))
    out: dict[UUID, list[LineageEdge]] = {}
    into: dict[UUID, list[LineageEdge]] = {}
    for edge in lineage.edges:
        out.setdefault(edge.source_id, []).append(edge)
        into.setdefault(edge.target_id, []).append(edge)
    return [
        Step(
            node=n,
            title=headline(n),
            current=n.id == lineage.record_id,
            out=out.get(n.id, []),
            into=into.get(n.id, []),
        )
        for n in nodes
    ]
