"""Decay checkpoints, prune and episodic compression as work-queue batches (RFC 6.1, 6.3, 6.4.1)."""

from __future__ import annotations

import uuid
from datetime import timedelta

import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import MemoryType
from membrane_core.policy import policy_from_settings
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.sql import STORED_SALIENCE, execute, rows

EVENT = {"source_kind": "event", "scope": "proj", "content": {"text": "ran the build"}}


def stored(url: str, rid: uuid.UUID) -> tuple[float, float]:
    ((salience, base),) = rows(
        url, f"SELECT {STORED_SALIENCE}, base_salience FROM memory_records r WHERE id = %s", rid
    )
    return salience, base


def due_at(url: str, kind: str, rid: uuid.UUID):
    found = rows(url, "SELECT due_at FROM work_items WHERE kind = %s AND target_id = %s", kind, rid)
    return found[0][0] if found else None


def test_decay_refreshes_only_due_records_and_never_compounds(
    membrane: Membrane, clock, database_url: str
) -> None:
    t0 = clock()
    a = membrane.capture(EVENT).record_ids[0]
    clock.advance(minutes=30)
    b = membrane.capture(EVENT).record_ids[0]
    clock.advance(minutes=31)  # a's checkpoint (t0 + 1 h) is due, b's (t0 + 1.5 h) is not
    out = membrane.maintenance.run("decay")
    assert out["claimed"] == 1 and out["refreshed"] == 1
    assert stored(database_url, a)[0] == pytest.approx(2 ** (-61 / 60), rel=1e-12)
    assert stored(database_url, b)[0] == 1.0  # not due: untouched
    assert due_at(database_url, "decay", a) == clock() + timedelta(hours=1)
    # more batches at odd times: always the closed form from the capture time, never compounded
    for minutes in (17, 44, 3, 61):
        clock.advance(minutes=minutes)
        membrane.maintenance.run("decay")
    elapsed = (clock() - t0).total_seconds()
    assert elapsed == 186 * 60
    assert stored(database_url, a)[0] == pytest.approx(2 ** (-elapsed / 3600), rel=1e-12)
    assert stored(database_url, b)[0] == pytest.approx(2 ** (-(elapsed - 1800) / 3600), rel=1e-12)


def test_decay_at_floor_schedules_prune_and_prune_deletes_with_audit(
    membrane: Membrane, clock, database_url: str
) -> None:
    rid = membrane.capture(EVENT).record_ids[0]
    pinned = membrane.capture(EVENT).record_ids[0]
    execute(database_url, "UPDATE memory_records SET pinned = true WHERE id = %s", pinned)
    clock.advance(hours=7)  # 2^-7 < 0.01: at the episodic floor
    out = membrane.maintenance.run("decay")
    assert out["prune_scheduled"] == 1
    assert due_at(database_url, "prune", rid) is not None
    assert due_at(database_url, "prune", pinned) is None
    assert due_at(database_url, "decay", pinned) is None  # pinned records do not decay
    assert stored(database_url, rid)[0] == pytest.approx(0.01)
    assert stored(database_url, pinned)[0] == 1.0
    assert membrane.maintenance.run("prune")["deleted"] == 1
    assert rows(database_url, "SELECT 1 FROM memory_records WHERE id = %s", rid) == []
    actions = [
        r[0] for r in rows(database_url, "SELECT action FROM audit_log WHERE record_id = %s ORDER BY id", rid)
    ]
    assert actions == ["create", "delete"]
    history = membrane.audit(rid)
    assert [e.action for e in history.entries] == ["create", "delete"] and history.chain_valid
    # the record's other work items went with it
    assert rows(database_url, "SELECT kind FROM work_items WHERE target_id = %s", rid) == []
    assert rows(database_url, "SELECT 1 FROM memory_records WHERE id = %s", pinned) == [(1,)]


