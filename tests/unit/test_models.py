from __future__ import annotations

import uuid
from datetime import UTC, datetime

import pytest
from pydantic import ValidationError

from membrane_core import errors
from membrane_core.capture.plan import plan_capture
from membrane_core.enums import MemoryType, SourceKind
from membrane_core.models import MemoryRecord
from membrane_core.policy import Policy
from membrane_core.requests import CaptureRequest, parse

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def record(**over: object) -> dict[str, object]:
    base: dict[str, object] = {
        "id": uuid.uuid4(),
        "type": "semantic",
        "scope": "s",
        "confidence": 0.5,
        "salience": 1.0,
        "lifecycle": {"decay": {"half_life_seconds": 60}, "reinforced_at": NOW},
        "payload": {"kind": "semantic", "subject": "a", "predicate": "b", "object": "c"},
        "created_at": NOW,
        "updated_at": NOW,
        "recorded_at": NOW,
    }
    base.update(over)
    return base


def error_fields(exc: ValidationError) -> set[str]:
    return {".".join(str(p) for p in e["loc"]) for e in exc.errors()}


def test_valid_record_positive_control() -> None:
    assert MemoryRecord.model_validate(record()).type is MemoryType.SEMANTIC


def test_payload_kind_must_match_type() -> None:
    with pytest.raises(ValidationError, match="does not match record type"):
        MemoryRecord.model_validate(record(type="episodic"))


def test_each_bad_field_is_named() -> None:
    bad = record(
        confidence=1.5,
        salience=-1,
        scope="  ",
        lifecycle={"decay": {"half_life_seconds": 0}, "reinforced_at": NOW},
    )
    with pytest.raises(ValidationError) as info:
        MemoryRecord.model_validate(bad)
    fields = error_fields(info.value)
    assert {"confidence", "salience", "scope", "lifecycle.decay.half_life_seconds"} <= fields


def test_payload_byte_budget() -> None:
    big = {"kind": "episodic", "text": "x", "data": {"blob": "y" * 300_000}}
    with pytest.raises(errors.PayloadTooLarge) as info:
        MemoryRecord.model_validate(record(type="episodic", payload=big))
    assert info.value.details[0]["field"] == "payload"


def test_capture_depth_budget_names_content() -> None:
    nested: dict[str, object] = {"v": 1}
    for _ in range(20):
        nested = {"n": nested}
    with pytest.raises(errors.PayloadTooLarge) as info:
        parse(CaptureRequest, {"source_kind": "event", "scope": "s", "content": nested})
    assert info.value.details[0]["field"] == "content"
    # positive control: a shallow content passes
    assert parse(CaptureRequest, {"source_kind": "event", "scope": "s", "content": {"n": {"v": 1}}})


def test_capture_validation_names_fields() -> None:
    with pytest.raises(errors.InvalidInput) as info:
        parse(CaptureRequest, {"source_kind": "nope", "scope": "", "content": {}})
    fields = {d["field"] for d in info.value.details}
    assert {"source_kind", "scope"} <= fields


def test_observation_requires_triple() -> None:
    with pytest.raises(errors.InvalidInput, match="missing: predicate, object") as info:
        parse(CaptureRequest, {"source_kind": "observation", "scope": "s", "content": {"subject": "x"}})
    assert [d["field"] for d in info.value.details] == ["content"]


@pytest.mark.parametrize(
    ("kind", "confidence", "memory_type"),
    [
        ("tool_output", 0.9, MemoryType.EPISODIC),
        ("event", 0.8, MemoryType.EPISODIC),
        ("observation", 0.7, MemoryType.EPISODIC),
    ],
)
def test_policy_stamps(kind: str, confidence: float, memory_type: MemoryType) -> None:
    content = {"subject": "a", "predicate": "b", "object": "c"} if kind == "observation" else {}
    req = CaptureRequest(source_kind=SourceKind(kind), scope="s", content=content)
    plan = plan_capture(req, Policy(), now=NOW, actor="t")
    assert plan.primary.confidence == confidence
    assert plan.primary.type is memory_type
    assert plan.primary.sensitivity.value == "low"
    assert plan.primary.lifecycle.decay.half_life_seconds == 3600
    assert (plan.fact is not None) == (kind == "observation")


def test_working_state_becomes_working_record() -> None:
    req = CaptureRequest(
        source_kind=SourceKind.WORKING_STATE,
        scope="s",
        content={"thread_id": "t1", "task_state": "executing", "context_summary": "doing"},
    )
    plan = plan_capture(req, Policy(), now=NOW, actor="t")
    assert plan.primary.type is MemoryType.WORKING
    assert plan.primary.lifecycle.decay.half_life_seconds == 86400


def test_bad_working_state_names_field() -> None:
    req = CaptureRequest(
        source_kind=SourceKind.WORKING_STATE,
        scope="s",
        content={"thread_id": "t1", "task_state": "dreaming", "context_summary": "x"},
    )
    with pytest.raises(ValidationError) as info:
        plan_capture(req, Policy(), now=NOW, actor="t")
    assert "task_state" in error_fields(info.value)
