"""The operations inbox against real Postgres: submit, idempotency, processing (RFC 9.1, 9.2)."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import OperationKind, OperationStatus, Sensitivity
from membrane_core.inbox.submit import InlineDispatcher, RecordingDispatcher
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

EVENT = {"source_kind": "event", "scope": "proj", "content": {"text": "deployed build 7"}}
OBS = {
    "source_kind": "observation",
    "scope": "proj",
    "content": {"subject": "user", "predicate": "prefers", "object": "dark mode"},
}
DEV = DEVELOPMENT_POLICY


def scalar(url: str, sql: str, *args: object) -> object:
    with psycopg.connect(url) as conn:
        row = conn.execute(sql, args).fetchone()  # type: ignore[arg-type]
        assert row is not None
        return row[0]


def test_submit_then_process_writes_the_preassigned_record(membrane: Membrane, database_url: str):
    view = membrane.inbox.submit_capture(EVENT, DEV)
    assert view.status is OperationStatus.QUEUED and view.record_id is not None
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 0  # nothing yet
    summary = membrane.inbox_worker.process_captures([view.operation_id], worker="w1")
    assert summary == {"claimed": 1, "succeeded": 1, "failed": 0}
    done = membrane.inbox.get(view.operation_id, DEV)
    assert done.status is OperationStatus.SUCCEEDED and done.record_ids == [view.record_id]
    assert done.finished_at is not None
    record = membrane.get(view.record_id)
    assert record.payload is not None and record.payload["text"] == "deployed build 7"
    # the trust stored with the operation is re-applied: the actor is the submitter's
    prov = record.provenance[0]
    assert prov["created_by"] == "development" and prov["ref"] == f"capture:{view.operation_id}"


def test_invalid_single_capture_writes_nothing(membrane: Membrane, database_url: str):
    with pytest.raises(errors.InvalidInput) as info:
        membrane.inbox.submit_capture({"source_kind": "event", "scope": "", "content": {}}, DEV)
    assert "scope" in {d["field"] for d in info.value.details}
    with pytest.raises(errors.PayloadTooLarge):
        membrane.inbox.submit_capture({**EVENT, "content": {"text": "x" * 300_000}}, DEV)
    with pytest.raises(errors.InvalidInput):
        membrane.inbox.submit_capture({**EVENT, "content": {"text": "a\x00b"}}, DEV)
    reader = TrustPolicy(write_scopes=frozenset({"other"}), actor="r")
    with pytest.raises(errors.Forbidden):
        membrane.inbox.submit_capture(EVENT, reader)
    assert scalar(database_url, "SELECT count(*) FROM operations") == 0
    membrane.inbox.submit_capture(EVENT, DEV)  # positive control
    assert scalar(database_url, "SELECT count(*) FROM operations") == 1


def test_idempotency_same_body_same_operation_other_body_conflicts(membrane: Membrane, database_url: str):
    ops, work = membrane.inbox, membrane.inbox_worker
    first = ops.submit_capture(EVENT, DEV, idempotency_key="k1")
    again = ops.submit_capture(dict(EVENT), DEV, idempotency_key="k1")
    assert again.operation_id == first.operation_id and again.record_id == first.record_id
    with pytest.raises(errors.IdempotencyConflict):
        ops.submit_capture({**EVENT, "content": {"text": "other"}}, DEV, idempotency_key="k1")
    # keys are per principal: another caller may use the same key
    other = ops.submit_capture(EVENT, TrustPolicy(actor="someone-else"), idempotency_key="k1")
    assert other.operation_id != first.operation_id
    assert scalar(database_url, "SELECT count(*) FROM operations") == 2
    # after processing, the same key still answers with the same (now finished) operation
    work.process_captures([first.operation_id])
    replay = ops.submit_capture(EVENT, DEV, idempotency_key="k1")
    assert replay.operation_id == first.operation_id
    assert replay.status is OperationStatus.SUCCEEDED


def test_concurrent_submits_with_one_key_make_one_operation(membrane: Membrane, database_url: str):
    results: list[uuid.UUID] = []
    failures: list[BaseException] = []

    def submit() -> None:
        try:
            results.append(membrane.inbox.submit_capture(EVENT, DEV, idempotency_key="c").operation_id)
        except BaseException as exc:  # pragma: no cover - reported below
            failures.append(exc)

    threads = [threading.Thread(target=submit) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not failures and len(results) == 4 and len(set(results)) == 1
    assert scalar(database_url, "SELECT count(*) FROM operations") == 1


def test_batch_one_insert_invalid_item_fails_alone(membrane: Membrane, database_url: str):
    bad = {"source_kind": "event", "scope": "proj", "content": {}, "sensitivity": "top"}
    views = membrane.inbox.submit_captures([EVENT, bad, OBS], DEV)
    assert [v.status for v in views] == [
        OperationStatus.QUEUED,
        OperationStatus.FAILED,
        OperationStatus.QUEUED,
    ]
    assert views[1].error is not None and views[1].error["code"] == "invalid_input"
    assert "sensitivity" in {d["field"] for d in views[1].error["details"]}
    summary = membrane.inbox_worker.process_captures([v.operation_id for v in views])
    assert summary == {"claimed": 2, "succeeded": 2, "failed": 0}
    obs = membrane.inbox.get(views[2].operation_id, DEV)
    assert len(obs.record_ids) == 2  # episode and derived fact
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 3
    with pytest.raises(errors.InvalidInput):
        membrane.inbox.submit_captures([EVENT] * 1001, DEV)


def test_batch_idempotency_binds_each_item(membrane: Membrane):
    first = membrane.inbox.submit_captures([EVENT, OBS], DEV, idempotency_key="b")
    again = membrane.inbox.submit_captures([EVENT, OBS], DEV, idempotency_key="b")
    assert [v.operation_id for v in again] == [v.operation_id for v in first]
    with pytest.raises(errors.IdempotencyConflict):
        membrane.inbox.submit_captures([OBS, EVENT], DEV, idempotency_key="b")


def test_exactly_once_when_processed_twice_and_concurrently(membrane: Membrane, database_url: str):
    views = membrane.inbox.submit_captures([EVENT] * 50, DEV)
    ids = [v.operation_id for v in views]
    out: list[dict[str, int]] = []
    threads = [
        threading.Thread(target=lambda: out.append(membrane.inbox_worker.process_captures(ids, worker="t")))
        for _ in range(3)
    ]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sum(s["succeeded"] for s in out) == 50
    assert membrane.inbox_worker.process_captures(ids) == {"claimed": 0, "succeeded": 0, "failed": 0}
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 50
    assert scalar(database_url, "SELECT count(*) FROM audit_log") == 50


def test_uncommitted_batch_leaves_operations_queued(membrane: Membrane, database_url: str):
    """A worker whose transaction dies (here: rolled back) leaves no records and no status."""
    view = membrane.inbox.submit_capture(EVENT, DEV)
    with pytest.raises(RuntimeError), membrane.db.transaction() as conn:
        from membrane_core.storage import inbox

        locked = inbox.lock_captures(conn, [view.operation_id], drain=0, now=membrane.clock())
        assert len(locked) == 1
        raise RuntimeError("worker died")
    assert membrane.inbox.get(view.operation_id, DEV).status is OperationStatus.QUEUED
    membrane.inbox_worker.process_captures(None, drain=10)  # positive control: drained later
    assert membrane.inbox.get(view.operation_id, DEV).status is OperationStatus.SUCCEEDED


def test_bad_capture_in_a_batch_fails_its_own_operation(membrane: Membrane, database_url: str):
    views = membrane.inbox.submit_captures([EVENT, EVENT, EVENT, EVENT], DEV)
    existing = membrane.capture(EVENT).record_ids[0]
    with psycopg.connect(database_url) as conn:
        # a request that no longer validates (e.g. written by an older version)
        conn.execute(
            'UPDATE operations SET request = \'{"source_kind": "nope"}\' WHERE id = %s',
            (views[0].operation_id,),
        )
        # a capture the database refuses: its pre-assigned id is already taken
        conn.execute("UPDATE operations SET record_id = %s WHERE id = %s", (existing, views[2].operation_id))
    summary = membrane.inbox_worker.process_captures([v.operation_id for v in views])
    assert summary == {"claimed": 4, "succeeded": 2, "failed": 2}
    got = [membrane.inbox.get(v.operation_id, DEV) for v in views]
    assert [g.status for g in got] == [
        OperationStatus.FAILED,
        OperationStatus.SUCCEEDED,
        OperationStatus.FAILED,
        OperationStatus.SUCCEEDED,
    ]
    assert got[0].error is not None and got[0].error["code"] == "invalid_input"
    assert got[2].error is not None and got[2].error["code"] == "conflict"
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 3


def test_get_is_limited_to_the_submitter(membrane: Membrane):
    alice = TrustPolicy(
        actor="alice",
        read_scopes=frozenset({"proj"}),
        write_scopes=frozenset({"proj"}),
        max_sensitivity=Sensitivity.HIGH,
    )
    view = membrane.inbox.submit_capture(EVENT, alice)
    assert membrane.inbox.get(view.operation_id, alice).operation_id == view.operation_id
    bob = alice.model_copy(update={"actor": "bob"})
    with pytest.raises(errors.NotFound):
        membrane.inbox.get(view.operation_id, bob)
    with pytest.raises(errors.NotFound):
        membrane.inbox.get(uuid.uuid4(), alice)


def test_wait_returns_when_finished_or_on_timeout(membrane: Membrane):
    view = membrane.inbox.submit_capture(EVENT, DEV)
    pending = membrane.inbox.wait([view.operation_id], 0.05)
    assert pending[0].status is OperationStatus.QUEUED
    timer = threading.Timer(0.1, membrane.inbox_worker.process_captures, args=([view.operation_id],))
    timer.start()
    done = membrane.inbox.wait([view.operation_id], 10)
    timer.join()
    assert done[0].status is OperationStatus.SUCCEEDED


def test_redispatch_offers_stale_queued_operations_once_per_interval(membrane: Membrane, clock):
    stale = membrane.inbox.submit_capture(EVENT, DEV)
    clock.advance(seconds=60)
    fresh = membrane.inbox.submit_capture(EVENT, DEV)
    got = membrane.inbox_worker.redispatch_stale(30)
    assert got == {OperationKind.CAPTURE: [stale.operation_id]}  # not the fresh one
    assert membrane.inbox_worker.redispatch_stale(30) == {}  # just re-dispatched
    clock.advance(seconds=31)
    again = membrane.inbox_worker.redispatch_stale(30)
    assert set(again[OperationKind.CAPTURE]) == {stale.operation_id, fresh.operation_id}
    membrane.inbox_worker.process_captures(None, drain=10)
    clock.advance(seconds=60)
    assert membrane.inbox_worker.redispatch_stale(30) == {}  # finished ones never


def test_inline_dispatcher_and_recording_dispatcher(membrane: Membrane):
    view = membrane.inbox.submit_capture(EVENT, DEV)
    rec = RecordingDispatcher()
    assert rec.publish(OperationKind.CAPTURE, [view.operation_id])
    assert rec.published == [(OperationKind.CAPTURE, [view.operation_id])]
    InlineDispatcher(membrane.inbox_worker).publish(OperationKind.CAPTURE, [view.operation_id])
    assert membrane.inbox.get(view.operation_id, DEV).status is OperationStatus.SUCCEEDED


def test_revision_operation_applies_exactly_once(membrane: Membrane, database_url: str):
    fact_id = membrane.capture(OBS).record_ids[1]
    ops, work = membrane.inbox, membrane.inbox_worker
    view = ops.submit_revision("retract", fact_id, {"rationale": "wrong"}, DEV)
    assert view.status is OperationStatus.QUEUED
    with pytest.raises(errors.InvalidInput):
        ops.submit_revision("retract", fact_id, {"nonsense": 1}, DEV)
    with pytest.raises(errors.NotFound):
        ops.submit_revision("retract", uuid.uuid4(), {"rationale": "x"}, DEV)
    done = work.process_one(view.operation_id, worker="w")
    assert done["status"] == "succeeded", ops.get(view.operation_id, DEV).error
    assert work.process_one(view.operation_id, worker="w")["status"] == "skipped"
    assert ops.get(view.operation_id, DEV).record_ids == [fact_id]
    assert membrane.get(fact_id).status.value == "retracted"
    # a revision the engine refuses fails its operation with the reason, writing nothing
    again = ops.submit_revision("retract", fact_id, {"rationale": "twice"}, DEV)
    result = work.process_one(again.operation_id, worker="w")
    failed = ops.get(again.operation_id, DEV)
    assert result["status"] == "failed" and failed.error is not None


def test_maintenance_operation_runs_jobs_under_a_lease(membrane: Membrane, clock):
    ops, work = membrane.inbox, membrane.inbox_worker
    with pytest.raises(errors.InvalidInput):
        ops.submit_maintenance(["bogus"], DEV)
    with pytest.raises(errors.Forbidden):
        ops.submit_maintenance(["embed"], TrustPolicy(write_scopes=frozenset({"a"})))
    view = ops.submit_maintenance(["embed", "extract"], DEV)
    out = work.process_one(view.operation_id, worker="w")
    done = ops.get(view.operation_id, DEV)
    assert out["status"] == "succeeded" and done.result is not None
    assert set(done.result) == {"embed", "extract"}


def test_reap_requeues_a_dead_workers_maintenance_operation(membrane: Membrane, clock, database_url: str):
    view = membrane.inbox.submit_maintenance(["embed"], DEV)
    from membrane_core.storage import inbox

    with membrane.db.transaction() as conn:  # a worker claims it, then dies
        assert inbox.claim_one(conn, view.operation_id, worker="dead", now=clock(), lease_seconds=60)
    assert membrane.inbox.get(view.operation_id, DEV).status is OperationStatus.RUNNING
    assert membrane.inbox_worker.reap_expired()["operations"] == 0  # lease still valid
    clock.advance(seconds=61)
    assert membrane.inbox_worker.reap_expired()["operations"] == 1
    assert membrane.inbox.get(view.operation_id, DEV).status is OperationStatus.QUEUED
    assert OperationKind.MAINTENANCE in membrane.inbox_worker.redispatch_stale(30)
    assert membrane.inbox_worker.process_one(view.operation_id)["status"] == "succeeded"


def test_purge_forgets_old_finished_operations_only(membrane: Membrane, clock, database_url: str):
    done = membrane.inbox.submit_capture(EVENT, DEV, idempotency_key="old")
    membrane.inbox_worker.process_captures([done.operation_id])
    waiting = membrane.inbox.submit_capture(EVENT, DEV)
    clock.advance(days=8)
    assert membrane.inbox_worker.purge_finished() == 1
    with pytest.raises(errors.NotFound):
        membrane.inbox.get(done.operation_id, DEV)
    assert membrane.inbox.get(waiting.operation_id, DEV).status is OperationStatus.QUEUED
    assert membrane.get(done.record_id).id == done.record_id  # the record stays
    # the key is free again after the retention
    again = membrane.inbox.submit_capture({**EVENT, "content": {"text": "new"}}, DEV, idempotency_key="old")
    assert again.operation_id != done.operation_id


def test_poison_capture_that_trips_a_bug_fails_alone(
    membrane: Membrane, database_url: str, monkeypatch: pytest.MonkeyPatch
):
    from membrane_core.storage import records

    views = membrane.inbox.submit_captures([EVENT] * 8, DEV)
    poison = views[5].record_id
    real = records.write_captures

    def buggy(conn, plans, **kw):  # type: ignore[no-untyped-def]
        if any(p.primary.id == poison for p in plans):
            raise ValueError("simulated bug")
        return real(conn, plans, **kw)

    monkeypatch.setattr(records, "write_captures", buggy)
    summary = membrane.inbox_worker.process_captures([v.operation_id for v in views])
    assert summary == {"claimed": 8, "succeeded": 7, "failed": 1}
    failed = membrane.inbox.get(views[5].operation_id, DEV)
    assert failed.error is not None and failed.error["code"] == "internal"
    assert "simulated bug" in failed.error["message"]
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 7


def test_the_submitting_request_id_is_stored_on_each_path(membrane: Membrane, database_url: str):
    """RFC 9.1, 14.3: COPY, the keyed insert, a failed batch item, a revision and maintenance."""
    single = membrane.inbox.submit_capture(EVENT, DEV, request_id="req-copy")
    keyed = membrane.inbox.submit_captures(
        [EVENT, {"source_kind": "bogus"}], DEV, idempotency_key="k", request_id="req-keyed"
    )
    plain = membrane.inbox.submit_capture(OBS, DEV)
    assert single.request_id == "req-copy" and plain.request_id is None
    assert [v.request_id for v in keyed] == ["req-keyed", "req-keyed"]
    assert keyed[1].status is OperationStatus.FAILED  # the refused item keeps it too
    membrane.inbox_worker.process_captures([single.operation_id, plain.operation_id], worker="w1")
    target = membrane.inbox.get(plain.operation_id, DEV).record_ids[1]  # the observation's fact
    revision = membrane.inbox.submit_revision("reinforce", target, {}, DEV, request_id="req-rev")
    run = membrane.inbox.submit_maintenance(["decay"], DEV, request_id="req-run")
    stored = {
        str(op): scalar(database_url, "SELECT request_id FROM operations WHERE id = %s", op)
        for op in (single.operation_id, keyed[0].operation_id, keyed[1].operation_id, revision.operation_id)
    }
    assert list(stored.values()) == ["req-copy", "req-keyed", "req-keyed", "req-rev"]
    assert membrane.inbox.get(run.operation_id, DEV).request_id == "req-run"
    assert membrane.inbox.get(single.operation_id, DEV).request_id == "req-copy"  # read back, finished
    # a replay under the key answers the original operation, with the original request's id
    again = membrane.inbox.submit_captures(
        [EVENT, {"source_kind": "bogus"}], DEV, idempotency_key="k", request_id="req-2"
    )
    assert [v.request_id for v in again] == ["req-keyed", "req-keyed"]


def test_a_bad_request_id_is_refused_with_nothing_written(membrane: Membrane, database_url: str):
    before = scalar(database_url, "SELECT count(*) FROM operations")
    for bad in ("two words", "x" * 129, ""):
        with pytest.raises(errors.InvalidInput, match="request id"):
            membrane.inbox.submit_capture(EVENT, DEV, request_id=bad)
    assert scalar(database_url, "SELECT count(*) FROM operations") == before
    op = membrane.inbox.submit_capture(EVENT, DEV, request_id="x" * 128).operation_id  # the bound itself
    with psycopg.connect(database_url) as conn, pytest.raises(psycopg.errors.CheckViolation):
        # the column's bound holds for any writer
        conn.execute("UPDATE operations SET request_id = repeat('x', 129) WHERE id = %s", (op,))