def test_prune_never_deletes_protected_records(membrane: Membrane, clock, database_url: str) -> None:
    ids = {
        name: membrane.capture(EVENT).record_ids[0]
        for name in ("eligible", "pinned", "manual_only", "never", "retracted", "contested")
    }
    execute(database_url, "UPDATE memory_records SET pinned = true WHERE id = %s", ids["pinned"])
    for policy in ("manual_only", "never"):
        execute(
            database_url, "UPDATE memory_records SET deletion_policy = %s WHERE id = %s", policy, ids[policy]
        )
    execute(
        database_url,
        "UPDATE memory_records SET status = 'retracted', retracted_at = now() WHERE id = %s",
        ids["retracted"],
    )
    execute(
        database_url,
        "UPDATE memory_records SET status = 'contested', contested_at = now() WHERE id = %s",
        ids["contested"],
    )
    clock.advance(hours=12)
    # prune items for every one of them, as a stale or hostile schedule might hold
    execute(
        database_url,
        "INSERT INTO work_items (kind, target_id, due_at) SELECT 'prune', unnest(%s::uuid[]), %s",
        list(ids.values()),
        clock(),
    )
    out = membrane.maintenance.run("prune")
    assert out == {"claimed": 6, "held": 6, "deleted": 1, "kept": 5}
    left = {r[0] for r in rows(database_url, "SELECT id FROM memory_records")}
    assert ids["eligible"] not in left  # positive control
    assert left == {ids[n] for n in ("pinned", "manual_only", "never", "retracted", "contested")}
    deletes = rows(database_url, "SELECT record_id, rationale FROM audit_log WHERE action = 'delete'")
    assert deletes == [(ids["eligible"], "pruned: salience reached floor")]
    # survivors go back to the decay checkpoint instead of being forgotten
    assert due_at(database_url, "decay", ids["retracted"]) is not None


def test_prune_honours_max_age(membrane: Membrane, clock, database_url: str) -> None:
    old, young = (membrane.capture(EVENT).record_ids[0] for _ in range(2))
    execute(database_url, "UPDATE memory_records SET max_age_seconds = 600, half_life_seconds = 864000")
    execute(
        database_url,
        "UPDATE memory_records SET created_at = created_at + interval '1 hour' WHERE id = %s",
        young,
    )
    clock.advance(minutes=30)
    execute(database_url, "UPDATE work_items SET due_at = %s WHERE kind = 'decay'", clock())
    assert membrane.maintenance.run("decay")["prune_scheduled"] == 1
    assert membrane.maintenance.run("prune")["deleted"] == 1
    assert [r[0] for r in rows(database_url, "SELECT id FROM memory_records")] == [young]
    assert old not in {r[0] for r in rows(database_url, "SELECT id FROM memory_records")}
    ((rationale,),) = rows(database_url, "SELECT rationale FROM audit_log WHERE action = 'delete'")
    assert rationale == "pruned: maximum age passed"


WORKING = {
    "source_kind": "working_state",
    "scope": "proj",
    "content": {"thread_id": "t", "task_state": "executing", "context_summary": "building"},
}


def lifecycle(url: str, rid: uuid.UUID) -> tuple[int | None, int]:
    ((max_age, half_life),) = rows(
        url, "SELECT max_age_seconds, half_life_seconds FROM memory_records WHERE id = %s", rid
    )
    return max_age, half_life


def test_a_captures_max_age_expires_its_record_at_the_next_sweep(
    membrane: Membrane, clock, database_url: str
) -> None:
    t0 = clock()
    brief = membrane.capture({**WORKING, "max_age_seconds": 600}).record_ids[0]
    plain = membrane.capture(WORKING).record_ids[0]  # the control: captured at the same time
    longer = membrane.capture({**EVENT, "max_age_seconds": 7200}).record_ids[0]
    assert lifecycle(database_url, brief) == (600, 86400)
    assert lifecycle(database_url, plain) == (None, 86400)
    # the first checkpoint is the earlier of one half-life and the maximum age
    assert due_at(database_url, "decay", brief) == t0 + timedelta(seconds=600)
    assert due_at(database_url, "decay", plain) == t0 + timedelta(days=1)
    assert due_at(database_url, "decay", longer) == t0 + timedelta(hours=1)
    clock.advance(seconds=599)
    assert membrane.maintenance.run("decay")["claimed"] == 0  # not due a second early
    assert membrane.get(brief).id == brief  # reads return it until prune deletes it
    clock.advance(seconds=1)
    assert membrane.maintenance.run("decay")["prune_scheduled"] == 1
    assert membrane.maintenance.run("prune")["deleted"] == 1
    left = {r[0] for r in rows(database_url, "SELECT id FROM memory_records")}
    assert brief not in left and {plain, longer} <= left
    ((rid, rationale),) = rows(
        database_url, "SELECT record_id, rationale FROM audit_log WHERE action = 'delete'"
    )
    assert (rid, rationale) == (brief, "pruned: maximum age passed")
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE target_id = %s", brief) == [(0,)]
    with pytest.raises(errors.NotFound):
        membrane.get(brief)


def test_max_age_is_bounded(membrane: Membrane) -> None:
    for bad in (0, -5, 100 * 365 * 86400 + 1, "soon"):
        with pytest.raises(errors.InvalidInput) as exc:
            membrane.capture({**WORKING, "max_age_seconds": bad})
        assert exc.value.details[0]["field"] == "max_age_seconds"
    assert membrane.capture({**WORKING, "max_age_seconds": 100 * 365 * 86400}).record_ids


