"""Tombstones (RFC 5.4): a retracted fact is not re-created by capture, even under concurrency."""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Iterator
from typing import Any

import psycopg
import pytest

from membrane_core import Membrane
from membrane_core.settings import Settings
from membrane_core.storage.db import Database
from membrane_core.trust import TrustPolicy

EVIDENCE = [{"kind": "observation", "ref": "user said so"}]


def obs(s: str, p: str, o: str, scope: str = "proj") -> dict[str, Any]:
    return {
        "source_kind": "observation",
        "scope": scope,
        "content": {"subject": s, "predicate": p, "object": o},
    }


def live_facts(url: str, obj: str) -> int:
    with psycopg.connect(url) as conn:
        row = conn.execute(
            "SELECT count(*) FROM memory_records WHERE type = 'semantic' "
            "AND fact_object = %s AND status <> 'retracted'",
            (obj,),
        ).fetchone()
        assert row is not None
        return int(row[0])


@pytest.fixture
def wide(settings: Settings, database_url: str, clock) -> Iterator[Membrane]:
    """A second Membrane with enough pooled connections for every thread."""
    db = Database(
        database_url, embedding_dim=settings.embedding_dim, run_migrations=False, min_size=1, max_size=12
    )
    yield Membrane(settings, database=db, clock=clock)
    db.close()


def run_threads(fn: Any, n: int) -> list[Any]:
    barrier = threading.Barrier(n)
    out: list[Any] = [None] * n
    errs: list[BaseException] = []

    def work(i: int) -> None:
        try:
            barrier.wait(timeout=30)
            out[i] = fn(i)
        except BaseException as exc:  # reported below
            errs.append(exc)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errs, errs
    return out


def wait_for_advisory_waiters(url: str, n: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    with psycopg.connect(url, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()
            if row and row[0] >= n:
                return
            time.sleep(0.02)
    raise AssertionError(f"fewer than {n} writers ever waited on the fact-key lock")


def test_concurrent_recaptures_of_a_tombstoned_fact_all_fail(
    membrane: Membrane, wide: Membrane, database_url: str
) -> None:
    fact = membrane.capture(obs("user", "lives in", "Paris")).record_ids[1]
    membrane.revisions.retract(fact, {"rationale": "wrong"}, TrustPolicy())
    variants = ["Paris", "paris", " PARIS ", "Paris"]
    results = run_threads(lambda i: wide.capture(obs("User", "Lives  in", variants[i % 4])).fact, 8)
    assert results == ["tombstoned"] * 8
    assert live_facts(database_url, "paris") == 0
    # positive control: a different fact, and the same fact in another scope, are created
    assert wide.capture(obs("user", "lives in", "Rome")).fact == "created"
    assert wide.capture(obs("user", "lives in", "Paris", scope="other")).fact == "created"
    assert membrane.get(fact).status.value == "retracted"


def test_captures_racing_an_uncommitted_retract_all_fail(
    membrane: Membrane, wide: Membrane, database_url: str
) -> None:
    fact = membrane.capture(obs("server", "runs", "nginx")).record_ids[1]
    n = 6
    with membrane.db.transaction() as conn:
        membrane.revisions.apply("retract", fact, {"rationale": "apache now"}, TrustPolicy(), conn=conn)
        results: list[Any] = []
        runner = threading.Thread(
            target=lambda: results.extend(
                run_threads(lambda i: wide.capture(obs("server", "runs", "nginx")).fact, n)
            )
        )
        runner.start()
        # every capture is now blocked on the fact-key lock the retract holds
        wait_for_advisory_waiters(database_url, n)
    runner.join(timeout=60)
    assert results == ["tombstoned"] * n
    assert live_facts(database_url, "nginx") == 0
    assert wide.capture(obs("server", "runs", "caddy")).fact == "created"  # positive control


def test_only_an_explicit_revision_reasserts(membrane: Membrane, database_url: str) -> None:
    wrong = membrane.capture(obs("lib", "version", "2.0")).record_ids[1]
    membrane.revisions.retract(wrong, {"rationale": "was 1.9"}, TrustPolicy())
    assert membrane.capture(obs("lib", "version", "2.0")).fact == "tombstoned"
    other = membrane.capture(obs("lib", "version", "1.9")).record_ids[1]
    # the user learns it really is 2.0: supersede naming the tombstoned fact re-asserts it
    new = membrane.revisions.supersede(
        other,
        {"record": {"object": "2.0"}, "rationale": "2.0 now", "evidence": EVIDENCE},
        TrustPolicy(actor="u"),
    )
    assert membrane.audit(new).entries[0].details["reasserted"] is True
    with psycopg.connect(database_url) as conn:
        stones = conn.execute("SELECT object FROM fact_tombstones ORDER BY object").fetchall()
    assert stones == [("1.9",)]  # 2.0's tombstone removed, 1.9's written
    res = membrane.capture(obs("lib", "version", "2.0"))
    assert res.fact == "reinforced" and res.record_ids[1] == new
    assert membrane.capture(obs("lib", "version", "1.9")).fact == "tombstoned"


def test_fork_and_merge_reassert_tombstoned_keys(membrane: Membrane) -> None:
    a = membrane.capture(obs("api", "limit", "100")).record_ids[1]
    b = membrane.capture(obs("api", "limit", "200")).record_ids[1]
    membrane.revisions.retract(b, {"rationale": "no"}, TrustPolicy())
    variant = membrane.revisions.fork(
        a,
        {
            "record": {"object": "200"},
            "condition": "paid plan",
            "rationale": "paid plans differ",
            "evidence": EVIDENCE,
        },
        TrustPolicy(),
    )
    assert membrane.capture(obs("api", "limit", "200")).record_ids[1] == variant
    c = membrane.capture(obs("api", "limit", "300")).record_ids[1]
    membrane.revisions.retract(c, {"rationale": "no"}, TrustPolicy())
    merged = membrane.revisions.merge(
        {"record_ids": [a, variant], "record": {"object": "300"}, "rationale": "one limit"}, TrustPolicy()
    )
    res = membrane.capture(obs("api", "limit", "300"))
    assert res.fact == "reinforced" and res.record_ids[1] == merged
    assert membrane.capture(obs("api", "limit", "100")).fact == "tombstoned"


def test_retract_without_fact_key_writes_no_tombstone(membrane: Membrane, database_url: str) -> None:
    working = membrane.capture(
        {
            "source_kind": "working_state",
            "scope": "proj",
            "content": {"thread_id": "t1", "task_state": "executing", "context_summary": "doing"},
        }
    ).record_ids[0]
    membrane.revisions.retract(working, {"rationale": "stale"}, TrustPolicy())
    assert membrane.get(working).status.value == "retracted"
    with psycopg.connect(database_url) as conn:
        assert conn.execute("SELECT count(*) FROM fact_tombstones").fetchone() == (0,)
    assert uuid.UUID(str(working))
