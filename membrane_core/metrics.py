"""Observability: memory metrics over what the caller may read, plus queue depths (RFC 14.2)."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from membrane_core.enums import OperationKind, OperationStatus, WorkKind
from membrane_core.storage import metrics, proposals
from membrane_core.storage.db import Database
from membrane_core.trust import TrustPolicy


def _ratio(num: float, den: float) -> float | None:
    return num / den if den else None


def _round(value: Any) -> float | None:
    return None if value is None else round(float(value), 6)


def shape(raw: dict[str, Any]) -> dict[str, Any]:
    """RFC 14.2: the metrics document from the raw aggregates."""
    rec, proc = raw["records"], raw["procedural"]
    by_type: dict[str, int] = {}
    by_status: dict[str, int] = {}
    for row in raw["by_type_status"]:
        by_status[row["status"]] = by_status.get(row["status"], 0) + int(row["n"])
        by_type[row["type"]] = by_type.get(row["type"], 0) + int(row["n"])
    total = int(rec.get("total_records") or 0)
    live = int(rec.get("live_records") or 0)
    created = int(rec.get("created_24h") or 0)
    successes, failures = int(proc.get("successes") or 0), int(proc.get("failures") or 0)
    queues: dict[str, dict[str, int]] | None = None
    if raw["operations"] is not None:
        queues = {}
        for row in raw["operations"]:
            queues.setdefault(row["kind"], {})[row["status"]] = int(row["n"])
    backlog = (
        None
        if raw["backlog"] is None
        else {
            row["kind"]: {
                "due": int(row["due"]),
                "pending": int(row["pending"]),
                "dead": int(row["dead"]),
                "oldest_due_seconds": _round(row["oldest_due_seconds"]),
            }
            for row in raw["backlog"]
        }
    )
    return {
        "total_records": total,
        "records_by_type": by_type,
        "records_by_status": by_status,
        "avg_salience": _round(rec.get("avg_salience")),
        "avg_confidence": _round(rec.get("avg_confidence")),
        "active_records": int(rec.get("active_records") or 0),
        "pinned_records": int(rec.get("pinned_records") or 0),
        "total_audit_entries": raw["audit_entries"],
        "revision_rate": _round(_ratio(int(rec.get("revised_records") or 0), total)),
        "retrieval_usefulness": _round(_ratio(int(rec.get("reinforced_records") or 0), live)),
        "competence_success_rate": _round(_ratio(successes, successes + failures)),
        "plan_reuse_frequency": _round(proc.get("plan_executions")),
        "memory_growth_rate": _round(_ratio(created, live - created)),
        "records_created_24h": created,
        "operations": queues,
        "work_backlog": backlog,
    }


def collect(db: Database, trust: TrustPolicy, *, now: datetime) -> dict[str, Any]:
    """RFC 14.2: metrics computed only over records and audit entries ``trust`` may read; the
    deployment's inbox and backlog only for an operator (``None`` for anyone else)."""
    readable = metrics.Readable(
        scopes=None if trust.reads_all else sorted(s for s in trust.read_scopes if s),
        max_rank=trust.max_sensitivity.rank,
        now=now,
    )
    with db.reader() as conn:
        raw = metrics.collect(conn, readable, deployment=trust.operator)
    return shape(raw)


#: RFC 14.2: the statuses of an operation still in the inbox.
PENDING = (OperationStatus.QUEUED, OperationStatus.RUNNING)


@dataclass(frozen=True)
class DeploymentGauges:
    """RFC 14.2: the deployment's queues at one moment, every kind present (zero when empty)."""

    #: Operations by (kind, status), for the queued and running statuses.
    inbox: dict[tuple[str, str], int]
    #: Due, live work items by kind.
    work_due: dict[str, int]
    #: Age in seconds of the oldest due item by kind; 0 when none is due.
    oldest_due_seconds: dict[str, float]
    #: Age in seconds of the oldest live ``embed`` item: how long the record that has waited
    #: longest for its embedding has waited; 0 when none waits.
    embedding_lag_seconds: float
    #: RFC 5.7: pending proposals by scope, and the age in seconds of each scope's oldest
    review_depth: dict[str, int] = field(default_factory=dict)
    review_oldest_seconds: dict[str, float] = field(default_factory=dict)
    #: RFC 5.7: decided proposals by outcome (approved, rejected, amended, expired)
    review_decisions: dict[str, int] = field(default_factory=dict)
    #: RFC 13.2: the replica's replay lag in seconds at its last sample (None without a
    #: replica, or when it is not reachable), and this process's reads sent to the primary
    #: instead, by reason (lagging, down, token)
    replica_lag_seconds: float | None = None
    replica_fallbacks: dict[str, int] = field(default_factory=dict)


def deployment(db: Database, *, now: datetime) -> DeploymentGauges:
    """RFC 14.2: the deployment gauges, read from the primary (the queues are the primary's)."""
    with db.transaction() as conn:
        samples = metrics.deployment(conn, now=now)
        queue, decided = proposals.gauges(conn)
    inbox = {(k.value, s.value): 0 for k in OperationKind for s in PENDING}
    due = {k.value: 0 for k in WorkKind}
    oldest = {k.value: 0.0 for k in WorkKind}
    lag = 0.0
    for row in samples:
        if row.gauge == "inbox_operations" and row.status is not None:
            inbox[(row.kind, row.status)] = int(row.value)
        elif row.gauge == "work_due_items":
            due[row.kind] = int(row.value)
        elif row.gauge == "work_oldest_due_seconds":
            oldest[row.kind] = max(0.0, row.value)
        elif row.gauge == "embedding_lag_seconds":
            lag = max(0.0, row.value)
    return DeploymentGauges(
        inbox=inbox,
        work_due=due,
        oldest_due_seconds=oldest,
        embedding_lag_seconds=lag,
        review_depth={g.scope: g.depth for g in queue},
        review_oldest_seconds={g.scope: max(0.0, (now - g.oldest).total_seconds()) for g in queue},
        review_decisions={o: decided.get(o, 0) for o in ("approved", "rejected", "amended", "expired")},
        **_replica(db),
    )


def _replica(db: Database) -> dict[str, Any]:
    """RFC 13.2, 14.2: the replica's gauges, from its monitor's last sample (no round trip)."""
    state = db.replica_state()
    if state is None:
        return {}
    return {"replica_lag_seconds": state["lag_seconds"], "replica_fallbacks": dict(state["fallbacks"])}
