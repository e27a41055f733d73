from __future__ import annotations

import psycopg
import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.trust import TrustPolicy

OBS = {
    "source_kind": "observation",
    "scope": "proj",
    "content": {"subject": "user", "predicate": "prefers", "object": "dark mode"},
}


def count(url: str, table: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(f"SELECT count(*) FROM {table}").fetchone()
        assert row is not None
        return int(row[0])


def test_capture_get_retrieve(membrane: Membrane, database_url: str) -> None:
    res = membrane.capture(OBS)
    episode_id, fact_id = res.record_ids
    fact = membrane.get(fact_id)
    assert fact.type.value == "semantic" and fact.status.value == "active"
    assert fact.payload is not None and fact.payload["object"] == "dark mode"
    assert any(r.predicate == "derived_from" and r.target_id == episode_id for r in fact.relations)
    found = membrane.retrieve({"query": "dark mode", "scopes": ["proj"]})
    assert fact_id in {r.id for r in found.records}
    # one transaction wrote record, payload, audit entries and work items
    assert count(database_url, "memory_records") == 2
    assert count(database_url, "audit_log") == 2
    assert count(database_url, "work_items") >= 3


def test_same_fact_reinforces_instead_of_duplicating(membrane: Membrane, clock) -> None:
    first = membrane.capture(OBS)
    clock.advance(days=30)
    again = membrane.capture(
        {**OBS, "content": {"subject": "User", "predicate": "prefers", "object": "dark   mode"}}
    )
    assert again.fact == "reinforced" and again.record_ids[1] == first.record_ids[1]
    fact = membrane.get(first.record_ids[1])
    # decayed to 0.5 after one half-life, plus the default gain 0.1
    assert fact.salience == pytest.approx(0.6)


def test_invalid_batch_writes_nothing(membrane: Membrane, database_url: str) -> None:
    good = {"source_kind": "event", "scope": "proj", "content": {"text": "hello"}}
    bad = {"source_kind": "event", "scope": "", "content": {"text": "x"}, "sensitivity": "top"}
    with pytest.raises(errors.InvalidInput) as info:
        membrane.capture_many([good, bad])
    assert {"scope", "sensitivity"} <= {d["field"] for d in info.value.details}
    assert count(database_url, "memory_records") == 0
    assert count(database_url, "audit_log") == 0
    membrane.capture(good)  # positive control
    assert count(database_url, "memory_records") == 1


def test_retrieve_filters_scope_sensitivity_type_status(membrane: Membrane) -> None:
    keep = membrane.capture({"source_kind": "event", "scope": "a", "content": {"text": "alpha one"}})
    other = membrane.capture({"source_kind": "event", "scope": "b", "content": {"text": "alpha two"}})
    high = membrane.capture(
        {"source_kind": "event", "scope": "a", "sensitivity": "high", "content": {"text": "alpha three"}}
    )
    medium = membrane.capture(
        {"source_kind": "event", "scope": "a", "sensitivity": "medium", "content": {"text": "alpha four"}}
    )
    caller = TrustPolicy(read_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.LOW)
    got = membrane.retrieve({"query": "alpha", "limit": 10}, caller)
    by_id = {r.id: r for r in got.records}
    assert keep.record_ids[0] in by_id
    assert other.record_ids[0] not in by_id
    assert high.record_ids[0] not in by_id
    assert by_id[medium.record_ids[0]].redacted and by_id[medium.record_ids[0]].payload is None
    typed = membrane.retrieve({"query": "alpha", "memory_types": ["semantic"]}, caller)
    assert typed.records == []
    with pytest.raises(errors.Forbidden):
        membrane.retrieve({"query": "alpha", "scopes": ["b"]}, caller)


def test_retrieve_bounded_by_rows_and_bytes(membrane: Membrane) -> None:
    membrane.capture_many(
        [
            {"source_kind": "event", "scope": "a", "content": {"text": f"beta {i} " + "z" * 2000}}
            for i in range(20)
        ]
    )
    rows = membrane.retrieve({"query": "beta", "limit": 5})
    assert len(rows.records) == 5
    small = membrane.retrieve({"query": "beta", "limit": 20, "max_bytes": 8 * 1024})
    assert 1 <= len(small.records) < 20
    assert small.diagnostics.byte_limit_applied is True
    assert sum(len(r.model_dump_json()) for r in small.records) <= 8 * 1024


def test_single_record_over_budget_is_typed_error(membrane: Membrane) -> None:
    membrane.capture({"source_kind": "event", "scope": "a", "content": {"text": "gamma " + "q" * 5000}})
    with pytest.raises(errors.RecordTooLarge):
        membrane.retrieve({"query": "gamma", "max_bytes": 1024})


def test_get_hidden_is_not_found(membrane: Membrane) -> None:
    res = membrane.capture({"source_kind": "event", "scope": "secret", "content": {"text": "x"}})
    caller = TrustPolicy(read_scopes=frozenset({"a"}))
    with pytest.raises(errors.NotFound):
        membrane.get(res.record_ids[0], caller)
    assert membrane.get(res.record_ids[0]).scope == "secret"


def test_write_scope_enforced(membrane: Membrane) -> None:
    caller = TrustPolicy(write_scopes=frozenset({"a"}))
    with pytest.raises(errors.Forbidden):
        membrane.capture({"source_kind": "event", "scope": "b", "content": {}}, caller)
    assert membrane.capture({"source_kind": "event", "scope": "a", "content": {}}, caller)
