"""Lists (RFC 10.7) on real Postgres: keyset pages, the filters retrieval applies, trust and
redaction, as-of reads, lineage, operations, the work queue and scopes."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import psycopg
import pytest

from membrane_core import Membrane, errors
from membrane_core.enums import Sensitivity
from membrane_core.listing.results import RecordPage
from membrane_core.models import ProvenanceSource
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy
from tests.support.records import bury

EVIDENCE = [{"kind": "observation", "ref": "ticket 42"}]
#: Reads scope ``a`` up to ``low``: sees ``medium`` redacted, ``high`` not at all.
LOW = TrustPolicy(read_scopes=frozenset({"a"}), max_sensitivity=Sensitivity.LOW, actor="low")
FULL = TrustPolicy(actor="full")


def fact(
    m: Membrane, s: str, o: str, *, scope: str = "a", sensitivity: str = "low", **extra: Any
) -> uuid.UUID:
    """The semantic fact of one observation."""
    res = m.capture(
        {
            "source_kind": "observation",
            "scope": scope,
            "sensitivity": sensitivity,
            "content": {"subject": s, "predicate": "lives in", "object": o},
            **extra,
        }
    )
    return res.record_ids[1]


def event(m: Membrane, text: str, *, scope: str = "a", sensitivity: str = "low", **extra: Any) -> uuid.UUID:
    res = m.capture(
        {
            "source_kind": "event",
            "scope": scope,
            "sensitivity": sensitivity,
            "content": {"text": text},
            **extra,
        }
    )
    return res.record_ids[0]


def ids(page: Any) -> list[uuid.UUID]:
    return [r.id for r in page.records]


def every_page(m: Membrane, trust: TrustPolicy, **filters: Any) -> list[list[uuid.UUID]]:
    pages, cursor = [], None
    while True:
        page = m.listing.records({**filters, **({"cursor": cursor} if cursor else {})}, trust)
        pages.append(ids(page))
        cursor = page.next_cursor
        if cursor is None:
            return pages


def test_pages_hold_every_record_once_newest_first(membrane: Membrane, clock: FakeClock) -> None:
    made = []
    for i in range(7):
        clock.advance(seconds=1)
        made.append(event(membrane, f"event {i}"))
    pages = every_page(membrane, FULL, scopes=["a"], limit=3)
    assert [len(p) for p in pages] == [3, 3, 1]
    assert [rid for p in pages for rid in p] == made[::-1]


def test_pages_stay_stable_under_concurrent_writes(membrane: Membrane, clock: FakeClock) -> None:
    old = []
    for i in range(6):
        clock.advance(seconds=1)
        old.append(event(membrane, f"old {i}"))
    first = membrane.listing.records({"scopes": ["a"], "limit": 2}, FULL)
    assert ids(first) == old[::-1][:2]
    for i in range(5):  # newer records land while the client pages
        clock.advance(seconds=1)
        event(membrane, f"new {i}")
    seen, cursor = ids(first), first.next_cursor
    while cursor:
        page = membrane.listing.records({"scopes": ["a"], "limit": 2, "cursor": cursor}, FULL)
        seen += ids(page)
        cursor = page.next_cursor
    assert seen == old[::-1]  # no record twice, none skipped, none of the newer ones


def test_every_scope_and_several_scopes_merge_in_order(membrane: Membrane, clock: FakeClock) -> None:
    made = []
    for i, scope in enumerate(["a", "b", "c", "a", "c", "b"]):
        clock.advance(seconds=1)
        made.append((scope, event(membrane, f"e{i}", scope=scope)))
    assert [rid for p in every_page(membrane, FULL, limit=4) for rid in p] == [r for _, r in made[::-1]]
    two = [rid for p in every_page(membrane, FULL, scopes=["a", "b"], limit=2) for rid in p]
    assert two == [r for s, r in made[::-1] if s in ("a", "b")]


def test_low_key_sees_medium_redacted_and_not_high_or_other_scopes(membrane: Membrane) -> None:
    low = event(membrane, "plain", sensitivity="low")
    medium = event(membrane, "secret plan", sensitivity="medium")
    high = event(membrane, "very secret", sensitivity="high")
    other = event(membrane, "elsewhere", scope="b")
    full = {r.id: r for r in membrane.listing.records({}, FULL).records}
    assert {low, medium, high, other} <= set(full)  # positive control: a full key sees them all
    seen = {r.id: r for r in membrane.listing.records({}, LOW).records}
    assert set(seen) == {low, medium}
    assert seen[medium].redacted and seen[medium].payload is None and seen[medium].summary is None
    assert not seen[low].redacted and seen[low].payload is not None
    with pytest.raises(errors.Forbidden):
        membrane.listing.records({"scopes": ["b"]}, LOW)  # RFC 7.2: asking for more is 403


def test_retracted_only_on_request(membrane: Membrane) -> None:
    kept, gone = fact(membrane, "ann", "paris"), fact(membrane, "bob", "rome")
    membrane.revisions.retract(gone, {"rationale": "wrong"}, FULL)
    default = ids(membrane.listing.records({"types": ["semantic"]}, FULL))
    assert kept in default and gone not in default
    asked = membrane.listing.records({"types": ["semantic"], "statuses": ["retracted"]}, FULL)
    assert ids(asked) == [gone] and asked.records[0].status.value == "retracted"


def test_as_of_lists_what_was_believed_then(membrane: Membrane, clock: FakeClock) -> None:
    old = fact(membrane, "ann", "paris")
    clock.advance(hours=1)
    before = clock.now
    clock.advance(hours=1)
    new = membrane.revisions.supersede(
        old, {"record": {"object": "berlin"}, "rationale": "moved", "evidence": EVIDENCE}, FULL
    )
    now_page = membrane.listing.records({"types": ["semantic"]}, FULL)
    assert ids(now_page) == [new]
    then = membrane.listing.records({"types": ["semantic"], "as_of": before.isoformat()}, FULL)
    assert ids(then) == [old]
    assert then.records[0].status.value == "active" and then.records[0].payload["object"] == "paris"


def test_filters(membrane: Membrane, clock: FakeClock, database_url: str) -> None:
    ann = fact(membrane, "Ann", "Paris", tags=["home"])
    clock.advance(hours=1)
    mid = clock.now
    bob = fact(membrane, "Bob", "Rome", sensitivity="medium")
    ep = event(membrane, "tool ran", occurred_at="2025-06-01T00:00:00Z")
    by = lambda **f: set(ids(membrane.listing.records(f, FULL)))  # noqa: E731
    assert by(types=["semantic"]) == {ann, bob}
    assert by(tags=["home"], types=["semantic"]) == {ann}  # the episode carries the tag too
    assert by(subject="  ANN ") == {ann}  # normalised as the fact key is (RFC 3.4)
    assert by(predicate="lives in", subject="bob") == {bob}
    assert by(sensitivities=["medium"], types=["semantic"]) == {bob}
    assert ann not in by(created_after=mid.isoformat()) and bob in by(created_after=mid.isoformat())
    assert by(created_before=mid.isoformat(), types=["semantic"]) == {ann}
    assert by(occurred_before="2025-07-01T00:00:00Z") == {ep}
    thing = event(membrane, "a thing")
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "INSERT INTO relations (source_id, predicate, target_id) VALUES (%s, 'mentions', %s)", (ep, thing)
        )
    assert by(entity=str(thing)) == {ep}


def test_bad_filters_and_foreign_cursors_are_named(membrane: Membrane) -> None:
    for i in range(3):
        event(membrane, f"e{i}")
    page = membrane.listing.records({"limit": 1}, FULL)
    assert page.next_cursor is not None
    with pytest.raises(errors.InvalidInput) as other:
        membrane.listing.records({"limit": 1, "types": ["episodic"], "cursor": page.next_cursor}, FULL)
    assert other.value.details[0]["field"] == "cursor"
    with pytest.raises(errors.InvalidInput) as forged:
        membrane.listing.records({"cursor": "bm90IGEgY3Vyc29y"}, FULL)
    assert forged.value.details[0]["field"] == "cursor"
    with pytest.raises(errors.InvalidInput) as bad:
        membrane.listing.records(
            {
                "limit": 0,
                "entity": "x",
                "created_after": "2026-01-02T00:00:00Z",
                "created_before": "2026-01-01T00:00:00Z",
            },
            FULL,
        )
    assert {"limit"} <= {d["field"] for d in bad.value.details}
    with pytest.raises(errors.InvalidInput) as entity:
        membrane.listing.records({"entity": "not-an-id"}, FULL)
    assert entity.value.details[0]["field"] == "entity"


def test_a_page_stops_at_its_byte_budget_and_goes_on(membrane: Membrane, clock: FakeClock) -> None:
    made = []
    for i in range(4):
        clock.advance(seconds=1)
        made.append(event(membrane, f"event {i} " + "x" * 600))
    page = membrane.listing.records({"limit": 10, "max_bytes": 2048}, FULL)
    assert 1 <= len(page.records) < 4 and page.diagnostics.byte_limit_applied
    assert page.diagnostics.bytes <= 2048 and page.next_cursor is not None
    assert [rid for p in every_page(membrane, FULL, limit=10, max_bytes=2048) for rid in p] == made[::-1]


def test_lineage_of_supersede_merge_fork_and_contest(membrane: Membrane, clock: FakeClock) -> None:
    a1 = fact(membrane, "ann", "paris")
    clock.advance(minutes=1)
    a2 = membrane.revisions.supersede(
        a1,
        {"record": {"object": "berlin"}, "rationale": "she moved", "evidence": EVIDENCE},
        TrustPolicy(actor="alice"),
    )
    b = fact(membrane, "ann", "munich")
    merged = membrane.revisions.merge(
        {
            "record_ids": [str(a2), str(b)],
            "record": {"object": "berlin"},
            "rationale": "same fact",
            "evidence": EVIDENCE,
        },
        FULL,
    )
    variant = membrane.revisions.fork(
        merged, {"rationale": "in winter", "condition": "winter", "evidence": EVIDENCE}, FULL
    )
    rival = fact(membrane, "ann", "rome")
    membrane.revisions.contest(
        merged, {"rationale": "rome says otherwise", "contesting_record_id": str(rival)}, FULL
    )
    lin = membrane.listing.lineage(a1, DEVELOPMENT_POLICY)
    assert {n.id for n in lin.nodes} == {a1, a2, b, merged, variant, rival}
    edges = {(e.kind, e.source_id, e.target_id): e for e in lin.edges}
    assert set(edges) == {
        ("supersedes", a2, a1),
        ("merged_into", a2, merged),
        ("merged_into", b, merged),
        ("forked_from", variant, merged),
        ("contests", rival, merged),
    }
    sup = edges[("supersedes", a2, a1)]
    assert (sup.actor, sup.rationale, sup.at) == ("alice", "she moved", clock.now)
    assert sup.target_status is not None and sup.target_status.value == "retracted"
    assert [(e.kind, e.ref) for e in sup.evidence] == [("observation", "ticket 42")]
    assert edges[("contests", rival, merged)].rationale == "rome says otherwise"
    # the episodes the facts were derived from are no corrections
    assert all(n.type.value == "semantic" for n in lin.nodes)


def test_lineage_leaves_out_what_the_caller_may_not_see(membrane: Membrane) -> None:
    old = fact(membrane, "ann", "paris")
    mid = membrane.revisions.supersede(
        old,
        {"record": {"object": "rome", "sensitivity": "high"}, "rationale": "r1", "evidence": EVIDENCE},
        FULL,
    )
    new = membrane.revisions.supersede(
        mid,
        {"record": {"object": "oslo", "sensitivity": "low"}, "rationale": "r2", "evidence": EVIDENCE},
        FULL,
    )
    full = membrane.listing.lineage(old, FULL)
    assert {n.id for n in full.nodes} == {old, mid, new}  # positive control
    low = membrane.listing.lineage(old, LOW)
    assert {n.id for n in low.nodes} == {old}  # the high record hides the rest of the chain
    assert low.edges == []
    with pytest.raises(errors.NotFound):
        membrane.listing.lineage(mid, LOW)


def test_operations_are_the_callers_own_unless_operator(membrane: Membrane) -> None:
    alice, bob = TrustPolicy(actor="alice"), TrustPolicy(actor="bob")
    mine = membrane.inbox.submit_capture(
        {"source_kind": "event", "scope": "a", "content": {"text": "x"}}, alice
    )
    theirs = membrane.inbox.submit_capture(
        {"source_kind": "event", "scope": "b", "content": {"text": "y"}}, bob
    )
    failed = membrane.inbox.submit_captures(
        [{"source_kind": "event", "scope": "a", "content": "not an object"}], alice
    )[0]
    own = membrane.listing.operations({}, alice)
    assert {o.operation_id for o in own.operations} == {mine.operation_id, failed.operation_id}
    every = membrane.listing.operations({}, DEVELOPMENT_POLICY)
    assert {mine.operation_id, theirs.operation_id} <= {o.operation_id for o in every.operations}
    bad = membrane.listing.operations({"statuses": ["failed"]}, alice).operations
    assert [o.operation_id for o in bad] == [failed.operation_id] and bad[0].error is not None
    scoped = membrane.listing.operations({"scope": "b"}, DEVELOPMENT_POLICY).operations
    assert [o.operation_id for o in scoped] == [theirs.operation_id] and scoped[0].principal == "bob"
    one = membrane.listing.operations({"limit": 1}, alice)
    two = membrane.listing.operations({"limit": 1, "cursor": one.next_cursor}, alice)
    assert one.next_cursor and {o.operation_id for o in one.operations + two.operations} == {
        mine.operation_id,
        failed.operation_id,
    }


def test_work_lists_buried_items_and_requeue_is_idempotent_and_audited(
    membrane: Membrane, database_url: str
) -> None:
    rid = event(membrane, "needs work")
    item = bury(database_url, rid, error="provider timed out")
    work = membrane.listing.work({}, DEVELOPMENT_POLICY)
    decay = next(j for j in work.jobs if j.kind.value == "decay")
    assert decay.buried == 1
    assert [(b.id, b.last_error) for b in work.buried] == [(item, "provider timed out")]
    with pytest.raises(errors.Forbidden):
        membrane.listing.work({}, FULL)  # not an operator
    with pytest.raises(errors.Forbidden):
        membrane.listing.requeue({"ids": [item]}, FULL)
    ops = TrustPolicy(actor="ops", operator=True)
    first = membrane.listing.requeue({"ids": [item, 999_999], "rationale": "provider is back"}, ops)
    assert (first.requeued, first.unchanged) == ([item], [999_999])
    again = membrane.listing.requeue({"ids": [item]}, ops)
    assert (again.requeued, again.unchanged) == ([], [item])
    assert membrane.listing.work({}, DEVELOPMENT_POLICY).buried == []
    entries = [e for e in membrane.audit(rid).entries if e.action == "requeue"]
    assert [(e.actor, e.rationale, e.details["job"]) for e in entries] == [
        ("ops", "provider is back", "decay")
    ]
    assert membrane.audit(rid).chain_valid


def test_scopes_count_what_the_caller_sees(membrane: Membrane) -> None:
    event(membrane, "one")
    event(membrane, "two", sensitivity="medium")
    event(membrane, "three", sensitivity="high")
    event(membrane, "elsewhere", scope="b")
    full = {s.scope: s.records for s in membrane.listing.scopes(FULL).scopes}
    assert full == {"a": 3, "b": 1}
    assert {s.scope: s.records for s in membrane.listing.scopes(LOW).scopes} == {"a": 2}


def test_a_page_runs_its_prepared_generic_plan(membrane: Membrane, clock: FakeClock) -> None:
    """RFC 10.7: a page, first or deep, runs the generic plan of its prepared shape (no call
    plans again), and that plan reads the listing index from the position. The statement a
    page runs is taken from the service, so a change to either shows here."""
    import dataclasses

    from membrane_core.listing.requests import RecordListRequest
    from membrane_core.requests import parse
    from membrane_core.storage import listing as store

    for i in range(30):
        clock.advance(seconds=1)
        event(membrane, f"event {i}")
    req = parse(RecordListRequest, {"scopes": ["a"], "limit": 5})
    policy = FULL.narrow(["a"])
    first = membrane.listing.query(req, policy, clock())
    last = membrane.listing.records(req, FULL).records[-1]
    deep = dataclasses.replace(first, after=store.Position(last.created_at, last.id))
    with membrane.db.reader() as conn:
        for query in (first, deep):
            for _ in range(8):
                assert len(store.records_page(conn, query, lambda *_: True)) == 6
        plans = conn.execute(
            "SELECT statement, generic_plans, custom_plans FROM pg_prepared_statements"
            " WHERE statement LIKE '%%listed(scope)%%'"
        ).fetchall()
        # positive control: both shapes were prepared and ran
        assert len(plans) == 2, plans
        for statement, generic, custom in plans:
            assert generic >= 3 and custom <= 5, (generic, custom, statement[:80])
        # the generic plan of the deep shape; a table this small would be read in full
        conn.execute("SET enable_seqscan = off")
        plan = "\n".join(
            r[0] for r in psycopg.RawCursor(conn).execute("EXPLAIN (GENERIC_PLAN) " + deep.shaped().sql)
        )
        conn.execute("RESET enable_seqscan")
    assert "memory_records_listing" in plan
    assert "Index Cond: ((scope = " in plan and "ROW(created_at, id) < ROW($" in plan, plan


def test_a_pages_json_is_its_views_own(membrane: Membrane, clock: FakeClock) -> None:
    """RFC 10.7: a page is answered as each view's JSON, built without the model: it must be
    byte for byte what the page's model writes, and each record as a read by id shows it."""
    plain = event(
        membrane,
        "café at 9 — naïve ☕",
        tags=["x", "y"],
        metadata={"n": 1, "f": 1.5, "deep": {"a": [1, None]}},
    )
    boxed = {"valid_from": "2020-01-01T00:00:00Z", "valid_to": "2030-01-01T00:00:00Z"}
    old = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "content": {"subject": "ann", "predicate": "lives in", "object": "paris", **boxed},
        }
    ).record_ids[1]
    clock.advance(minutes=1)
    new = membrane.revisions.supersede(
        old, {"record": {"object": "berlin"}, "rationale": "she moved", "evidence": EVIDENCE}, FULL
    )
    variant = membrane.revisions.fork(
        new, {"rationale": "in winter", "condition": "winter", "evidence": EVIDENCE}, FULL
    )
    rival = fact(membrane, "ann", "rome")
    membrane.revisions.contest(
        new, {"rationale": "rome says otherwise", "contesting_record_id": str(rival)}, FULL
    )
    hidden_medium = event(membrane, "secret plan", sensitivity="medium")
    for trust, request in [
        (FULL, {"statuses": ["active", "contested", "retracted"]}),
        (LOW, {"statuses": ["active", "contested", "retracted"]}),
    ]:
        raw = membrane.listing.records_json(request, trust)
        page = RecordPage.model_validate_json(raw)
        assert page.model_dump_json().encode() == raw
        shown = {r.id: r for r in page.records}
        # positive control: the page holds every kind of view the check is about
        assert {plain, old, new, variant, rival, hidden_medium} <= set(shown)
        assert shown[old].validity is not None and shown[new].relations and shown[plain].tags
        assert shown[hidden_medium].redacted is (trust is LOW)
        for rid, view in shown.items():
            by_id = membrane.get(rid, trust)
            assert view.model_dump(exclude={"salience", "score"}) == by_id.model_dump(
                exclude={"salience", "score"}
            )


