"""Export and import against real Postgres (RFC 15.1, 15.2): a scope moved between two stores
keeps its ids, times, statuses, corrections, proposals and audit; the bundle is checked before
anything is written; importing twice changes nothing."""

from __future__ import annotations

import base64
import hashlib
import json
import os
import shutil
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from pydantic import SecretStr

from membrane_core import Membrane, Settings, errors
from membrane_core.enums import Sensitivity
from membrane_core.storage.db import Database
from membrane_core.testing import FakeClock
from membrane_core.trust import TrustPolicy
from tests.support import services
from tests.support.services import EMBEDDING_DIM
from tests.support.sql import STORED_SALIENCE

OPERATOR = TrustPolicy(actor="ops", operator=True)
WRITER = TrustPolicy(actor="writer")
MODEL = TrustPolicy(actor="model", review_required=True)
EVIDENCE = [{"kind": "observation", "ref": "user said so"}]
#: a store opened on a fresh database waits for its first connection as the fixtures' do,
#: not the 0.5 s a request waits (RFC 10.5), which a loaded test host can pass
WAIT_FOR_POOL = {"request_pool_timeout_seconds": 30.0}
#: the manifest's fields that name the run, not the data (RFC 15.2)
RUN_FIELDS = ("exported_at", "exported_by", "resumed")


def observe(m: Membrane, s: str, p: str, o: str, scope: str = "proj", trust: TrustPolicy = WRITER) -> Any:
    return m.captures.capture_many(
        [
            {
                "source_kind": "observation",
                "scope": scope,
                "content": {"subject": s, "predicate": p, "object": o},
                "tags": ["moved"],
            }
        ],
        trust,
    )[0]


@pytest.fixture
def target(pg_admin_url: str, tmp_path: Path) -> Iterator[Membrane]:
    """A second store, empty, on its own database."""
    with services.fresh_database(pg_admin_url) as url:
        settings = Settings(
            database_url=url, data_dir=tmp_path / "target", embedding_dim=EMBEDDING_DIM, **WAIT_FOR_POOL
        )
        with Membrane(settings, clock=FakeClock()) as m:
            yield m


def history(m: Membrane) -> dict[str, Any]:
    """A scope's corrections as a store holds them: every record's status, its fact and what
    supersedes what, the tombstones, and each record's audit actions."""
    recs = {
        r.id: r
        for r in m.listing.records(
            {"scopes": ["proj"], "statuses": ["active", "contested", "retracted", "proposed"], "limit": 200},
            OPERATOR,
        ).records
    }
    return {
        "status": {str(i): r.status.value for i, r in recs.items()},
        "relations": sorted(
            (str(i), rel.predicate, str(rel.target_id)) for i, r in recs.items() for rel in r.relations
        ),
        "audit": {str(i): [e.action for e in m.audit(i, OPERATOR).entries] for i in recs},
    }


def build(m: Membrane, clock: FakeClock) -> dict[str, uuid.UUID]:
    """A scope with every kind of row an export carries."""
    tea = observe(m, "user", "prefers", "tea").record_ids[1]
    clock.advance(hours=1)
    coffee = m.revisions.supersede(
        tea, {"record": {"object": "coffee"}, "rationale": "changed", "evidence": EVIDENCE}, WRITER
    )
    wrong = observe(m, "user", "lives in", "Paris").record_ids[1]
    m.revisions.retract(wrong, {"rationale": "never did"}, WRITER)
    doubt = observe(m, "user", "works at", "Acme").record_ids[1]
    m.revisions.contest(doubt, {"rationale": "unsure"}, WRITER)
    gone = observe(m, "user", "owns", "a boat").record_ids[1]
    m.delete(gone, OPERATOR, "asked to")
    proposed = observe(m, "user", "speaks", "Danish", trust=MODEL)
    elsewhere = observe(m, "user", "prefers", "rain", scope="other").record_ids[1]
    return {
        "tea": tea,
        "coffee": coffee,
        "wrong": wrong,
        "doubt": doubt,
        "gone": gone,
        "proposed": proposed.record_ids[1],
        "elsewhere": elsewhere,
    }


