"""Capture-time entity resolution against the real store (RFC 3.5)."""

from __future__ import annotations

import threading
import uuid

import psycopg
import pytest

from membrane_core import Membrane
from membrane_core.capture import mentions
from membrane_core.storage import records
from membrane_core.storage.db import Database


def ev(scope: str, text: str = "", **content: object) -> dict:
    return {"source_kind": "event", "scope": scope, "content": {"text": text, **content}}


def entities_named(url: str, scope: str, term: str) -> list[uuid.UUID]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT DISTINCT t.record_id FROM entity_terms t JOIN memory_records r ON r.id = t.record_id"
            " WHERE r.type = 'entity' AND t.scope = %s AND t.term = %s",
            (scope, term),
        ).fetchall()
    return [r[0] for r in rows]


def mentioned(url: str, episode_id: uuid.UUID) -> set[uuid.UUID]:
    with psycopg.connect(url) as conn:
        rows = conn.execute(
            "SELECT target_id FROM relations WHERE source_id = %s AND predicate = 'mentions'", (episode_id,)
        ).fetchall()
    return {r[0] for r in rows}


def write(db: Database, membrane: Membrane, *bodies: dict) -> list[records.CaptureOutcome]:
    plans = [membrane.plan(b) for b in bodies]
    with db.transaction() as conn:
        return records.write_captures(conn, plans, now=membrane.clock(), opts=membrane.work)


def test_same_mention_in_two_captures_resolves_to_one_entity(membrane: Membrane, database_url: str) -> None:
    first = membrane.capture(ev("proj", "Yesterday I paired with Ada Lovelace on the parser."))
    second = membrane.capture(ev("proj", "Then she reviewed it.", entities=["ada  LOVELACE"]))
    (entity_id,) = entities_named(database_url, "proj", "ada lovelace")
    assert mentioned(database_url, first.record_ids[0]) == {entity_id}
    assert mentioned(database_url, second.record_ids[0]) == {entity_id}
    entity = membrane.get(entity_id)
    assert entity.type.value == "entity" and entity.scope == "proj"
    assert entity.payload is not None and entity.payload["canonical_name"] == "Ada Lovelace"
    assert entity.sensitivity.value == "low"


def test_alias_and_identifier_match_the_existing_entity(membrane: Membrane, database_url: str) -> None:
    created = membrane.capture(ev("proj", entities=["Melanie | Mel | github:mel"]))
    (melanie,) = entities_named(database_url, "proj", "melanie")
    assert mentioned(database_url, created.record_ids[0]) == {melanie}
    by_alias = membrane.capture(ev("proj", "Lunch with Mel today, she was happy."))
    by_id = membrane.capture(ev("proj", "Opened a PR for GitHub:MEL", entities=["github:MEL"]))
    assert mentioned(database_url, by_alias.record_ids[0]) == {melanie}
    assert melanie in mentioned(database_url, by_id.record_ids[0])
    # positive control: a different name in the same capture is a different entity
    other = membrane.capture(ev("proj", "Then Mel introduced Grace Hopper."))
    (grace,) = entities_named(database_url, "proj", "grace hopper")
    assert mentioned(database_url, other.record_ids[0]) == {melanie, grace}


def test_scope_separates_entities(membrane: Membrane, database_url: str) -> None:
    a1 = membrane.capture(ev("team-a", "Ada Lovelace joined the call."))
    a2 = membrane.capture(ev("team-a", "Notes from Ada Lovelace."))
    b1 = membrane.capture(ev("team-b", "Ada Lovelace joined the call."))
    (in_a,) = entities_named(database_url, "team-a", "ada lovelace")
    (in_b,) = entities_named(database_url, "team-b", "ada lovelace")
    assert in_a != in_b
    assert mentioned(database_url, a1.record_ids[0]) == mentioned(database_url, a2.record_ids[0]) == {in_a}
    assert mentioned(database_url, b1.record_ids[0]) == {in_b}
    assert membrane.get(in_b).scope == "team-b"


def test_batch_dedupes_new_entities_and_reports_budget_truncation(
    db: Database, membrane: Membrane, database_url: str
) -> None:
    many = [f"Thing{i}" for i in range(mentions.MAX_MENTIONS_PER_CAPTURE + 3)]
    out = write(
        db,
        membrane,
        ev("proj", entities=many),
        ev("proj", "About Thing0 and Thing1."),
        ev("proj", "Nothing capitalised here."),
    )
    assert out[0].entities == {
        "mentions": mentions.MAX_MENTIONS_PER_CAPTURE,
        "linked": 0,
        "created": mentions.MAX_MENTIONS_PER_CAPTURE,
        "relations": 0,
        "truncated": {"mentions": 3},
    }
    # the second capture of the same batch links to entities the first one created
    assert out[1].entities == {"mentions": 2, "linked": 2, "created": 0, "relations": 0}
    assert out[2].entities == {"mentions": 0, "linked": 0, "created": 0, "relations": 0}
    assert len(mentioned(database_url, out[0].record_ids[0])) == mentions.MAX_MENTIONS_PER_CAPTURE
    assert entities_named(database_url, "proj", "thing15") != []
    assert entities_named(database_url, "proj", "thing16") == []  # dropped by the budget
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT count(*) FROM memory_records WHERE type = 'entity'").fetchone()
        audit = conn.execute(
            "SELECT count(*) FROM audit_log a JOIN memory_records r ON r.id = a.record_id"
            " WHERE r.type = 'entity' AND a.action = 'create'"
        ).fetchone()
    assert row == (mentions.MAX_MENTIONS_PER_CAPTURE,) and audit == row


