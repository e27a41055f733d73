"""The Python SDK's review calls (RFC 5.7) against the live API: a reviewed key's capture is
proposed and left out of retrieval until a reviewer key approves it; the queue and its pages;
reject, amend and a batch of decisions; who may decide; the async client.

How the SDK writes the queue's query and a decision's body is checked on
``httpx.MockTransport``; what the server answers, on the real one.
"""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import Iterator
from typing import Any

import httpx
import pytest
from membrane_client import (
    AsyncClient,
    Client,
    DecideResult,
    Decision,
    DecisionResult,
    Forbidden,
    InvalidInput,
    NotFound,
    RevisionRefused,
)

from tests.support.api import ServeFn

SCOPE = "review-a"
ACCESS = {"read_scopes": [SCOPE], "write_scopes": [SCOPE], "max_sensitivity": "low"}
KEYS = {
    # a model's key: every write it makes is proposed
    "model-key": {**ACCESS, "actor": "model", "review": "required"},
    # a trusted writer, and a reviewer that decides proposals
    "writer-key": {**ACCESS, "actor": "writer"},
    "reviewer-key": {**ACCESS, "actor": "reviewer", "reviewer": True},
}


def fact(subject: str, predicate: str, obj: str) -> dict[str, Any]:
    return {
        "source_kind": "observation",
        "scope": SCOPE,
        "content": {"subject": subject, "predicate": predicate, "object": obj},
    }


def facts(client: Client, query: str, **extra: Any) -> dict[uuid.UUID, str]:
    """The facts a retrieval returns, with their status."""
    found = client.retrieve(query, scopes=[SCOPE], limit=50, memory_types=["semantic"], **extra)
    return {r.id: r.status for r in found.records}


@pytest.fixture
def keyed(serve: ServeFn) -> Iterator[tuple[Client, Client, Client]]:
    """``(model, writer, reviewer)`` clients of one live server with the keys above."""
    url = str(serve(keys=KEYS).base_url)
    clients = [Client(url, api_key=key, timeout=30.0, backoff=0.01) for key in KEYS]
    try:
        yield clients[0], clients[1], clients[2]
    finally:
        for client in clients:
            client.close()


def test_a_reviewed_capture_is_retrievable_only_once_approved(keyed: tuple[Client, Client, Client]) -> None:
    model, writer, reviewer = keyed
    trusted = writer.capture(fact("acme-api", "runs_on", "Python 3.12"), wait=10).raise_for_error()
    assert trusted.proposal_id is None and trusted.fact == "created"
    kept = trusted.record_ids[1]
    proposed = model.capture(fact("acme-api", "deploys_to", "eu-west-1"), wait=10).raise_for_error()
    assert proposed.proposal_id is not None and proposed.fact == "created"
    episode, fact_id = proposed.record_ids

    # proposed: absent from retrieval, beside the trusted fact in the same answer (the control)
    seen = facts(writer, "acme-api")
    assert kept in seen and fact_id not in seen
    asked = facts(writer, "acme-api", include_proposed=True)
    assert asked[fact_id] == "proposed" and asked[kept] == "active"
    assert writer.get(fact_id).status == "proposed"  # by id: with its status
    listed = {r.id for r in writer.list_records(scope=SCOPE, status="proposed").records}
    assert {episode, fact_id} <= listed and kept not in listed
    default = {r.id for r in writer.list_records(scope=SCOPE).records}
    assert kept in default and fact_id not in default
    (counts,) = writer.list_scopes().scopes
    assert counts.scope == SCOPE and counts.proposed >= 2 and counts.active >= 2

    # the queue, as the reviewer sees it
    page = reviewer.review_queue(scopes=SCOPE)
    (entry,) = page.entries
    assert page.next_cursor is None
    assert (entry.proposal_id, entry.proposed_by, entry.source) == (proposed.proposal_id, "model", "capture")
    assert entry.fact is not None and entry.fact.id == fact_id and entry.fact.status == "proposed"
    assert {episode, fact_id} <= {r.id for r in entry.records}
    assert episode in {r.id for r in entry.source_episodes}
    assert entry.conflicts == [] and entry.corroborations == 0 and entry.expires_at > entry.created_at

    # only a reviewer key reads the queue or decides: the proposer and a trusted writer are refused
    for refused in (model, writer):
        with pytest.raises(Forbidden) as forbidden:
            refused.approve(proposed.proposal_id)
        assert forbidden.value.status == 403
        with pytest.raises(Forbidden):
            refused.review_queue()
    assert fact_id not in facts(writer, "acme-api")  # the refusals changed nothing

    approved = reviewer.approve(proposed.proposal_id, rationale="checked the deploy config")
    assert isinstance(approved, DecisionResult) and approved.outcome == "approved"
    assert approved.error is None and set(approved.record_ids) >= {episode, fact_id}
    seen = facts(writer, "acme-api")
    assert seen[fact_id] == "active" and seen[kept] == "active"
    assert reviewer.review_queue(scopes=SCOPE).entries == []
    last = writer.audit(fact_id).entries[-1]
    assert (last.action, last.actor, last.rationale) == ("review", "reviewer", "checked the deploy config")

    # decided once: a second decision is refused, naming the outcome
    with pytest.raises(RevisionRefused) as again:
        reviewer.reject(proposed.proposal_id)
    assert "approved" in again.value.message
    assert writer.get(fact_id).status == "active"