def test_a_revision_carries_max_age_and_reinforcement_does_not_defer_it(
    membrane: Membrane, clock, database_url: str
) -> None:
    old = membrane.capture({**WORKING, "max_age_seconds": 60}).record_ids[0]
    clock.advance(seconds=30)
    t1 = clock()
    body = {
        "record": {
            "payload": {"thread_id": "t", "task_state": "done", "context_summary": "built"},
            "max_age_seconds": 300,
        },
        "rationale": "finished",
    }
    new = membrane.revisions.supersede(old, body, DEVELOPMENT_POLICY)
    assert lifecycle(database_url, new) == (300, 86400)
    assert due_at(database_url, "decay", new) == t1 + timedelta(seconds=300)
    # a supersede without one writes a record without one: a new record never inherits it
    plain = membrane.revisions.supersede(
        new, {**body, "record": {"payload": body["record"]["payload"]}}, DEVELOPMENT_POLICY
    )
    assert lifecycle(database_url, plain) == (None, 86400)
    forked = membrane.revisions.fork(
        plain,
        {"record": {"payload": body["record"]["payload"], "max_age_seconds": 120}, "rationale": "variant"},
        DEVELOPMENT_POLICY,
    )
    assert lifecycle(database_url, forked) == (120, 86400)
    # reinforcement moves the checkpoint one half-life on, but never past the maximum age
    clock.advance(seconds=60)
    membrane.revisions.reinforce(forked, {}, DEVELOPMENT_POLICY)
    assert due_at(database_url, "decay", forked) == t1 + timedelta(seconds=120)
    membrane.revisions.reinforce(plain, {}, DEVELOPMENT_POLICY)
    assert due_at(database_url, "decay", plain) == clock() + timedelta(days=1)  # control
    clock.advance(seconds=60)
    assert membrane.maintenance.run("decay")["prune_scheduled"] == 1
    assert membrane.maintenance.run("prune")["deleted"] == 1
    assert {
        r[0] for r in rows(database_url, "SELECT id FROM memory_records WHERE id IN (%s, %s)", forked, plain)
    } == {plain}


def test_a_type_prune_never_deletes_takes_no_max_age(membrane: Membrane, database_url: str) -> None:
    obs = {
        "source_kind": "observation",
        "scope": "proj",
        "content": {"subject": "ann", "predicate": "likes", "object": "tea"},
    }
    episode, fact = membrane.capture({**obs, "max_age_seconds": 600}).record_ids
    assert lifecycle(database_url, episode)[0] == 600
    assert lifecycle(database_url, fact)[0] is None  # a derived fact does not take it
    body = {
        "record": {"object": "coffee", "max_age_seconds": 600},
        "rationale": "changed",
        "evidence": [{"kind": "observation", "ref": "chat"}],
    }
    with pytest.raises(errors.InvalidInput) as exc:
        membrane.revisions.supersede(fact, body, DEVELOPMENT_POLICY)
    assert exc.value.details[0]["field"] == "record.max_age_seconds"
    assert membrane.get(fact).status.value == "active"  # nothing written
    del body["record"]["max_age_seconds"]
    assert membrane.revisions.supersede(fact, body, DEVELOPMENT_POLICY)  # control


def test_decay_after_reinforcement_restarts_from_new_base(
    membrane: Membrane, clock, database_url: str
) -> None:
    obs = {
        "source_kind": "observation",
        "scope": "proj",
        "content": {"subject": "api", "predicate": "uses", "object": "postgres"},
    }
    fact = membrane.capture(obs).record_ids[1]
    clock.advance(days=30)
    membrane.capture(obs)  # reinforced: base = 0.5 + 0.1 at t0 + 30 d
    clock.advance(days=30)
    execute(database_url, "UPDATE work_items SET due_at = %s WHERE kind = 'decay'", clock())
    membrane.maintenance.run("decay")
    assert stored(database_url, fact) == pytest.approx((0.6 * 0.5, 0.6))


def test_compression_after_age_threshold(settings, db, clock, database_url: str) -> None:
    policy = policy_from_settings(settings)
    policy = policy.model_copy(update={"half_lives": {**policy.half_lives, MemoryType.EPISODIC: 10 * 86400}})
    membrane = Membrane(settings, database=db, clock=clock, policy=policy)
    old = membrane.capture(EVENT).record_ids[0]
    clock.advance(hours=12)
    young = membrane.capture(EVENT).record_ids[0]
    clock.advance(hours=13)  # old is 25 h old: its compress item is due; young's is not
    out = membrane.maintenance.run("consolidate")
    assert out["compress"]["compressed"] == 1
    expected = 0.5 * 2 ** (-25 * 3600 / (10 * 86400))
    assert stored(database_url, old) == pytest.approx((expected, 0.5))
    assert stored(database_url, young)[1] == 1.0
    ((details,),) = rows(
        database_url, "SELECT details FROM audit_log WHERE record_id = %s AND action = 'decay'", old
    )
    assert details == {"compressed_from": 1.0, "base_salience": 0.5}
    # a duplicated compress item does not halve twice
    execute(
        database_url,
        "INSERT INTO work_items (kind, target_id, due_at) VALUES ('compress', %s, %s)",
        old,
        clock(),
    )
    assert membrane.maintenance.run("consolidate")["compress"]["compressed"] == 0
    assert stored(database_url, old)[1] == 0.5


