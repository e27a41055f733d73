"""Review of proposed memories against real Postgres (RFC 5.7): what is proposed, where it is
left out, corroboration, decisions, no self-approval, expiry, and extraction under review."""

from __future__ import annotations

import uuid
from datetime import timedelta
from typing import Any

import pytest

from membrane_core import Membrane, Settings, errors
from membrane_core.jobs.extract import ExtractionService
from membrane_core.providers import DeterministicExtractor
from membrane_core.storage.db import Database
from membrane_core.storage.records import WorkOptions
from membrane_core.testing import FakeClock
from membrane_core.trust import TrustPolicy
from tests.support.sql import rows

#: a model's key: its writes need review (RFC 5.7)
MODEL = TrustPolicy(actor="model", review_required=True)
#: a trusted writer
WRITER = TrustPolicy(actor="writer")
#: a person who decides proposals
REVIEWER = TrustPolicy(actor="reviewer", reviewer=True)
OTHER_REVIEWER = TrustPolicy(actor="second-reviewer", reviewer=True)


def observe(m: Membrane, s: str, o: str, trust: TrustPolicy, *, p: str = "lives in") -> Any:
    return m.captures.capture_many(
        [
            {
                "source_kind": "observation",
                "scope": "a",
                "content": {"subject": s, "predicate": p, "object": o},
            }
        ],
        trust,
    )[0]


def found(m: Membrane, query: str, trust: TrustPolicy = WRITER, **extra: Any) -> dict[uuid.UUID, str]:
    res = m.retrieve({"query": query, "scopes": ["a"], "limit": 50, **extra}, trust)
    return {r.id: r.status.value for r in res.records}


def decide(m: Membrane, trust: TrustPolicy, proposal: uuid.UUID, decision: str, **extra: Any) -> Any:
    out = m.review.decide({"decisions": [{"proposal_id": proposal, "decision": decision, **extra}]}, trust)
    return out.results[0]


def test_a_reviewed_capture_is_proposed_and_left_out_of_default_reads(membrane: Membrane) -> None:
    trusted = observe(membrane, "Ann", "Oslo", WRITER)
    proposed = observe(membrane, "Bob", "Rome", MODEL)
    assert trusted.proposal_id is None and proposed.proposal_id is not None
    episode, fact = proposed.record_ids
    assert membrane.get(fact, WRITER).status.value == "proposed"  # by id: with its status
    seen = found(membrane, "lives in Oslo Rome Ann Bob")
    assert trusted.record_ids[1] in seen  # positive control in the same answer
    assert fact not in seen and episode not in seen
    flagged = found(membrane, "lives in Oslo Rome Ann Bob", include_proposed=True)
    assert flagged[fact] == "proposed" and flagged[trusted.record_ids[1]] == "active"
    listed = [r.id for r in membrane.listing.records({"scopes": ["a"]}, WRITER).records]
    assert trusted.record_ids[1] in listed and fact not in listed
    asked = [
        r.id for r in membrane.listing.records({"scopes": ["a"], "statuses": ["proposed"]}, WRITER).records
    ]
    # the episode, the fact and the entities its mentions made, all proposed; none trusted
    assert {episode, fact} < set(asked) and not set(trusted.record_ids) & set(asked)


def test_approval_makes_it_active_from_then_on(membrane: Membrane, clock: FakeClock) -> None:
    proposed = observe(membrane, "Bob", "Rome", MODEL)
    fact = proposed.record_ids[1]
    clock.advance(seconds=10)
    before = clock()
    clock.advance(seconds=10)
    queue = membrane.review.queue({}, REVIEWER)
    entry = next(e for e in queue.entries if e.proposal_id == proposed.proposal_id)
    assert entry.fact is not None and entry.fact.id == fact and entry.proposed_by == "model"
    assert {r.id for r in entry.records} > set(proposed.record_ids)  # and the entities it made
    out = decide(membrane, REVIEWER, proposed.proposal_id, "approve", rationale="checked the source")
    assert out.outcome == "approved" and out.error is None
    assert fact in found(membrane, "Bob lives in Rome")
    # RFC 5.6, 5.7: as of a moment before the approval it was only proposed
    assert fact not in found(membrane, "Bob lives in Rome", as_of=before.isoformat())
    assert (
        found(membrane, "Bob lives in Rome", as_of=before.isoformat(), include_proposed=True)[fact]
        == "proposed"
    )
    audit = membrane.audit(fact, WRITER)
    assert [(e.action, e.actor) for e in audit.entries][-1] == ("review", "reviewer")
    again = decide(membrane, OTHER_REVIEWER, proposed.proposal_id, "reject")
    assert again.error is not None and again.error.code == "revision_refused"


