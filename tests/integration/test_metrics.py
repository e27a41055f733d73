"""Metrics over what the caller may read, plus queue depths and work backlog (RFC 14.2)."""

from __future__ import annotations

import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy
from tests.support.sql import execute


def event(scope: str, sensitivity: str = "low", **content: object) -> dict:
    return {
        "source_kind": "event",
        "scope": scope,
        "sensitivity": sensitivity,
        "content": {"text": "x", **content},
    }


def test_metrics_respect_trust(membrane: Membrane, clock, database_url: str) -> None:
    a1 = membrane.capture(event("a")).record_ids[0]
    membrane.capture(event("a", "medium"))  # above the narrow caller's maximum
    membrane.capture(event("b"))  # another scope
    obs = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "content": {"subject": "s", "predicate": "p", "object": "o"},
        }
    )
    execute(
        database_url,
        "UPDATE memory_records SET status = 'retracted', retracted_at = %s WHERE id = %s",
        clock(),
        obs.record_ids[1],
    )
    execute(database_url, "UPDATE memory_records SET pinned = true WHERE id = %s", a1)
    clock.advance(minutes=30)

    narrow = TrustPolicy(read_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.LOW)
    m = membrane.metrics(narrow)
    # readable: a1 (pinned), the observation episode and the retracted fact; the totals agree
    assert m["total_records"] == 3
    assert m["records_by_type"] == {"episodic": 2, "semantic": 1}
    assert m["records_by_status"] == {"active": 2, "retracted": 1}
    assert sum(m["records_by_status"].values()) == sum(m["records_by_type"].values()) == 3
    assert m["active_records"] == 2 and m["pinned_records"] == 1
    assert m["avg_salience"] == pytest.approx((1.0 + 2**-0.5) / 2)
    assert m["avg_confidence"] == pytest.approx((0.8 + 0.7) / 2)
    assert m["revision_rate"] == pytest.approx(1 / 3)
    assert m["total_audit_entries"] == 3  # create entries of a1, the episode and the fact
    assert m["memory_growth_rate"] is None  # nothing older than 24 h yet
    assert m["retrieval_usefulness"] == 0.0  # nothing reinforced yet
    assert m["records_created_24h"] == 2
    # positive control: the full policy sees every scope and level
    full = membrane.metrics()
    assert full["total_records"] == 5 and full["total_audit_entries"] == 5
    assert full["records_by_status"] == {"active": 4, "retracted": 1}
    membrane.revisions.reinforce(a1, {"rationale": "it helped"}, DEVELOPMENT_POLICY)
    assert membrane.metrics(narrow)["retrieval_usefulness"] == pytest.approx(1 / 2)
    # an entry that raises a record out of the caller's sight hides its whole history, as
    # the audit read does (RFC 5.5.1); counted until then (a1's create and reinforce)
    before = membrane.metrics(narrow)["total_audit_entries"]
    assert len(membrane.audit(a1, narrow).entries) == 2
    execute(
        database_url,
        "INSERT INTO audit_log (record_id, scope, sensitivity, action, actor,"
        " rationale) VALUES (%s, 'a', 'hyper', 'reinforce', 'x', 'raised')",
        a1,
    )
    assert membrane.metrics(narrow)["total_audit_entries"] == before - 2
    with pytest.raises(errors.NotFound):
        membrane.audit(a1, narrow)
    # queues: operations by kind and status, backlog by kind with the oldest due age, for an
    # operator only (RFC 14.2); the development policy is one
    assert m["operations"] is None and m["work_backlog"] is None
    assert full["operations"] == {}
    backlog = full["work_backlog"]
    assert "consolidate" not in backlog  # no successful episode was captured
    assert backlog["decay"]["pending"] == 5 and backlog["decay"]["due"] == 0
    assert backlog["compress"]["pending"] == 4
    clock.advance(hours=1)
    later = membrane.metrics()["work_backlog"]["decay"]
    assert later["due"] == 4 and later["oldest_due_seconds"] == pytest.approx(1800)
    clock.advance(days=2)
    assert membrane.metrics(narrow)["memory_growth_rate"] == 0.0
    # an accepted, not yet processed write shows as a queued operation
    membrane.inbox.submit_capture(event("a"), DEVELOPMENT_POLICY)
    assert membrane.metrics()["operations"] == {"capture": {"queued": 1}}
    # another tenant's activity is not a non-operator's to see, however wide its reach
    wide = TrustPolicy(actor="wide")  # every scope and level, no operator flag
    assert membrane.metrics(wide)["operations"] is None
    assert membrane.metrics(wide)["work_backlog"] is None
    operator = wide.model_copy(update={"operator": True})
    assert membrane.metrics(operator)["operations"] == {"capture": {"queued": 1}}


def test_procedural_metrics(membrane: Membrane, clock) -> None:
    calls = [{"tool": "a", "args": {}}, {"tool": "b", "args": {}}, {"tool": "c", "args": {}}]
    membrane.capture_many(
        [
            event("a", outcome="success", tool_calls=calls),
            event("a", outcome="success", tool_calls=calls),
            event("a", outcome="failure", tool_calls=calls),
        ]
    )
    membrane.maintenance.run("consolidate")
    m = membrane.metrics()
    assert m["records_by_type"]["competence"] == 1 and m["records_by_type"]["plan_graph"] == 1
    assert m["competence_success_rate"] == pytest.approx(2 / 3)
    assert m["plan_reuse_frequency"] == pytest.approx(3.0)
    hidden = TrustPolicy(read_scopes=frozenset({"other"}))
    assert membrane.metrics(hidden)["competence_success_rate"] is None
