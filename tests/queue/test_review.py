"""Review through real Celery workers and a real redis-server (RFC 5.7, 6.4.4, 6.5): the llm
pool's facts proposed under ``MEMBRANE_REVIEW_EXTRACTIONS``, a rejected triple never proposed
again, and beat's ``review-expiry`` entry run by a maintenance worker process."""

from __future__ import annotations

import re
import uuid
from typing import Any

import pytest
from celery.worker import WorkController

from membrane_core import Membrane
from membrane_core.enums import OperationKind, OperationStatus
from membrane_core.trust import TrustPolicy
from tests.support.processes import Spawn, wait_until
from tests.support.sql import execute, row, rows, scalar
from workers.dispatch import CeleryDispatcher

pytestmark = pytest.mark.slow

SCOPE = "team"
WRITER = TrustPolicy(actor="writer")
MODEL = TrustPolicy(actor="model", review_required=True)
REVIEWER = TrustPolicy(actor="reviewer", reviewer=True)


def capture_through_the_pool(live: Membrane, dispatcher: CeleryDispatcher, text: str) -> uuid.UUID:
    """An episode written by the ingest pool (whose settings schedule its extraction)."""
    view = live.inbox.submit_capture(
        {"source_kind": "event", "scope": SCOPE, "content": {"text": text}}, WRITER
    )
    assert dispatcher.publish(OperationKind.CAPTURE, [view.operation_id])
    done = live.inbox.wait([view.operation_id], 60)[0]
    assert done.status is OperationStatus.SUCCEEDED, done.error
    assert done.record_id is not None
    return done.record_id


def extract_through_the_pool(dispatcher: CeleryDispatcher, database_url: str) -> None:
    assert scalar(database_url, "SELECT count(*) FROM work_items WHERE kind = 'extract'") > 0
    dispatcher.app.send_task("membrane.extract_batch")
    wait_until(
        lambda: scalar(database_url, "SELECT count(*) FROM work_items WHERE kind = 'extract'") == 0,
        what="extraction done",
    )


def found(live: Membrane, query: str, **extra: Any) -> dict[uuid.UUID, str]:
    res = live.retrieve({"query": query, "scopes": [SCOPE], "limit": 50, **extra}, WRITER)
    return {r.id: r.status.value for r in res.records}


def facts(database_url: str) -> list[tuple[Any, ...]]:
    return rows(
        database_url,
        "SELECT fact_subject, fact_predicate, fact_object, status FROM memory_records "
        "WHERE type = 'semantic' ORDER BY 1, 2, 3, 4",
    )


@pytest.mark.in_process_worker(
    queues=("ingest", "llm"),
    env={"MEMBRANE_LLM_PROVIDER": "deterministic", "MEMBRANE_REVIEW_EXTRACTIONS": "true"},
)
def test_the_llm_pool_proposes_and_a_rejected_triple_is_not_proposed_again(
    live: Membrane, celery_worker: WorkController, dispatcher: CeleryDispatcher, database_url: str
) -> None:
    first = capture_through_the_pool(live, dispatcher, "Ann works at Acme.")
    extract_through_the_pool(dispatcher, database_url)
    assert facts(database_url) == [("ann", "works_at", "acme", "proposed")]
    (fact,) = (r[0] for r in rows(database_url, "SELECT id FROM memory_records WHERE type = 'semantic'"))
    # RFC 5.7: not retrievable; the trusted episode it came from is, in the same answer
    seen = found(live, "Ann works at Acme")
    assert seen.get(first) == "active" and fact not in seen
    assert found(live, "Ann works at Acme", include_proposed=True)[fact] == "proposed"

    (entry,) = live.review.queue({}, REVIEWER).entries
    assert entry.source == "extraction" and entry.fact is not None and entry.fact.id == fact
    assert [e.id for e in entry.source_episodes] == [first]
    out = live.review.decide(
        {"decisions": [{"proposal_id": entry.proposal_id, "decision": "reject", "rationale": "misread"}]},
        REVIEWER,
    ).results[0]
    assert out.outcome == "rejected", out.error

    # the same triple again, beside a new one: the pool proposes only the new one
    second = capture_through_the_pool(live, dispatcher, "Ann works at Acme. Bob prefers tea.")
    extract_through_the_pool(dispatcher, database_url)
    assert facts(database_url) == [
        ("ann", "works_at", "acme", "retracted"),
        ("bob", "prefers", "tea", "proposed"),  # positive control: the pool ran on the episode
    ]
    (entry,) = live.review.queue({}, REVIEWER).entries
    assert entry.source == "extraction" and entry.fact is not None
    assert entry.fact.payload is not None and entry.fact.payload["predicate"] == "prefers"
    assert [e.id for e in entry.source_episodes] == [second]
    assert rows(database_url, "SELECT status, source FROM proposals ORDER BY created_at") == [
        ("rejected", "extraction"),
        ("pending", "extraction"),
    ]
    assert found(live, "Ann works at Acme Bob prefers tea").keys() >= {first, second}
    assert found(live, "Ann works at Acme", include_retracted=True)[fact] == "retracted"