def test_rejection_retracts_and_the_fact_is_never_proposed_again(membrane: Membrane) -> None:
    first = observe(membrane, "Bob", "Rome", MODEL)
    out = decide(membrane, REVIEWER, first.proposal_id, "reject", rationale="poisoned page")
    assert out.outcome == "rejected"
    assert membrane.get(first.record_ids[1], WRITER).status.value == "retracted"
    again = observe(membrane, "Bob", "Rome", MODEL)
    assert again.fact == "tombstoned" and len(again.record_ids) == 1
    control = observe(membrane, "Bob", "Paris", MODEL)  # positive control: another object
    assert control.fact == "created"


def test_corroboration_adds_evidence_and_no_second_proposal(membrane: Membrane, database_url: str) -> None:
    first = observe(membrane, "Bob", "Rome", MODEL)
    second = observe(membrane, "Bob", "Rome", TrustPolicy(actor="model-2", review_required=True))
    third = observe(membrane, "Bob", "Rome", WRITER)
    assert second.fact == third.fact == "corroborated"
    assert second.proposal_id == first.proposal_id
    assert second.record_ids[1] == third.record_ids[1] == first.record_ids[1]
    assert rows(database_url, "SELECT count(*) FROM memory_records WHERE type = 'semantic'") == [(1,)]
    entry = membrane.review.queue({}, REVIEWER).entries[0]
    assert entry.corroborations == 2 and set(entry.corroborators) == {"model-2", "writer"}
    assert {e.id for e in entry.source_episodes} >= {first.record_ids[0], third.record_ids[0]}
    # a corroborator decides nothing it corroborated; the proposer neither
    writer_reviewer = TrustPolicy(actor="writer", reviewer=True)
    refused = decide(membrane, writer_reviewer, first.proposal_id, "approve")
    assert refused.error is not None and refused.error.code == "forbidden"
    assert decide(membrane, REVIEWER, first.proposal_id, "approve").outcome == "approved"


def test_no_self_approval_and_only_reviewers_decide(membrane: Membrane) -> None:
    proposed = observe(
        membrane, "Bob", "Rome", TrustPolicy(actor="model", review_required=True, reviewer=True)
    )
    own = decide(membrane, TrustPolicy(actor="model", reviewer=True), proposed.proposal_id, "approve")
    assert own.error is not None and own.error.code == "forbidden"
    with pytest.raises(errors.Forbidden):
        decide(membrane, WRITER, proposed.proposal_id, "approve")
    other = observe(membrane, "Ann", "Oslo", TrustPolicy(actor="model-2", review_required=True))
    mine = membrane.review.queue({}, TrustPolicy(actor="model", reviewer=True)).entries
    assert [e.proposal_id for e in mine] == [other.proposal_id]  # its own is not there; another's is
    hidden = decide(
        membrane,
        TrustPolicy(actor="r", reviewer=True, read_scopes=frozenset({"b"})),
        proposed.proposal_id,
        "approve",
    )
    assert hidden.error is not None and hidden.error.code == "not_found"
    assert decide(membrane, REVIEWER, proposed.proposal_id, "approve").outcome == "approved"  # control


def test_approval_beside_or_replacing_a_conflicting_fact(membrane: Membrane) -> None:
    old = observe(membrane, "Bob", "Oslo", WRITER).record_ids[1]
    p1 = observe(membrane, "Bob", "Rome", MODEL)
    needs = decide(membrane, REVIEWER, p1.proposal_id, "approve")
    assert needs.error is not None and needs.error.details[0]["field"] == "mode"
    entry = membrane.review.queue({}, REVIEWER).entries[0]
    assert [c.id for c in entry.conflicts] == [old]
    assert decide(membrane, REVIEWER, p1.proposal_id, "approve", mode="replace").outcome == "approved"
    assert membrane.get(old, WRITER).status.value == "retracted"
    assert membrane.get(p1.record_ids[1], WRITER).status.value == "active"
    lineage = membrane.listing.lineage(p1.record_ids[1], WRITER)
    assert any(e.kind == "supersedes" and e.target_id == old for e in lineage.edges)
    p2 = observe(membrane, "Bob", "Paris", MODEL)
    assert decide(membrane, REVIEWER, p2.proposal_id, "approve", mode="beside").outcome == "approved"
    assert membrane.get(p1.record_ids[1], WRITER).status.value == "active"
    assert membrane.get(p2.record_ids[1], WRITER).status.value == "active"