def test_observation_links_subject_and_object_entities(membrane: Membrane, database_url: str) -> None:
    res = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "proj",
            "content": {"subject": "Alice Jones", "predicate": "works at", "object": "Acme Corp"},
        }
    )
    (alice,) = entities_named(database_url, "proj", "alice jones")
    (acme,) = entities_named(database_url, "proj", "acme corp")
    assert mentioned(database_url, res.record_ids[0]) == {alice, acme}
    again = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "proj",
            "content": {
                "subject": "alice jones",
                "predicate": "Works at",
                "object": "Acme Corp",
                "entities": ["alice jones"],
            },
        }
    )
    assert mentioned(database_url, again.record_ids[0]) == {alice, acme}
    with psycopg.connect(database_url) as conn:
        edges = conn.execute(
            "SELECT source_id, predicate, target_id FROM relations WHERE source_id = ANY(%s)",
            ([alice, acme],),
        ).fetchall()
    assert edges == [(alice, "works_at", acme)]  # asserted twice, stored once
    plain = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "proj",
            "content": {"subject": "user", "predicate": "prefers", "object": "dark mode"},
        }
    )
    assert mentioned(database_url, plain.record_ids[0]) == set()


def test_name_match_respects_sensitivity_and_status(membrane: Membrane, database_url: str, clock) -> None:
    secret = membrane.capture({**ev("proj", "Project Nightingale kicked off."), "sensitivity": "high"})
    clock.advance(seconds=1)
    (high,) = entities_named(database_url, "proj", "project nightingale")
    assert membrane.get(high).sensitivity.value == "high"
    low = membrane.capture(ev("proj", "Budget for Project Nightingale."))
    clock.advance(seconds=1)
    also_high = membrane.capture({**ev("proj", "Project Nightingale slipped."), "sensitivity": "hyper"})
    ids = set(entities_named(database_url, "proj", "project nightingale"))
    (low_entity,) = ids - {high}
    assert mentioned(database_url, secret.record_ids[0]) == {high}
    assert mentioned(database_url, low.record_ids[0]) == {low_entity}  # not linked to the high one
    assert mentioned(database_url, also_high.record_ids[0]) == {high}  # oldest visible match
    # an identifier is unique per scope: it links across levels (positive control for the rule above)
    tagged = membrane.capture({**ev("proj", entities=["Nightingale | jira:NIGHT"]), "sensitivity": "high"})
    (jira,) = entities_named(database_url, "proj", "nightingale")
    by_ident = membrane.capture(ev("proj", "Filed under jira:night today."))
    assert mentioned(database_url, tagged.record_ids[0]) == mentioned(database_url, by_ident.record_ids[0])
    assert mentioned(database_url, by_ident.record_ids[0]) == {jira}
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE memory_records SET status = 'retracted', retracted_at = now() WHERE id = %s",
            (low_entity,),
        )
    after = membrane.capture(ev("proj", "Notes on Project Nightingale."))
    (fresh,) = set(entities_named(database_url, "proj", "project nightingale")) - {high, low_entity}
    assert mentioned(database_url, after.record_ids[0]) == {fresh}


def test_concurrent_captures_create_one_entity(db: Database, membrane: Membrane, database_url: str) -> None:
    """RFC 3.5.5: the second writer waits on the advisory lock and then links to the first's entity."""
    first_written, release = threading.Event(), threading.Event()
    outcomes: dict[str, list[records.CaptureOutcome]] = {}
    errors: list[BaseException] = []

    def run(name: str, hold: bool) -> None:
        try:
            plans = [membrane.plan(ev("proj", f"{name}: met Barbara Liskov today."))]
            with db.transaction() as conn:
                outcomes[name] = records.write_captures(conn, plans, now=membrane.clock(), opts=membrane.work)
                if hold:
                    first_written.set()
                    assert release.wait(60)
        except BaseException as exc:
            errors.append(exc)
            first_written.set()

    a = threading.Thread(target=run, args=("A", True))
    a.start()
    assert first_written.wait(60)
    b = threading.Thread(target=run, args=("B", False))
    b.start()
    with psycopg.connect(database_url, autocommit=True) as conn:
        for _ in range(600):  # until B waits on A's advisory lock
            row = conn.execute(
                "SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted"
            ).fetchone()
            if row and row[0] > 0:
                break
            threading.Event().wait(0.05)
        else:
            pytest.fail("the second writer never waited on the entity lock")
    release.set()
    a.join(60)
    b.join(60)
    assert not errors
    assert outcomes["A"][0].entities == {"mentions": 1, "linked": 0, "created": 1, "relations": 0}
    assert outcomes["B"][0].entities == {"mentions": 1, "linked": 1, "created": 0, "relations": 0}
    (liskov,) = entities_named(database_url, "proj", "barbara liskov")
    assert mentioned(database_url, outcomes["A"][0].record_ids[0]) == {liskov}
    assert mentioned(database_url, outcomes["B"][0].record_ids[0]) == {liskov}