def test_beat_expires_undecided_proposals_on_the_maintenance_pool(
    live: Membrane, spawn: Spawn, database_url: str
) -> None:
    def observe(s: str, o: str) -> Any:
        body = {
            "source_kind": "observation",
            "scope": SCOPE,
            "content": {"subject": s, "predicate": "lives in", "object": o},
        }
        return live.capture(body, MODEL)

    def status(pid: uuid.UUID) -> str:
        return str(row(database_url, "SELECT status FROM proposals WHERE id = %s", pid)[0])

    def statuses(pid: uuid.UUID) -> list[tuple[Any, ...]]:
        """The statuses of every record of a proposal: its episode, fact and entities."""
        return rows(
            database_url,
            "SELECT DISTINCT r.status FROM proposal_records p JOIN memory_records r "
            "ON r.id = p.record_id WHERE p.proposal_id = %s",
            pid,
        )

    old, young = observe("Bob", "Rome"), observe("Ann", "Oslo")
    assert old.proposal_id is not None and young.proposal_id is not None
    # the old one was proposed two minutes ago under the shortest TTL (60 s); the young one
    # keeps the default (30 days)
    execute(
        database_url,
        "UPDATE proposals SET created_at = now() - interval '120 seconds', "
        "expires_at = now() - interval '60 seconds' WHERE id = %s",
        old.proposal_id,
    )
    # beat ticks every second; the workers' TTL is the shortest the settings take
    env = {"MEMBRANE_BEAT_REVIEW_SECONDS": "1", "MEMBRANE_REVIEW_TTL": "60"}
    worker = spawn("worker", "maintenance", env=env)
    spawn("beat", env=env)

    wait_until(lambda: status(old.proposal_id) == "expired", what="the old proposal expired")
    assert row(database_url, "SELECT decided_by FROM proposals WHERE id = %s", old.proposal_id) == (
        "review-expiry",
    )
    assert statuses(old.proposal_id) == [("retracted",)]
    for rid in old.record_ids:  # its episode and its fact, retracted by review-expiry
        assert live.get(rid, WRITER).status.value == "retracted"
        last = live.audit(rid, WRITER).entries[-1]
        assert (last.action, last.actor, last.details["reason"]) == ("review", "review-expiry", "expired")
    # later ticks of the entry find nothing more to expire: the young proposal is untouched
    wait_until(
        lambda: (
            re.search(r"membrane\.review_expiry\[[^]]+\] succeeded in [^:]+: \{'expired': 0\}", worker.text())
            is not None
        ),
        what="a later tick of review-expiry",
        timeout=60,
    )
    assert status(young.proposal_id) == "pending"
    assert statuses(young.proposal_id) == [("proposed",)]
    assert all(live.get(rid, WRITER).status.value == "proposed" for rid in young.record_ids)
    assert [e.actor for e in live.audit(young.record_ids[1], WRITER).entries] == ["model"]
    assert observe("Bob", "Rome").fact == "tombstoned"  # RFC 5.4: the expired triple stays out
    assert observe("Ann", "Oslo").fact == "corroborated"  # control: the young one still waits