def test_amend_makes_the_reviewers_version_active(membrane: Membrane) -> None:
    proposed = observe(membrane, "Bob", "Rome", MODEL)
    episode, fact = proposed.record_ids
    out = decide(
        membrane, REVIEWER, proposed.proposal_id, "amend", record={"object": "Milan"}, rationale="typo"
    )
    assert out.outcome == "amended"
    new = out.record_ids[-1]
    assert membrane.get(fact, WRITER).status.value == "retracted"
    assert membrane.get(new, WRITER).status.value == "active"
    assert membrane.get(episode, WRITER).status.value == "active"
    assert new in found(membrane, "Bob lives in Milan")
    assert fact not in found(membrane, "Bob lives in Rome Milan")


def test_undecided_proposals_expire_as_rejected(membrane: Membrane, clock: FakeClock) -> None:
    old = observe(membrane, "Bob", "Rome", MODEL)
    clock.advance(seconds=membrane.settings.review_ttl - 60)
    young = observe(membrane, "Ann", "Oslo", MODEL)
    clock.advance(seconds=120)
    assert membrane.review.expire(100).expired == 1
    assert membrane.get(old.record_ids[1], WRITER).status.value == "retracted"
    assert membrane.get(young.record_ids[1], WRITER).status.value == "proposed"  # control
    entries = membrane.audit(old.record_ids[1], WRITER).entries
    assert entries[-1].actor == "review-expiry" and entries[-1].details["reason"] == "expired"
    assert observe(membrane, "Bob", "Rome", MODEL).fact == "tombstoned"


@pytest.fixture
def reviewed(settings: Settings, db: Database, clock: FakeClock) -> Membrane:
    work = WorkOptions(extract=True, review_extractions=True, review_ttl=timedelta(days=1))
    return Membrane(settings, database=db, clock=clock, work=work)


def extract(m: Membrane) -> dict[str, Any]:
    svc = ExtractionService(
        m.db,
        DeterministicExtractor,
        policy=m.policy,
        clock=m.clock,  # type: ignore[arg-type]
        work=m.work,
        owner=lambda: "test-worker",
    )
    return svc.run_batch()


def episode(m: Membrane, text: str) -> uuid.UUID:
    return m.captures.capture_many(
        [{"source_kind": "event", "scope": "a", "content": {"text": text}}], WRITER
    )[0].record_ids[0]


def test_extractions_are_proposed_and_a_rejected_one_not_again(reviewed: Membrane, database_url: str) -> None:
    episode(reviewed, "Ann works at Acme.")
    assert extract(reviewed)["created"] == 1
    entry = reviewed.review.queue({}, REVIEWER).entries[0]
    assert entry.source == "extraction" and entry.fact is not None
    assert entry.fact.status.value == "proposed"
    assert decide(reviewed, REVIEWER, entry.proposal_id, "reject").outcome == "rejected"
    episode(reviewed, "Ann works at Acme. Ann lives in Oslo.")
    out = extract(reviewed)
    assert out["tombstoned"] == 1 and out["created"] == 1  # works_at not again; lives_in is new
    queue = reviewed.review.queue({}, REVIEWER).entries
    assert [e.fact.payload["predicate"] for e in queue if e.fact] == ["lives_in"]
    facts = rows(
        database_url, "SELECT fact_predicate, status FROM memory_records WHERE type = 'semantic' ORDER BY 1"
    )
    assert facts == [("lives_in", "proposed"), ("works_at", "retracted")]


def test_a_proposed_episode_feeds_extraction_only_once_approved(
    reviewed: Membrane, database_url: str
) -> None:
    proposed = reviewed.captures.capture_many(
        [{"source_kind": "event", "scope": "a", "content": {"text": "Ann works at Acme."}}], MODEL
    )[0]
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE kind = 'extract'") == [(0,)]
    assert decide(reviewed, REVIEWER, proposed.proposal_id, "approve").outcome == "approved"
    assert rows(database_url, "SELECT count(*) FROM work_items WHERE kind = 'extract'") == [(1,)]
    assert extract(reviewed)["created"] == 1