def files(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def data_of(manifest: bytes) -> dict[str, Any]:
    return {k: v for k, v in json.loads(manifest).items() if k not in RUN_FIELDS}


def test_a_scope_moves_between_stores_and_loses_no_correction(
    membrane: Membrane, target: Membrane, clock: FakeClock, tmp_path: Path
) -> None:
    ids = build(membrane, clock)
    first, second = tmp_path / "first", tmp_path / "second"
    manifest = membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, first)
    assert (
        manifest.counts["records"] >= 10 and manifest.counts["tombstones"] == 2
    )  # the retraction and the supersede
    assert {"audit", "gone_audit", "proposals", "relations", "tags", "provenance"} <= set(manifest.counts)

    report = target.transfer.import_bundle(first, OPERATOR)
    assert report.records_written == manifest.counts["records"] and report.records_skipped == 0
    assert report.relations_dangling == 0 and report.chains == {"new": report.chains["new"]}

    # the same store, record for record: statuses, chains, audit
    assert history(target) == history(membrane)
    found = {
        r.id
        for r in target.retrieve({"query": "user prefers tea coffee", "scopes": ["proj"]}, WRITER).records
    }
    assert ids["coffee"] in found and ids["tea"] not in found  # the correction holds; positive control
    listed = {r.id for r in target.listing.records({"scopes": ["proj", "other"]}, OPERATOR).records}
    assert ids["coffee"] in listed and ids["elsewhere"] not in listed  # one scope moved, not the other
    with pytest.raises(errors.NotFound):
        target.get(ids["gone"], OPERATOR)
    assert [e.action for e in target.audit(ids["gone"], OPERATOR).entries][-1] == "delete"
    assert target.audit(ids["coffee"], OPERATOR).chain_valid is True
    assert target.get(ids["proposed"], OPERATOR).status.value == "proposed"
    assert target.review.queue({}, TrustPolicy(actor="person", reviewer=True)).entries  # still to decide

    # exported again: the same files, the manifest apart from the run's own fields
    target.transfer.export({"scopes": ["proj"]}, OPERATOR, second)
    a, b = files(first), files(second)
    assert a.keys() == b.keys()
    assert {n: v for n, v in a.items() if n != "manifest.json"} == {
        n: v for n, v in b.items() if n != "manifest.json"
    }
    assert data_of(a["manifest.json"]) == data_of(b["manifest.json"])

    # twice: nothing changes
    again = target.transfer.import_bundle(first, OPERATOR)
    assert again.records_written == 0 and again.records_skipped == manifest.counts["records"]
    assert again.audit_appended == 0 and set(again.chains) == {"equal"}
    assert history(target) == history(membrane)


def test_a_changed_bundle_is_refused_before_anything_is_written(
    membrane: Membrane, target: Membrane, clock: FakeClock, tmp_path: Path
) -> None:
    build(membrane, clock)
    bundle = tmp_path / "bundle"
    membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, bundle)
    audit_file = next(bundle.glob("audit-*.ndjson"))

    # a byte changed: the file's hash names it
    broken = tmp_path / "broken"
    shutil.copytree(bundle, broken)
    (broken / audit_file.name).write_bytes(audit_file.read_bytes().replace(b"changed", b"chanGed", 1))
    with pytest.raises(errors.InvalidInput, match=audit_file.name):
        target.transfer.import_bundle(broken, OPERATOR)

    # an entry rewritten and the manifest made to match: the chain names the entry
    forged = tmp_path / "forged"
    shutil.copytree(bundle, forged)
    lines = audit_file.read_bytes().splitlines(keepends=True)
    at = next(n for n, line in enumerate(lines) if b'"changed"' in line)
    entry = json.loads(lines[at])
    lines[at] = lines[at].replace(b'"changed"', b'"chanGed"')
    data = b"".join(lines)
    (forged / audit_file.name).write_bytes(data)
    manifest = json.loads((bundle / "manifest.json").read_bytes())
    for f in manifest["files"]:
        if f["name"] == audit_file.name:
            f["sha256"], f["bytes"] = hashlib.sha256(data).hexdigest(), len(data)
    (forged / "manifest.json").write_text(json.dumps(manifest))
    with pytest.raises(errors.InvalidInput, match=f"{entry['record_id']}.*{audit_file.name}:{at + 1}"):
        target.transfer.import_bundle(forged, OPERATOR)

    assert target.listing.records({"scopes": ["proj"]}, OPERATOR).records == []  # nothing written
    report = target.transfer.import_bundle(bundle, OPERATOR)  # positive control: the intact one imports
    assert report.records_written == manifest["counts"]["records"]