def test_reject_amend_and_a_batch_of_decisions(keyed: tuple[Client, Client, Client]) -> None:
    model, writer, reviewer = keyed
    wrong = model.capture(fact("billing", "runs_on", "Perl 5"), wait=10).raise_for_error()
    typo = model.capture(fact("billing", "owned_by", "team-paymnets"), wait=10).raise_for_error()
    assert wrong.proposal_id is not None and typo.proposal_id is not None

    rejected = reviewer.reject(wrong.proposal_id, rationale="a poisoned page")
    assert rejected.outcome == "rejected"
    assert writer.get(wrong.record_ids[1]).status == "retracted"
    # tombstoned: the same triple is not proposed again; another object is (the control)
    assert model.capture(fact("billing", "runs_on", "Perl 5"), wait=10).fact == "tombstoned"
    other = model.capture(fact("billing", "runs_on", "Rust"), wait=10)
    assert other.fact == "created" and other.proposal_id is not None

    amended = reviewer.amend(typo.proposal_id, {"object": "team-payments"}, rationale="a typo")
    assert amended.outcome == "amended"
    new = amended.record_ids[-1]
    payload = writer.get(new).payload or {}
    assert (payload["subject"], payload["predicate"], payload["object"]) == (
        "billing",
        "owned_by",
        "team-payments",
    )
    seen = facts(writer, "billing")
    assert seen.get(new) == "active" and typo.record_ids[1] not in seen

    # one call, several decisions: each applied or refused on its own, in input order
    missing = uuid.uuid4()
    out = reviewer.decide(
        [
            Decision(proposal_id=missing, decision="approve"),
            {"proposal_id": str(other.proposal_id), "decision": "approve", "rationale": "batch"},
            Decision(proposal_id=typo.proposal_id, decision="reject"),
        ]
    )
    assert isinstance(out, DecideResult)
    assert [r.proposal_id for r in out.results] == [missing, other.proposal_id, typo.proposal_id]
    assert [r.outcome for r in out.results] == [None, "approved", None]
    assert [r.error.code if r.error else None for r in out.results] == [
        "not_found",
        None,
        "revision_refused",
    ]
    with pytest.raises(NotFound):
        out.results[0].raise_for_error()
    assert facts(writer, "billing").get(other.record_ids[1]) == "active"
    with pytest.raises(InvalidInput):
        reviewer.decide([])  # 1 to 1,000 decisions


def test_an_approval_beside_a_conflicting_fact_takes_a_mode(keyed: tuple[Client, Client, Client]) -> None:
    model, writer, reviewer = keyed
    old = writer.capture(fact("ann", "lives_in", "Oslo"), wait=10).record_ids[1]
    proposed = model.capture(fact("ann", "lives_in", "Rome"), wait=10)
    assert proposed.proposal_id is not None
    (entry,) = reviewer.review_queue().entries
    assert [c.id for c in entry.conflicts] == [old]
    with pytest.raises(InvalidInput) as needs:
        reviewer.approve(proposed.proposal_id)
    assert needs.value.details[0]["field"] == "mode"
    assert reviewer.approve(proposed.proposal_id, mode="replace").outcome == "approved"
    assert writer.get(old).status == "retracted"
    assert writer.get(proposed.record_ids[1]).status == "active"