def test_unknown_job_is_invalid_input(membrane: Membrane) -> None:
    with pytest.raises(errors.InvalidInput) as info:
        membrane.maintenance.run("vacuum")
    assert info.value.details[0]["field"] == "job"
    assert membrane.maintenance.run("decay") == {"claimed": 0}  # positive control: a known job runs


def test_failing_item_is_rescheduled_without_blocking_the_batch(
    membrane: Membrane, clock, database_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    good = membrane.capture(EVENT).record_ids[0]
    bad = membrane.capture(EVENT).record_ids[0]
    from membrane_core.storage import jobs

    real = jobs.refresh_salience

    def flaky(conn, ids, *, now):
        if bad in ids:
            raise RuntimeError("boom")
        return real(conn, ids, now=now)

    monkeypatch.setattr(jobs, "refresh_salience", flaky)
    clock.advance(minutes=61)
    out = membrane.maintenance.run("decay")
    assert out["failed"] == 1 and out["refreshed"] == 1 and out["batch_retried"] == 1
    assert stored(database_url, good)[0] < 1.0 and stored(database_url, bad)[0] == 1.0
    ((err, attempts),) = rows(
        database_url,
        "SELECT last_error, attempts FROM work_items WHERE kind = 'decay' AND target_id = %s",
        bad,
    )
    assert "boom" in err and attempts == 1


def test_drain_runs_batches_until_the_backlog_is_short(membrane: Membrane, clock, database_url: str) -> None:
    ids = [r.record_ids[0] for r in membrane.capture_many([EVENT] * 7)]
    clock.advance(minutes=61)
    out = membrane.maintenance.drain("decay", limit=3)
    assert out["batches"] == 3 and out["claimed"] == 7 and out["refreshed"] == 7
    assert all(stored(database_url, rid)[0] < 1.0 for rid in ids)
    nested = membrane.maintenance.drain("consolidate", limit=3)
    assert nested["batches"] == 1 and nested["consolidate"] == {"claimed": 0}


def test_embed_and_extract_delegate_to_their_services(membrane: Membrane) -> None:
    embed = membrane.maintenance.run("embed")
    extract = membrane.maintenance.run("extract")
    assert embed.get("job") == "embed" and embed["claimed"] == 0
    assert "claimed" in extract and "skipped" not in extract


def test_the_decay_checkpoint_is_a_row_of_its_own_and_gives_way_to_a_later_write(
    membrane: Membrane, clock, database_url: str
) -> None:
    """RFC 6.1: the refresh writes the narrow checkpoint row, never the record's row; a read
    gives the checkpoint until a write changes the record's base salience or clock, and the
    checkpoint goes with its record."""
    rid = membrane.capture(EVENT).record_ids[0]
    other = membrane.capture(EVENT).record_ids[0]
    where = "SELECT ctid::text, salience FROM memory_records WHERE id = %s"
    before = rows(database_url, where, rid)
    clock.advance(minutes=90)
    assert membrane.maintenance.run("decay")["refreshed"] == 2
    assert rows(database_url, where, rid) == before  # the same row version, its column untouched
    assert before[0][1] == 1.0
    assert stored(database_url, rid)[0] == pytest.approx(2**-1.5, rel=1e-12)

    clock.advance(minutes=10)
    membrane.revisions.reinforce(rid, {}, DEVELOPMENT_POLICY)  # a new base and clock
    assert rows(database_url, "SELECT 1 FROM salience_checkpoints WHERE record_id = %s", rid)
    assert stored(database_url, rid) == pytest.approx((2 ** -(100 / 60) + 0.1,) * 2, rel=1e-12)
    assert stored(database_url, other)[0] == pytest.approx(2**-1.5, rel=1e-12)  # positive control

    membrane.delete(other, DEVELOPMENT_POLICY)
    assert not rows(database_url, "SELECT 1 FROM salience_checkpoints WHERE record_id = %s", other)
    assert rows(database_url, "SELECT 1 FROM salience_checkpoints WHERE record_id = %s", rid)