def test_conflicts_skip_fail_or_overwrite(
    membrane: Membrane, target: Membrane, clock: FakeClock, tmp_path: Path
) -> None:
    ids = build(membrane, clock)
    bundle = tmp_path / "bundle"
    manifest = membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, bundle)
    target.transfer.import_bundle(bundle, OPERATOR)
    target.revisions.reinforce(ids["coffee"], {"rationale": "seen again"}, WRITER)
    changed = target.get(ids["coffee"], OPERATOR).salience

    with pytest.raises(errors.Conflict, match=str(ids["tea"])):
        target.transfer.import_bundle(bundle, OPERATOR, on_conflict="fail")

    skipped = target.transfer.import_bundle(bundle, OPERATOR, on_conflict="skip")
    assert skipped.records_written == 0 and skipped.records_overwritten == 0
    assert target.get(ids["coffee"], OPERATOR).salience == changed

    over = target.transfer.import_bundle(bundle, OPERATOR, on_conflict="overwrite")
    assert over.records_overwritten == 1 and over.records_written == 0  # only the one that differs
    assert over.records_skipped == manifest.counts["records"] - 1
    entries = target.audit(ids["coffee"], OPERATOR)
    assert [e.action for e in entries.entries][-2:] == ["reinforce", "import"] and entries.chain_valid
    assert target.get(ids["coffee"], OPERATOR).salience == membrane.get(ids["coffee"], OPERATOR).salience


def test_an_import_never_moves_a_record_to_another_scope(
    membrane: Membrane, target: Membrane, clock: FakeClock, tmp_path: Path
) -> None:
    """RFC 13.2, 15.2: a record's scope never changes: an import that would move one is
    refused in every conflict mode, and nothing of it is written."""
    ids = build(membrane, clock)
    bundle = tmp_path / "bundle"
    membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, bundle)
    # positive control: the same import goes through while the scopes agree
    assert target.transfer.import_bundle(bundle, OPERATOR).records_written > 0
    with psycopg.connect(target.db.dsn) as conn:
        conn.execute("UPDATE memory_records SET scope = 'elsewhere' WHERE id = %s", (ids["tea"],))
    before = target.audit(ids["tea"], OPERATOR).entries
    for mode in ("skip", "overwrite", "fail"):
        with pytest.raises(errors.Conflict, match=rf"{ids['tea']} \(elsewhere, not proj\)"):
            target.transfer.import_bundle(bundle, OPERATOR, on_conflict=mode)  # type: ignore[arg-type]
    assert target.audit(ids["tea"], OPERATOR).entries == before


def test_an_import_needs_an_operator(
    membrane: Membrane, target: Membrane, clock: FakeClock, tmp_path: Path
) -> None:
    build(membrane, clock)
    membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, tmp_path / "b")
    with pytest.raises(errors.Forbidden):
        target.transfer.import_bundle(tmp_path / "b", WRITER)


def test_an_export_takes_what_its_key_sees(
    membrane: Membrane, clock: FakeClock, tmp_path: Path, database_url: str
) -> None:
    observe(membrane, "user", "prefers", "tea")
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE memory_records SET sensitivity = 'high' WHERE type = 'semantic'")
    low = TrustPolicy(actor="reader", read_scopes=frozenset({"proj"}), max_sensitivity=Sensitivity.MEDIUM)
    manifest = membrane.transfer.export({}, low, tmp_path / "low")
    assert manifest.withheld == 1 and manifest.counts["records"] >= 1  # the episode, not the fact
    lines = (tmp_path / "low" / "records-000001.ndjson").read_text().splitlines()
    assert all(json.loads(line)["sensitivity"] != "high" for line in lines)
    with pytest.raises(errors.Forbidden):
        membrane.transfer.export({"scopes": ["secret"]}, low, tmp_path / "no")