def test_provenance_is_read_in_the_views_own_form(membrane: Membrane, database_url: str) -> None:
    """RFC 10.7: the statement writes each source as its model dumps it (UTC with ``Z``,
    microseconds only when there are some), so a view passes it on unvalidated."""
    rid = event(membrane, "sourced")
    sources = [
        ("tool_call", "run 7", "sha256:ab", "agent", "2026-03-01T10:00:00.000250+02:00"),
        ("artifact", "doc 9", None, None, "2026-03-01T08:00:00+00:00"),
        ("outcome", "result 3", None, "agent", None),
    ]
    with psycopg.connect(database_url) as conn:
        conn.cursor().executemany(
            "INSERT INTO provenance_sources (record_id, kind, ref, hash, created_by, ts, added_at)"
            " VALUES (%s, %s, %s, %s, %s, %s, now())",
            [(rid, *s) for s in sources],
        )
    # Postgres keeps the instant: the model's form of it in UTC
    wanted = [
        ProvenanceSource(
            kind=k, ref=r, hash=h, created_by=c, timestamp=t and datetime.fromisoformat(t).astimezone(UTC)
        ).model_dump(mode="json")
        for k, r, h, c, t in sources
    ]
    assert wanted[0]["timestamp"] == "2026-03-01T08:00:00.000250Z"  # the model's own form
    assert wanted[1]["timestamp"] == "2026-03-01T08:00:00Z"
    raw = membrane.listing.records_json({"scopes": ["a"]}, FULL)
    page = RecordPage.model_validate_json(raw)
    assert page.model_dump_json().encode() == raw
    [view] = [r for r in page.records if r.id == rid]
    assert view.model_dump(mode="json")["provenance"][-3:] == wanted
    assert membrane.get(rid, FULL).model_dump(mode="json")["provenance"][-3:] == wanted