def test_a_reviewed_key_revises_nothing_and_a_proposal_is_settled_only_by_review(membrane: Membrane) -> None:
    trusted = observe(membrane, "Ann", "Oslo", WRITER).record_ids[1]
    proposed = observe(membrane, "Bob", "Rome", MODEL)
    body = {
        "rationale": "poisoned page",
        "record": {"object": "poison"},
        "evidence": [{"kind": "observation", "ref": "page"}],
    }
    for kind, target, extra in (
        ("supersede", trusted, body),
        ("retract", trusted, {"rationale": "r"}),
        ("contest", trusted, {"rationale": "r"}),
        ("reinforce", trusted, {}),
        ("supersede", proposed.record_ids[1], body),  # its own proposal neither
    ):
        with pytest.raises(errors.Forbidden, match="need review"):
            membrane.revisions.apply(kind, target, extra, MODEL)
    with pytest.raises(errors.Forbidden, match="need review"):
        membrane.inbox.submit_revision("retract", trusted, {"rationale": "r"}, MODEL)
    # a trusted writer may not settle a proposal by a revision either
    with pytest.raises(errors.RevisionRefused, match="proposed"):
        membrane.revisions.apply("supersede", proposed.record_ids[1], body, WRITER)
    with pytest.raises(errors.RevisionRefused, match="proposed"):
        membrane.inbox.submit_revision("retract", proposed.record_ids[1], {"rationale": "r"}, WRITER)
    assert membrane.get(trusted, WRITER).status.value == "active"
    # positive control: the trusted writer revises the trusted fact
    new = membrane.revisions.apply("supersede", trusted, {**body, "record": {"object": "Bergen"}}, WRITER)[0]
    assert membrane.get(new, WRITER).status.value == "active"


def test_the_queue_holds_only_what_the_reviewer_may_decide(membrane: Membrane) -> None:
    proposed = observe(membrane, "Bob", "Rome", MODEL)
    in_b = membrane.captures.capture_many(
        [{"source_kind": "event", "scope": "b", "content": {"text": "deploy note"}}], MODEL
    )[0]
    elsewhere = TrustPolicy(actor="r1", reviewer=True, write_scopes=frozenset({"b"}))
    # reads every scope, writes only b: b's proposal, and not a's, in the same page
    assert [e.proposal_id for e in membrane.review.queue({}, elsewhere).entries] == [in_b.proposal_id]
    here = TrustPolicy(actor="r2", reviewer=True, write_scopes=frozenset({"a", "b"}))
    assert [e.proposal_id for e in membrane.review.queue({}, here).entries] == [
        proposed.proposal_id,
        in_b.proposal_id,
    ]


def test_a_rejected_entitys_identifier_passes_to_the_next_entity(
    membrane: Membrane, database_url: str
) -> None:
    def mention(trust: TrustPolicy) -> Any:
        body = {
            "source_kind": "event",
            "scope": "a",
            "content": {"text": "met Octo", "entities": ["Octo | github:octocat"]},
        }
        return membrane.captures.capture_many([body], trust)[0]

    proposed = mention(MODEL)
    assert decide(membrane, REVIEWER, proposed.proposal_id, "reject").outcome == "rejected"
    trusted = mention(WRITER)  # refused by the identifier's key before
    holder = "SELECT r.id, r.status FROM entity_identifiers d JOIN memory_records r ON r.id = d.record_id"
    [(entity, status)] = rows(database_url, holder + " WHERE d.value = 'octocat'")
    assert status == "active" and trusted.entities is not None and trusted.entities["created"] == 1
    linked = rows(
        database_url, f"SELECT target_id FROM relations WHERE source_id = '{trusted.record_ids[0]}'"
    )
    assert linked == [(entity,)]
    assert mention(WRITER).entities["linked"] == 1  # positive control: the live one is found again


def test_a_proposed_capture_beside_a_trusted_one_of_its_key_in_one_batch_is_known(
    membrane: Membrane, database_url: str
) -> None:
    body = {
        "source_kind": "observation",
        "scope": "a",
        "content": {"subject": "Bob", "predicate": "p", "object": "Rome"},
    }
    plans = [membrane.captures.plan(body, WRITER), membrane.captures.plan(body, MODEL)]
    trusted, proposed = membrane.captures.write_plans(plans)
    assert trusted.fact == "created" and proposed.fact == "known"
    fact = trusted.record_ids[1]
    sources = rows(database_url, f"SELECT target_id FROM relations WHERE source_id = '{fact}'")
    assert sources == [(trusted.record_ids[0],)]  # the proposed episode is no evidence of it
    assert membrane.get(fact, WRITER).status.value == "active"