def test_a_record_line_holds_every_stored_column(
    membrane: Membrane, tmp_path: Path, database_url: str
) -> None:
    """RFC 15.1: an export lists the columns it writes; a column a migration adds must be
    added there (and to the import's lists), or it would be lost in a move."""
    observe(membrane, "user", "prefers", "tea")
    membrane.transfer.export({}, OPERATOR, tmp_path / "b")
    line = json.loads((tmp_path / "b" / "records-000001.ndjson").read_text().splitlines()[0])
    with psycopg.connect(database_url) as conn:
        stored = {
            r[0]
            for r in conn.execute(
                "SELECT attname FROM pg_attribute WHERE attrelid = 'memory_records'::regclass"
                " AND attnum > 0 AND NOT attisdropped AND attgenerated = ''"
            )
        }
    assert set(line) - {"payload"} == stored


def test_sealed_records_stay_sealed_unless_opened_with_their_keys(
    settings: Settings, db: Database, target: Membrane, tmp_path: Path
) -> None:
    """RFC 15.1, 7.6: a sealed record is exported as its envelope naming its key; asked to
    open, an export that holds the key writes the plain record, which imports as one."""
    key = base64.b64encode(os.urandom(32)).decode()
    sealed = settings.model_copy(
        update={
            "encryption_keys": SecretStr(json.dumps({"k1": key})),
            "encryption_index_key": SecretStr(base64.b64encode(os.urandom(32)).decode()),
        }
    )
    secret = "the vault code is 1234"
    with Membrane(sealed, database=db) as m:
        fact = m.captures.capture_many(
            [
                {
                    "source_kind": "observation",
                    "scope": "proj",
                    "sensitivity": "high",
                    "content": {"subject": "vault", "predicate": "has code", "object": secret},
                    "tags": ["vault"],
                }
            ],
            OPERATOR,
        )[0].record_ids[1]
        m.transfer.export({"scopes": ["proj"]}, OPERATOR, tmp_path / "envelopes")
        m.transfer.export({"scopes": ["proj"], "open_sealed": True}, OPERATOR, tmp_path / "opened")
    closed = (tmp_path / "envelopes" / "records-000001.ndjson").read_text()
    assert secret not in closed and '"key_id":"k1"' in closed.replace(" ", "")
    opened = (tmp_path / "opened" / "records-000001.ndjson").read_text()
    assert secret in opened  # positive control: the same record, opened
    tags = (tmp_path / "opened" / "tags-000001.ndjson").read_text()
    assert '"vault"' in tags and "hmac:" not in tags

    target.transfer.import_bundle(tmp_path / "opened", OPERATOR)
    view = target.get(fact, OPERATOR)
    assert view.payload is not None and view.payload["object"] == secret and view.tags == ["vault"]
    found = target.retrieve({"query": "vault code", "scopes": ["proj"]}, OPERATOR).records
    assert fact in {r.id for r in found}  # its indexed text and fact key are a plain record's
    with Membrane(settings, database=db) as plain, pytest.raises(errors.InvalidInput, match="keys"):
        plain.transfer.export({"scopes": ["proj"], "open_sealed": True}, OPERATOR, tmp_path / "no")


def test_a_stopped_export_resumes_after_its_last_chunk(
    membrane: Membrane, clock: FakeClock, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """RFC 15.1: a run stopped after a chunk resumes there; its files are those of a run that
    was not stopped, its manifest says so."""
    from membrane_core.transfer import export as exporting

    build(membrane, clock)
    monkeypatch.setattr(exporting, "CHUNK_ROWS", 3)
    whole = membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, tmp_path / "whole")
    assert sum(1 for f in whole.files if f.kind == "records") >= 3  # several chunks

    class Stop(Exception):
        pass

    def stop_after_two(done: int, total: int) -> None:
        if done >= 6:
            raise Stop

    with pytest.raises(Stop):
        membrane.transfer.export(
            {"scopes": ["proj"]}, OPERATOR, tmp_path / "resumed", progress=stop_after_two
        )
    assert (tmp_path / "resumed" / ".export-state.json").exists()
    assert not (tmp_path / "resumed" / "manifest.json").exists()
    with pytest.raises(errors.InvalidInput, match="other filters"):
        membrane.transfer.export({"scopes": ["proj"], "types": ["semantic"]}, OPERATOR, tmp_path / "resumed")
    again = membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, tmp_path / "resumed")
    assert again.resumed is True and not (tmp_path / "resumed" / ".export-state.json").exists()
    a, b = files(tmp_path / "whole"), files(tmp_path / "resumed")
    assert {n: v for n, v in a.items() if n != "manifest.json"} == {
        n: v for n, v in b.items() if n != "manifest.json"
    }
    assert data_of(a["manifest.json"]) == data_of(b["manifest.json"])


