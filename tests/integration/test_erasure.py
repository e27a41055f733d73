"""Erasure against real Postgres (RFC 15.4): a canary planted in every kind of field is found
in each table before, and in no table and no answer after; the audit chains still verify;
what was erased is not written again; a dry run counts and confirms."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

from membrane_core import Membrane, Settings, errors
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy

CANARY = "zqxcanary"
KEEP = "keepmarker"
OPS = TrustPolicy(actor="ops", operator=True, erase=True)
WRITER = TrustPolicy(actor="writer")
#: the tables the planted canary reaches (the positive control finds it in each)
PLANTED = (
    "memory_records",
    "record_payloads",
    "record_tags",
    "provenance_sources",
    "entity_terms",
    "entity_identifiers",
    "audit_log",
    "operations",
    "work_items",
    "fact_tombstones",
    "proposals",
)


@pytest.fixture
def m(settings: Settings, db: Database, clock: FakeClock) -> Iterator[Membrane]:
    """A store that embeds with the hashing provider, so records have vectors and token signs."""
    with Membrane(
        settings.model_copy(update={"embedding_provider": "hashing"}), database=db, clock=clock
    ) as mem:
        yield mem


def tables_with(url: str, needle: str) -> dict[str, int]:
    """Every table of the schema whose rows, as text, hold ``needle``, with how many rows."""
    found: dict[str, int] = {}
    with psycopg.connect(url) as conn:
        names = [
            r[0]
            for r in conn.execute(
                "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
                " WHERE n.nspname = 'public' AND c.relkind IN ('r') ORDER BY 1"
            )
        ]
        for name in names:
            row = conn.execute(
                psycopg.sql.SQL("SELECT count(*) FROM {} x WHERE x::text ILIKE %s").format(
                    psycopg.sql.Identifier(name)
                ),
                (f"%{needle}%",),
            ).fetchone()
            if row and row[0]:
                found[name] = int(row[0])
    return found


def plant(m: Membrane, scope: str, marker: str, database_url: str) -> dict[str, uuid.UUID]:
    """The marker in every kind of field a person's memory fills."""
    op = m.inbox.submit_capture(
        {
            "source_kind": "event",
            "scope": scope,
            "content": {
                "text": f"Met {marker.title()} at the harbour; {marker} likes sailing",
                "entities": [f"{marker.title()} Person | {marker}nick | github:{marker}"],
            },
            "summary": f"meeting {marker}",
            "tags": [f"tag-{marker}"],
            "metadata": {"note": marker},
        },
        DEVELOPMENT_POLICY,
    )
    m.inbox_worker.process_captures([op.operation_id], worker="w1")
    observation, fact = m.captures.capture_many(
        [
            {
                "source_kind": "observation",
                "scope": scope,
                "content": {
                    "subject": f"{marker.title()} Person",
                    "predicate": "likes",
                    "object": f"{marker} boats",
                },
            }
        ],
        WRITER,
    )[0].record_ids
    newer = m.revisions.supersede(
        fact,
        {
            "record": {"object": "sailing"},
            "rationale": f"{marker} said so",
            "evidence": [{"kind": "observation", "ref": f"chat with {marker}"}],
        },
        WRITER,
    )
    proposed = m.captures.capture_many(
        [
            {
                "source_kind": "observation",
                "scope": scope,
                "content": {"subject": f"{marker} person", "predicate": "lives in", "object": "Oslo"},
            }
        ],
        TrustPolicy(actor="model", review_required=True),
    )[0]
    m.embedding.run_batch()
    with psycopg.connect(database_url) as conn:  # a failed item's error quotes the record
        conn.execute(
            "INSERT INTO work_items (kind, target_id, last_error) VALUES ('extract', %s, %s)",
            (newer, f"extractor failed on {marker}"),
        )
        conn.execute(
            "UPDATE proposals SET rationale = %s WHERE id = %s", (f"why {marker}", proposed.proposal_id)
        )
    return {
        "episode": op.record_id,
        "observation": observation,
        "fact": fact,
        "newer": newer,
        "proposed": proposed.record_ids[1],
    }