def test_the_queue_by_pages_and_by_corroboration(keyed: tuple[Client, Client, Client]) -> None:
    model, writer, reviewer = keyed
    # one capture at a time: the captures of one batch share their time, and ties go by id
    ops = [model.capture(fact("svc", "uses", f"lib-{i}"), wait=10) for i in range(3)]
    proposals = [op.proposal_id for op in ops]
    assert None not in proposals and len(set(proposals)) == 3
    # a trusted capture of a pending fact corroborates it instead of writing its own
    again = writer.capture(fact("svc", "uses", "lib-2"), wait=10)
    assert again.fact == "corroborated" and again.record_ids[1] == ops[2].record_ids[1]

    first = reviewer.review_queue(limit=2)
    assert [e.proposal_id for e in first.entries] == proposals[:2]  # oldest first
    assert first.next_cursor is not None
    rest = reviewer.review_queue(limit=2, cursor=first.next_cursor)
    assert [e.proposal_id for e in rest.entries] == proposals[2:] and rest.next_cursor is None
    assert [e.proposal_id for e in reviewer.iter_review(limit=2)] == proposals  # both pages

    ranked = list(reviewer.iter_review(order="corroboration", limit=2))
    assert ranked[0].proposal_id == proposals[2]
    assert (ranked[0].corroborations, ranked[0].corroborators) == (1, ["writer"])
    assert {e.proposal_id for e in ranked} == set(proposals)
    with pytest.raises(Forbidden):
        reviewer.review_queue(scopes=["elsewhere"])  # beyond the key's scopes (RFC 7.2)
    with pytest.raises(InvalidInput):
        reviewer.review_queue(cursor="not a cursor")


def test_async_review(serve: ServeFn) -> None:
    url = str(serve(keys=KEYS).base_url)

    async def main() -> None:
        async with (
            AsyncClient(url, api_key="model-key", timeout=30.0, backoff=0.01) as model,
            AsyncClient(url, api_key="reviewer-key", timeout=30.0, backoff=0.01) as reviewer,
        ):
            ops = await model.capture_many([fact("queue", "holds", f"job-{i}") for i in range(3)], wait=10)
            first, second, third = (op.proposal_id for op in ops)
            assert first is not None and second is not None and third is not None
            page = await reviewer.review_queue(scopes=[SCOPE], limit=2)
            assert len(page.entries) == 2 and page.next_cursor is not None
            seen = [e.proposal_id async for e in reviewer.iter_review(scopes=[SCOPE], limit=2)]
            assert seen[:2] == [e.proposal_id for e in page.entries]
            assert sorted(seen) == sorted([first, second, third])
            approved = await reviewer.approve(first)
            assert approved.outcome == "approved"
            assert (await reviewer.get(ops[0].record_ids[1])).status == "active"
            assert (await reviewer.reject(second)).outcome == "rejected"
            with pytest.raises(Forbidden):
                await model.approve(third)
            with pytest.raises(RevisionRefused):
                await reviewer.approve(first)

    asyncio.run(main())


# -- the query and the body, without a server ---------------------------------------------------


def test_the_queue_query_and_the_decision_bodies() -> None:
    seen: list[httpx.Request] = []
    proposal = uuid.uuid4()

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/v1/review":
            return httpx.Response(200, json={"entries": [], "next_cursor": None})
        body = json.loads(request.content)
        first = body["decisions"][0]
        if first["decision"] == "reject":
            error = {"code": "revision_refused", "message": "already approved", "details": []}
            return httpx.Response(
                200, json={"results": [{"proposal_id": first["proposal_id"], "error": error}]}
            )
        result = {"proposal_id": first["proposal_id"], "outcome": "approved", "record_ids": []}
        return httpx.Response(200, json={"results": [result]})

    with Client("http://127.0.0.1:9", transport=httpx.MockTransport(handler)) as client:
        client.review_queue(scopes=["a", "b"], order="corroboration", limit=5)
        client.review_queue()
        approved = client.approve(proposal, mode="beside", rationale="seen it")
        client.amend(proposal, {"object": "x"}, evidence=[{"kind": "artifact", "ref": "doc"}])
        with pytest.raises(RevisionRefused) as refused:
            client.reject(proposal)
    params = seen[0].url.params
    assert params.get_list("scope") == ["a", "b"] and params["order"] == "corroboration"
    assert params["limit"] == "5" and "cursor" not in params
    assert seen[1].url.params.get("scope") is None
    bodies = [json.loads(r.content) for r in seen[2:]]
    assert bodies[0] == {
        "decisions": [
            {"proposal_id": str(proposal), "decision": "approve", "mode": "beside", "rationale": "seen it"}
        ]
    }
    assert bodies[1]["decisions"][0] == {
        "proposal_id": str(proposal),
        "decision": "amend",
        "record": {"object": "x"},
        "evidence": [{"kind": "artifact", "ref": "doc"}],
    }
    assert all("Idempotency-Key" not in r.headers for r in seen)
    assert approved.outcome == "approved" and refused.value.code == "revision_refused"
