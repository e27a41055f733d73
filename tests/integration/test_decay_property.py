"""Property: any sequence of decay batches at any times gives the closed-form salience (RFC 6.1).

The batches run against the real store (the decay batch is SQL); the expected value
is the pure Python closed form ``membrane_core.decay.salience_at`` evaluated from the
stored ``base_salience`` and ``reinforced_at``, and the baseline of records nobody
reinforced must stay exactly what capture wrote (a batch rewriting it would fail).
A compounding sweep would drift below it after the second batch.
"""

from __future__ import annotations

import math
import uuid
from datetime import datetime, timedelta

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from membrane_core import Membrane, decay
from membrane_core.jobs.decay import next_checkpoint
from membrane_core.models import DecayProfile
from membrane_core.storage.jobs import Checkpoint
from tests.support.sql import STORED_SALIENCE

STEP = st.tuples(
    st.integers(min_value=0, max_value=3 * 86400),  # seconds to advance before the batch
    st.booleans(),  # re-observe the fact (reinforcement restarts its clock)
    st.integers(min_value=1, max_value=6),  # batch size
)


def snapshot(url: str, ids: list[uuid.UUID]) -> dict[uuid.UUID, tuple]:
    with psycopg.connect(url) as conn:
        found = conn.execute(
            f"SELECT id, {STORED_SALIENCE}, base_salience, reinforced_at, half_life_seconds,"
            " min_salience, pinned FROM memory_records r WHERE id = ANY(%s)",
            (ids,),
        ).fetchall()
    return {r[0]: r[1:] for r in found}


def closed_form(row: tuple, at: datetime) -> float:
    _, base, reinforced_at, half_life, floor, pinned = row
    profile = DecayProfile(half_life_seconds=half_life, min_salience=floor)
    return decay.salience_at(base, reinforced_at, profile, at, pinned=pinned)


@settings(
    max_examples=30,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    steps=st.lists(STEP, min_size=1, max_size=8),
    kinds=st.lists(st.sampled_from(["event", "observation", "working_state"]), min_size=1, max_size=4),
)
def test_any_sequence_of_decay_batches_gives_closed_form(
    membrane: Membrane,
    clock,
    database_url: str,
    steps: list[tuple[int, bool, int]],
    kinds: list[str],
) -> None:
    scope = f"p{uuid.uuid4().hex[:12]}"
    obs = {
        "source_kind": "observation",
        "scope": scope,
        "content": {"subject": scope, "predicate": "is", "object": "decaying"},
    }
    bodies = {
        "event": {"source_kind": "event", "scope": scope, "content": {"text": "e"}},
        "observation": obs,
        "working_state": {
            "source_kind": "working_state",
            "scope": scope,
            "content": {"thread_id": "t", "task_state": "executing", "context_summary": "c"},
        },
    }
    results = [membrane.capture(bodies[kind]) for kind in kinds]
    ids = [rid for res in results for rid in res.record_ids]
    # episodes and working records are never reinforced here: their decay baseline must
    # stay exactly what capture wrote, whatever the batches do
    untouched = [res.record_ids[0] for res in results]
    captured_at = clock()
    times = {clock()}
    for advance, reobserve, limit in steps:
        clock.advance(seconds=advance)
        times.add(clock())
        if reobserve:
            membrane.capture(obs)
        membrane.maintenance.run("decay", limit=limit)
        # every stored checkpoint is the closed form at one of the moments something ran
        rows = snapshot(database_url, ids)
        for row in rows.values():
            assert any(
                row[0] == pytest.approx(closed_form(row, t), rel=1e-9, abs=1e-12)
                for t in times
                if t >= row[2]
            ), row
        for rid in untouched:
            assert rows[rid][1:3] == (1.0, captured_at), rows[rid]
    # force every checkpoint of this example due, run batches until none is left
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE work_items SET due_at = %s WHERE kind = 'decay' AND target_id = ANY(%s)", (clock(), ids)
        )
    while membrane.maintenance.run("decay", limit=50)["claimed"]:
        pass
    now = clock()
    for row in snapshot(database_url, ids).values():
        assert row[0] == pytest.approx(closed_form(row, now), rel=1e-9, abs=1e-12)


@given(
    base=st.floats(min_value=0.02, max_value=1.0),
    half_life=st.integers(min_value=60, max_value=90 * 86400),
    elapsed=st.integers(min_value=0, max_value=30 * 86400),
)
def test_next_checkpoint_never_overshoots_the_floor(base: float, half_life: int, elapsed: int) -> None:
    """The next checkpoint is at most one half-life away and no later than the floor crossing."""
    t0 = datetime(2026, 1, 1)
    now = t0 + timedelta(seconds=elapsed)
    profile = DecayProfile(half_life_seconds=half_life, min_salience=0.01)
    salience = decay.salience_at(base, t0, profile, now, pinned=False)
    cp = Checkpoint(uuid.uuid4(), salience, base, t0, half_life, 0.01, None, t0, False, True)
    action, due = next_checkpoint(cp, now)
    if salience <= 0.01:
        assert (action, due) == ("prune", now)
    else:
        assert action == "decay" and due is not None
        assert now < due <= now + timedelta(seconds=half_life)
        floor_at = t0 + timedelta(seconds=half_life * math.log2(base / 0.01) + 1)
        assert due <= max(floor_at, now + timedelta(seconds=1))


def test_salience_past_a_thousand_half_lives_is_the_floor(
    membrane: Membrane, clock, database_url: str
) -> None:
    """RFC 6.1: a record thousands of half-lives old reads as its floor; Postgres' power()
    underflowed there and failed the decay batch and every retrieval that read it."""
    old = membrane.capture({"source_kind": "event", "scope": "u", "content": {"text": "x"}})
    rid = old.record_ids[0]
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE memory_records SET half_life_seconds = 60, min_salience = 0.02 WHERE id = %s", (rid,)
        )
        conn.execute("UPDATE work_items SET due_at = %s", (clock(),))
        conn.commit()
    clock.advance(days=60)  # 86,400 half-lives
    fresh = membrane.capture({"source_kind": "event", "scope": "u", "content": {"text": "y"}})
    membrane.maintenance.run("decay", limit=10)
    got = membrane.retrieve({"scopes": ["u"]})
    assert [r.id for r in got.records] == [fresh.record_ids[0], rid]  # both, fresh first
    assert got.records[1].salience == pytest.approx(0.02)
    assert snapshot(database_url, [rid])[rid][0] == pytest.approx(0.02)