def test_an_erased_scope_leaves_its_canary_in_no_table_and_no_answer(
    m: Membrane, database_url: str, tmp_path: Path
) -> None:
    ids = plant(m, "person", CANARY, database_url)
    kept = plant(m, "other", KEEP, database_url)
    before = tables_with(database_url, CANARY)
    assert set(PLANTED) <= set(before), before  # positive control: the canary is in each table
    with psycopg.connect(database_url) as conn:
        vectors = conn.execute("SELECT count(*) FROM record_embeddings WHERE scope = 'person'").fetchone()
    assert vectors is not None and vectors[0] > 0

    dry = m.erasure.erase({"scope": "person", "reason": "asked to be forgotten"}, OPS)
    assert dry.dry_run and dry.counts["memory_records"] >= 5 and dry.counts["audit_log"] >= 5
    assert dry.counts["record_embeddings"] > 0 and dry.counts["operations"] >= 1
    assert tables_with(database_url, CANARY) == before  # a dry run changes nothing

    done = m.erasure.erase(
        {"scope": "person", "reason": "asked to be forgotten", "dry_run": False, "confirm": dry.confirm}, OPS
    )
    assert done.erasure_id is not None and done.counts == dry.counts
    after = tables_with(database_url, CANARY)
    assert after == {}, after
    assert set(PLANTED) - {"fact_tombstones"} <= set(tables_with(database_url, KEEP))  # the other scope stays
    with psycopg.connect(database_url) as conn:
        conn.autocommit = True
        conn.execute("VACUUM")
        left = conn.execute("SELECT count(*) FROM record_embeddings WHERE scope = 'person'").fetchone()
    assert left == (0,)

    # no answer names it: retrieval, lists, by id, audit, export
    answer = m.retrieve(
        {"query": f"{CANARY} {KEEP} sailing boats harbour", "scopes": ["person", "other"], "limit": 50},
        DEVELOPMENT_POLICY,
    )
    text = answer.model_dump_json()
    assert CANARY not in text and KEEP in text
    listed = m.listing.records(
        {"scopes": ["person", "other"], "statuses": ["active", "retracted", "proposed", "contested"]},
        DEVELOPMENT_POLICY,
    )
    assert CANARY not in listed.model_dump_json() and KEEP in listed.model_dump_json()
    for rid in ids.values():
        with pytest.raises(errors.NotFound):
            m.get(rid, DEVELOPMENT_POLICY)
        history = m.audit(rid, DEVELOPMENT_POLICY)
        assert history.chain_valid is True and CANARY not in history.model_dump_json()
        assert history.entries[-1].action == "erase" and all(e.erased for e in history.entries[:-1])
    assert m.audit(kept["fact"], DEVELOPMENT_POLICY).entries[0].erased is False
    m.transfer.export({}, DEVELOPMENT_POLICY, tmp_path / "out")
    exported = b"".join(p.read_bytes() for p in (tmp_path / "out").iterdir())
    assert CANARY.encode() not in exported and KEEP.encode() in exported

    # what was erased is not written again: its fact, captured anew, is refused; others are not
    again = m.captures.capture_many(
        [
            {
                "source_kind": "observation",
                "scope": "person",
                "content": {"subject": f"{CANARY} person", "predicate": "likes", "object": "sailing"},
            },
            {
                "source_kind": "observation",
                "scope": "person",
                "content": {"subject": "weather", "predicate": "is", "object": "fine"},
            },
        ],
        WRITER,
    )
    facts = [
        r
        for r in m.listing.records({"scopes": ["person"], "types": ["semantic"]}, DEVELOPMENT_POLICY).records
    ]
    assert [f.payload["subject"] for f in facts if f.payload] == ["weather"]
    assert len(again) == 2
    with psycopg.connect(database_url) as conn:
        row = conn.execute("SELECT actor, reason, target_kind, counts FROM erasures").fetchone()
    assert row is not None and row[:3] == ("ops", "asked to be forgotten", "scope") and row[3] == done.counts