def test_vectors_move_with_their_model_and_the_rest_are_queued(
    settings: Settings, db: Database, pg_admin_url: str, clock: FakeClock, tmp_path: Path
) -> None:
    """RFC 15.2: a bundle's vectors are written where the store embeds with their model; a
    record without one is queued for the embedding pool; without a provider, neither."""
    hashing = settings.model_copy(update={"embedding_provider": "hashing"})
    with Membrane(hashing, database=db, clock=clock) as m:
        build(m, clock)
        m.embedding.run_batch()
        with_vectors = m.transfer.export({"scopes": ["proj"], "with_vectors": True}, OPERATOR, tmp_path / "v")
        m.transfer.export({"scopes": ["proj"]}, OPERATOR, tmp_path / "plain")
        model = m._embedding_model()
    assert with_vectors.counts["vectors"] > 0 and with_vectors.vector_models == [model]
    for source, expect_vectors in ((tmp_path / "v", True), (tmp_path / "plain", False)):
        with services.fresh_database(pg_admin_url) as url:
            other = hashing.model_copy(
                update={"database_url": SecretStr(url), "data_dir": tmp_path / "o", **WAIT_FOR_POOL}
            )
            with Membrane(other) as t:
                report = t.transfer.import_bundle(source, OPERATOR)
        if expect_vectors:
            assert report.vectors == with_vectors.counts["vectors"]
            assert report.embeddings_queued == report.records_written - report.vectors
        else:
            assert report.vectors == 0 and report.embeddings_queued == report.records_written
    with services.fresh_database(pg_admin_url) as url:
        none = settings.model_copy(
            update={"database_url": SecretStr(url), "data_dir": tmp_path / "n", **WAIT_FOR_POOL}
        )
        with Membrane(none) as t:
            report = t.transfer.import_bundle(tmp_path / "v", OPERATOR)
    assert report.vectors == 0 and report.embeddings_queued == 0 and report.records_written > 0


def test_a_decay_checkpoint_travels_and_an_overwrite_drops_the_stale_one(
    membrane: Membrane, clock: FakeClock, tmp_path: Path, database_url: str
) -> None:
    """RFC 6.1, 15.2: an export carries the salience a read gives (the decay checkpoint), so
    importing it into the store it came from overwrites nothing; an overwrite drops the
    record's checkpoint with its other parts."""
    ids = build(membrane, clock)
    clock.advance(days=400)
    with psycopg.connect(database_url) as conn:
        conn.execute("UPDATE work_items SET due_at = %s WHERE kind = 'decay'", (clock(),))
    assert membrane.maintenance.run("decay", limit=500)["refreshed"] > 0
    with psycopg.connect(database_url) as conn:
        ((decayed, column),) = conn.execute(
            f"SELECT {STORED_SALIENCE}, salience FROM memory_records r WHERE id = %s", (ids["coffee"],)
        )
    assert decayed < column  # the record's own column still holds what capture wrote
    bundle = tmp_path / "bundle"
    membrane.transfer.export({"scopes": ["proj"]}, OPERATOR, bundle)
    lines = [
        json.loads(x) for f in sorted(bundle.glob("records-*.ndjson")) for x in f.read_text().splitlines()
    ]
    assert next(x for x in lines if x["id"] == str(ids["coffee"]))["salience"] == decayed

    again = membrane.transfer.import_bundle(bundle, OPERATOR, on_conflict="overwrite")
    assert again.records_overwritten == 0 and again.records_written == 0

    membrane.revisions.reinforce(ids["coffee"], {"rationale": "seen again"}, WRITER)
    over = membrane.transfer.import_bundle(bundle, OPERATOR, on_conflict="overwrite")
    assert over.records_overwritten == 1
    with psycopg.connect(database_url) as conn:
        ((now_stored,),) = conn.execute(
            f"SELECT {STORED_SALIENCE} FROM memory_records r WHERE id = %s", (ids["coffee"],)
        )
        held = conn.execute(
            "SELECT record_id FROM salience_checkpoints WHERE record_id = ANY(%s)", (list(ids.values()),)
        ).fetchall()
    assert now_stored == decayed  # the bundle's value, reinforcement undone
    assert (ids["coffee"],) not in held and held  # the others keep theirs