def test_an_entity_erasure_takes_what_names_it_and_its_versions(m: Membrane, database_url: str) -> None:
    ids = plant(m, "person", CANARY, database_url)
    with psycopg.connect(database_url) as conn:
        entity = conn.execute(
            "SELECT record_id FROM entity_terms WHERE scope = 'person' AND term = %s", (f"{CANARY} person",)
        ).fetchone()
    assert entity is not None
    dry = m.erasure.erase({"entity": entity[0], "reason": "forget this person"}, OPS)
    m.erasure.erase(
        {"entity": entity[0], "reason": "forget this person", "dry_run": False, "confirm": dry.confirm}, OPS
    )
    for name in ("episode", "observation", "fact", "newer"):
        with pytest.raises(errors.NotFound):
            m.get(ids[name], DEVELOPMENT_POLICY)
    assert m.audit(ids["fact"], DEVELOPMENT_POLICY).chain_valid is True


def test_only_an_erase_key_in_its_scopes_erases_and_a_stale_confirmation_is_refused(
    m: Membrane, database_url: str
) -> None:
    ids = plant(m, "person", CANARY, database_url)
    with pytest.raises(errors.Forbidden):
        m.erasure.erase({"scope": "person", "reason": "x"}, TrustPolicy(actor="ops", operator=True))
    with pytest.raises(errors.Forbidden):
        m.erasure.erase(
            {"scope": "person", "reason": "x"},
            TrustPolicy(
                actor="e", erase=True, read_scopes=frozenset({"other"}), write_scopes=frozenset({"other"})
            ),
        )
    with pytest.raises(errors.InvalidInput):
        m.erasure.erase({"scope": "person", "records": [ids["fact"]], "reason": "x"}, OPS)
    with pytest.raises(errors.InvalidInput):
        m.erasure.erase({"scope": "person", "reason": "x", "dry_run": False}, OPS)
    dry = m.erasure.erase({"records": [ids["episode"]], "reason": "x"}, OPS)
    m.captures.capture_many(
        [{"source_kind": "event", "scope": "person", "content": {"text": "more"}}], WRITER
    )
    assert (
        m.erasure.erase({"records": [ids["episode"]], "reason": "x"}, OPS).confirm == dry.confirm
    )  # same target
    m.revisions.reinforce(ids["newer"], {"rationale": "again"}, WRITER)
    changed = m.erasure.erase({"records": [ids["newer"]], "reason": "x"}, OPS)
    m.revisions.reinforce(ids["newer"], {"rationale": "once more"}, WRITER)
    with pytest.raises(errors.Conflict):
        m.erasure.erase(
            {"records": [ids["newer"]], "reason": "x", "dry_run": False, "confirm": changed.confirm}, OPS
        )
    assert m.get(ids["newer"], DEVELOPMENT_POLICY).id == ids["newer"]  # nothing erased


def test_an_import_does_not_bring_back_what_was_erased(
    m: Membrane, database_url: str, tmp_path: Path
) -> None:
    plant(m, "person", CANARY, database_url)
    m.transfer.export({"scopes": ["person"]}, DEVELOPMENT_POLICY, tmp_path / "backup")
    dry = m.erasure.erase({"scope": "person", "reason": "forget"}, OPS)
    m.erasure.erase({"scope": "person", "reason": "forget", "dry_run": False, "confirm": dry.confirm}, OPS)
    report = m.transfer.import_bundle(tmp_path / "backup", OPS.model_copy(update={"operator": True}))
    assert report.records_written == 0 and report.records_skipped > 0
    assert tables_with(database_url, CANARY) == {}
    manifest: dict[str, Any] = json.loads((tmp_path / "backup" / "manifest.json").read_text())
    assert manifest["counts"]["records"] == report.records_skipped
