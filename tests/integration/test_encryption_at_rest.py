"""Encryption at rest (RFC 7.6): what reaches Postgres, what comes back, rotation, missing keys."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import random
import threading
import uuid
from collections.abc import Callable, Iterator
from typing import Any

import httpx
import psycopg
import pytest
from pydantic import SecretStr

from api.app import create_app
from api.ratelimit import Unlimited
from membrane_core import Membrane, Settings
from membrane_core.enums import Job, Sensitivity
from membrane_core.inbox.submit import InlineDispatcher
from membrane_core.sealing import Sealer
from membrane_core.storage.db import Database
from membrane_core.storage.records import WorkOptions
from membrane_core.testing import FakeClock
from membrane_core.trust import TrustPolicy
from tests.support.api import Server
from tests.support.services import EMBEDDING_DIM


def _key() -> str:
    return base64.b64encode(os.urandom(32)).decode()


K1, K2, INDEX = _key(), _key(), _key()
HYPER = TrustPolicy(max_sensitivity=Sensitivity.HYPER, actor="tester")
API_KEYS = {
    "hyper-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "hyper", "operator": True},
    "high-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "high"},
}


def keyed(settings: Settings, keys: dict[str, str], current: str | None = None, **more: Any) -> Settings:
    """``settings`` with the key ring ``keys`` (id -> base64), ``current`` the key of new writes."""
    return settings.model_copy(
        update={
            "encryption_keys": SecretStr(json.dumps(keys)),
            "encryption_key_id": current,
            "encryption_index_key": SecretStr(INDEX),
            **more,
        }
    )


@pytest.fixture
def settings(settings: Settings) -> Settings:
    """Every Membrane of these tests' fixtures seals with ``k1``."""
    return keyed(settings, {"k1": K1})


def holding(conn: psycopg.Connection, needle: str) -> dict[str, int]:
    """The tables (every table, partitions included) with rows whose text holds ``needle`` in
    any column: text, jsonb, arrays and tsvector as their text, bytea as its bytes."""
    tables = [
        name
        for (name,) in conn.execute(
            "SELECT c.relname FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = 'public' AND c.relkind = 'r' ORDER BY 1"
        ).fetchall()
    ]
    assert {"memory_records", "record_payloads", "audit_log", "operations", "work_items"} <= set(tables)
    found: dict[str, int] = {}
    hexed = needle.encode().hex()
    for table in tables:
        row = conn.execute(
            psycopg.sql.SQL(
                "SELECT count(*) FROM {} x WHERE strpos(lower(x::text), %s) > 0 OR strpos(x::text, %s) > 0"
            ).format(psycopg.sql.Identifier(table)),
            (needle, hexed),
        ).fetchone()
        if row and row[0]:
            found[table] = int(row[0])
    return found


@contextlib.contextmanager
def api(m: Membrane, keys: dict[str, Any] | None = None, key: str | None = None) -> Iterator[httpx.Client]:
    """The HTTP API over ``m`` (writes processed inline), and a client with ``key``."""
    settings = m.settings.model_copy(update={"api_keys": keys or {}})
    app = create_app(
        settings, membrane=m, dispatcher=InlineDispatcher(m.inbox_worker), rate_limiter=Unlimited()
    )
    headers = {"Authorization": f"Bearer {key}"} if key else {}
    with Server(app) as server, httpx.Client(base_url=server.url, headers=headers, timeout=60) as client:
        yield client


def _post(client: httpx.Client, path: str, body: dict[str, Any]) -> dict[str, Any]:
    resp = client.post(path, params={"wait": 10}, json=body)
    assert resp.status_code == 200, resp.text
    out: dict[str, Any] = resp.json()
    assert out["status"] == "succeeded", out["error"]
    return out


def _write_everywhere(client: httpx.Client, canary: str, level: str) -> dict[str, str]:
    """Put ``canary`` in every field a write can carry, through the API: an episode (text,
    summary, tags, metadata, reason, entities, tool calls), an observation and its fact, a
    successful episode whose facts and tool calls consolidation mines, a supersede and a
    retraction with rationales."""
    tag = f"tag-{canary}"
    episode = _post(
        client,
        "/v1/captures",
        {
            "source_kind": "event",
            "scope": "vault",
            "sensitivity": level,
            "summary": f"summary {canary}",
            "tags": [tag],
            "metadata": {"note": f"metadata {canary}"},
            "reason_to_remember": f"reason {canary}",
            "content": {
                "text": f"Met {canary.capitalize()} Person at the office; the code is {canary}",
                "entities": [f"{canary.capitalize()} Entity | github:{canary}"],
                "extra": {"nested": canary},
            },
        },
    )
    observation = _post(
        client,
        "/v1/captures",
        {
            "source_kind": "observation",
            "scope": "vault",
            "sensitivity": level,
            "content": {"subject": f"{canary} subject", "predicate": "keeps", "object": "the key"},
        },
    )
    calls = [
        {"tool": f"tool_{i}_{canary}", "args": {"q": f"{canary}-{i}"}, "result": f"result {canary} {i}"}
        for i in range(3)
    ]
    for _ in range(2):  # two successes: a competence record and a plan graph when plain
        _post(
            client,
            "/v1/captures",
            {
                "source_kind": "outcome",
                "scope": "vault",
                "sensitivity": level,
                "content": {
                    "text": f"did it {canary}",
                    "outcome": "success",
                    "tool_calls": calls,
                    "facts": [{"subject": f"{canary} promoted", "predicate": "is", "object": "mined"}],
                },
            },
        )
    fact_id = observation["record_ids"][1]
    superseded = _post(
        client,
        f"/v1/records/{fact_id}/supersede",
        {
            "record": {"object": f"another {canary}"},
            "rationale": f"because {canary}",
            # RFC 7.6: a provenance ref names a source and stays plain: no canary in it
            "evidence": [{"kind": "observation", "ref": "ticket:4711"}],
        },
    )
    _post(client, f"/v1/records/{superseded['record_ids'][0]}/retract", {"rationale": f"wrong {canary}"})
    return {"episode": episode["record_ids"][0], "tag": tag}


@pytest.mark.parametrize(
    ("level", "sealed"),
    [("hyper", True), ("low", False)],
    ids=["hyper-sealed", "low-plain-positive-control"],
)
def test_a_canary_of_a_sealed_capture_is_nowhere_in_the_database(
    membrane: Membrane, database_url: str, level: str, sealed: bool
) -> None:
    canary = f"zqx{uuid.uuid4().hex[:10]}"
    with api(membrane, API_KEYS, "hyper-key") as client:
        written = _write_everywhere(client, canary, level)
        membrane.maintenance.run(Job.CONSOLIDATE)
        got = client.get(f"/v1/records/{written['episode']}")
        assert got.status_code == 200, got.text
        view = got.json()
        # RFC 7.6: back intact for a reader cleared for it
        assert canary in view["payload"]["text"]
        assert view["summary"] == f"summary {canary}"
        assert view["tags"] == [written["tag"]]
        assert view["metadata"] == {"note": f"metadata {canary}", "reason_to_remember": f"reason {canary}"}
        audit = client.get(f"/v1/records/{written['episode']}/audit").json()
        assert audit["chain_valid"] is True and audit["entries"][0]["rationale"] == "captured"
        tagged = client.post("/v1/retrieve", json={"scopes": ["vault"], "tags": [written["tag"]]}).json()
        assert written["episode"] in {r["id"] for r in tagged["records"]}
    with psycopg.connect(database_url) as conn:
        found = holding(conn, canary)
        mined = conn.execute("SELECT count(*) FROM memory_records WHERE type = 'semantic'").fetchone()
    if sealed:
        assert found == {}, f"the canary of a {level} capture is stored in plain text in {found}"
        assert mined is not None and mined[0] >= 3  # the capture's fact, its successor, the promoted one
    else:
        # positive control: the same writes at a plain level leave the canary in these tables
        assert {"memory_records", "record_payloads", "record_tags", "operations", "audit_log"} <= set(found)
        assert {"entity_terms", "fact_tombstones", "tool_signatures"} <= set(found)


def test_a_redacted_view_never_opens_a_sealed_record(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    opened: list[uuid.UUID] = []

    class Counting(Sealer):
        def open_row(self, row: dict[str, Any]) -> dict[str, Any]:
            if row.get("sealed") is not None:
                opened.append(row["id"])
            return super().open_row(row)

    ring = settings.encryption_ring()
    m = Membrane(settings, database=db, clock=clock, work=WorkOptions(sealer=Counting(ring)))
    rid = m.capture(
        {
            "source_kind": "event",
            "scope": "s",
            "sensitivity": "hyper",
            "tags": ["b", "a"],
            "metadata": {"z": 1, "a": {"y": 2, "b": 3}},
            "content": {"text": "x"},
        }
    )
    high = TrustPolicy(max_sensitivity=Sensitivity.HIGH)
    assert m.get(rid.record_ids[0], high).redacted
    result = m.retrieve({"scopes": ["s"]}, high)
    assert [v.redacted for v in result.records] == [True]
    assert opened == []
    by_id = m.get(rid.record_ids[0], HYPER)
    found = m.retrieve({"scopes": ["s"]}, HYPER).records[0]
    assert opened == [rid.record_ids[0]] * 2
    # RFC 8.3: the view a retrieval builds from the row is the one a read by id makes
    assert found.model_dump_json(exclude={"score"}) == by_id.model_dump_json(exclude={"score"})
    assert by_id.tags == ["a", "b"] and by_id.payload is not None


def test_a_sealed_fact_is_keyed_blind_and_still_deduplicated_and_tombstoned(membrane: Membrane) -> None:
    obs = {
        "source_kind": "observation",
        "scope": "s",
        "sensitivity": "high",
        "content": {"subject": "Alice", "predicate": "works at", "object": "Acme"},
    }
    first = membrane.capture(obs, HYPER)
    again = membrane.capture(obs, HYPER)
    assert (first.fact, again.fact) == ("created", "reinforced")
    assert first.record_ids[1] == again.record_ids[1]
    with membrane.db.transaction() as conn:
        row = conn.execute(
            "SELECT fact_subject, fact_predicate, fact_object, summary, search_text FROM memory_records"
            " WHERE id = %s",
            (first.record_ids[1],),
        ).fetchone()
    assert row is not None and all(v.startswith("hmac:") for v in row[:3]) and row[3:] == (None, "")
    membrane.revisions.retract(first.record_ids[1], {"rationale": "no longer"}, HYPER)
    assert membrane.capture(obs, HYPER).fact == "tombstoned"
    plain = {**obs, "sensitivity": "medium"}  # RFC 7.6: another key space, another fact
    assert membrane.capture(plain, HYPER).fact == "created"


def _hyper(i: int, tag: str = "load") -> dict[str, Any]:
    return {
        "source_kind": "event",
        "scope": f"s{i % 3}",
        "sensitivity": "hyper",
        "tags": [tag],
        "content": {"text": f"secret number {i}"},
    }


@contextlib.contextmanager
def traffic(*loops: Callable[[], None]) -> Iterator[threading.Event]:
    """Each of ``loops`` called over and over in a thread of its own until the block ends (or
    one fails); the first failure is raised at the end."""
    stop = threading.Event()
    failures: list[BaseException] = []

    def run(fn: Callable[[], None]) -> None:
        try:
            while not stop.is_set():
                fn()
        except BaseException as exc:  # raised by the main thread
            failures.append(exc)
            stop.set()

    threads = [threading.Thread(target=run, args=(fn,)) for fn in loops]
    for t in threads:
        t.start()
    try:
        yield stop
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    if failures:
        raise failures[0]


def test_rotation_under_load_leaves_every_record_readable(settings: Settings, database_url: str) -> None:
    db = Database(database_url, embedding_dim=EMBEDDING_DIM, run_migrations=False, min_size=1, max_size=10)
    try:
        old = Membrane(settings, database=db)
        texts = {
            r.record_ids[0]: f"secret number {i}"
            for i, r in enumerate(old.capture_many([_hyper(i) for i in range(240)], HYPER))
        }
        new = Membrane(keyed(settings, {"k1": K1, "k2": K2}, "k2"), database=db)
        assert new.sealing.enqueue(chunk=64) == len(texts)
        lock = threading.Lock()
        counter = iter(range(10_000, 1_000_000))

        def capture() -> None:  # writers already on the new key
            batch = [next(counter) for _ in range(4)]
            for i, r in zip(batch, new.capture_many([_hyper(i) for i in batch], HYPER), strict=True):
                with lock:
                    texts[r.record_ids[0]] = f"secret number {i}"

        def read() -> None:  # by id and by retrieval, records under either key
            with lock:
                rid, text = random.choice(list(texts.items()))
            payload = new.get(rid, HYPER).payload
            assert payload is not None and payload["text"] == text
            views = new.retrieve({"scopes": ["s1"], "tags": ["load"], "limit": 50}, HYPER).records
            assert views and all(v.payload and v.payload["text"].startswith("secret") for v in views)

        batches = 0
        with traffic(capture, read, read) as stop:
            while not stop.is_set():
                result = new.maintenance.run(Job.SEAL, limit=16)
                assert not result.get("failed"), result
                batches += 1
                if result["claimed"] == 0:
                    break
        assert batches > 10  # the rotation ran in many batches while traffic went on
        progress = new.sealing.progress()
        assert new.sealing.done(progress), progress
        assert set(progress["by_key"]) == {"k2"} and progress["by_key"]["k2"] == len(texts)
        # every record decrypts without the old key
        only_new = Membrane(keyed(settings, {"k2": K2}), database=db)
        for rid, text in texts.items():
            payload = only_new.get(rid, HYPER).payload
            assert payload is not None and payload["text"] == text
    finally:
        db.close()


def test_a_record_written_before_encryption_stays_readable_and_is_sealed_by_rotation(
    settings: Settings, db: Database, clock: FakeClock, database_url: str
) -> None:
    canary = f"zqx{uuid.uuid4().hex[:10]}"
    plain = Membrane(
        settings.model_copy(update={"encryption_keys": None, "encryption_index_key": None}),
        database=db,
        clock=clock,
    )
    episode = plain.capture(
        {
            "source_kind": "event",
            "scope": "s",
            "sensitivity": "hyper",
            "summary": f"summary {canary}",
            "tags": [f"t-{canary}"],
            "metadata": {"m": canary},
            "content": {"text": f"code {canary}", "entities": [f"{canary.capitalize()} Person"]},
        },
        HYPER,
    )
    obs = {
        "source_kind": "observation",
        "scope": "s",
        "sensitivity": "hyper",
        "content": {"subject": f"{canary} door", "predicate": "opens with", "object": "a key"},
    }
    fact = plain.capture(obs, HYPER)
    with psycopg.connect(database_url) as conn:
        assert {"memory_records", "record_payloads", "record_tags", "entity_terms"} <= set(
            holding(conn, canary)
        )
    m = Membrane(settings, database=db, clock=clock)
    assert canary in (m.get(episode.record_ids[0], HYPER).payload or {})["text"]
    assert m.sealing.progress()["plain"] >= 3  # the episode, the fact and the entity it mentions
    queued = m.sealing.enqueue()
    assert queued >= 3
    m.maintenance.drain(Job.SEAL)
    assert m.sealing.done()
    with psycopg.connect(database_url) as conn:
        found = holding(conn, canary)
        keys = conn.execute("SELECT DISTINCT key_id FROM record_payloads WHERE key_id IS NOT NULL").fetchall()
    # RFC 7.6: what the rotation cannot rewrite: the audit log of the time (system rationales)
    assert found == {}, found
    assert keys == [("k1",)]
    view = m.get(episode.record_ids[0], HYPER)
    assert view.summary == f"summary {canary}" and view.metadata == {"m": canary}
    assert view.tags == [f"t-{canary}"] and canary in (view.payload or {})["text"]
    tagged = m.retrieve({"scopes": ["s"], "tags": [f"t-{canary}"]}, HYPER).records
    assert [v.id for v in tagged] == [episode.record_ids[0]]
    # the sealed fact's key is blind now, and a new capture of it still meets it
    assert m.capture(obs, HYPER).record_ids[1] == fact.record_ids[1]


def _refused(resp: httpx.Response, key_id: str) -> None:
    assert resp.status_code == 503, resp.text
    error = resp.json()["error"]
    assert error["code"] == "encryption_key_unavailable"
    assert repr(key_id) in error["message"]
    assert resp.headers["retry-after"] == "60"


@pytest.mark.parametrize(
    "ring",
    [{"k2": K2}, {"k1": K2}, None],
    ids=["key-missing-from-ring", "wrong-key-of-that-id", "no-keys-at-all"],
)
def test_a_missing_or_wrong_key_is_a_named_error_through_the_api(
    settings: Settings, db: Database, clock: FakeClock, ring: dict[str, str] | None
) -> None:
    writer = Membrane(settings, database=db, clock=clock)
    rid = writer.capture(
        {
            "source_kind": "event",
            "scope": "s",
            "sensitivity": "hyper",
            "tags": ["t"],
            "content": {"text": "x"},
        },
        HYPER,
    ).record_ids[0]
    if ring is None:
        reader_settings = settings.model_copy(update={"encryption_keys": None, "encryption_index_key": None})
    else:
        reader_settings = keyed(settings, ring)
    reader = Membrane(reader_settings, database=db, clock=clock)
    with api(reader, API_KEYS, "hyper-key") as client:
        _refused(client.get(f"/v1/records/{rid}"), "k1")
        _refused(client.post("/v1/retrieve", json={"scopes": ["s"]}), "k1")
        audit = client.get(f"/v1/records/{rid}/audit")
        if ring is None:  # audit rationales are sealed under the index key (RFC 7.6)
            _refused(audit, "@index")
        else:
            assert audit.json()["entries"][0]["rationale"] == "captured"
    with api(reader, API_KEYS, "high-key") as client:
        redacted = client.get(f"/v1/records/{rid}")  # a redacted view needs no key
        assert redacted.status_code == 200 and redacted.json()["redacted"] is True


def test_sealed_records_are_embedded_only_in_the_process(
    settings: Settings, db: Database, clock: FakeClock
) -> None:
    local = Membrane(settings.model_copy(update={"embedding_provider": "hashing"}), database=db, clock=clock)
    sealed = local.capture(
        {"source_kind": "event", "scope": "s", "sensitivity": "hyper", "content": {"text": "a b"}}
    )
    assert local.embedding.run_batch()["embedded"] == 1
    external = Membrane(
        settings.model_copy(
            update={"embedding_provider": "http", "embedding_base_url": "http://127.0.0.1:9"}
        ),
        database=db,
        clock=clock,
    )
    hidden = external.capture(
        {"source_kind": "event", "scope": "s", "sensitivity": "hyper", "content": {"text": "c"}}
    )
    shown = external.capture(
        {"source_kind": "event", "scope": "s", "sensitivity": "low", "content": {"text": "d"}}
    )
    with db.transaction() as conn:
        embeds = {
            r[0] for r in conn.execute("SELECT target_id FROM work_items WHERE kind = 'embed'").fetchall()
        }
        vectors = {r[0] for r in conn.execute("SELECT record_id FROM record_embeddings").fetchall()}
    assert sealed.record_ids[0] in vectors
    assert hidden.record_ids[0] not in embeds and shown.record_ids[0] in embeds
    allowed = Membrane(
        settings.model_copy(
            update={
                "embedding_provider": "http",
                "embedding_base_url": "http://127.0.0.1:9",
                "embed_encrypted_externally": True,
            }
        ),
        database=db,
        clock=clock,
    )
    assert allowed.work.embed_sealed


def test_the_rotation_command_seals_inline_and_says_when_a_key_may_go(
    settings: Settings, db: Database, database_url: str, tmp_path: Any
) -> None:
    from typer.testing import CliRunner

    from membrane_cli.main import app

    plain = settings.model_copy(update={"encryption_keys": None, "encryption_index_key": None})
    rid = Membrane(plain, database=db).capture(_hyper(1), HYPER).record_ids[0]
    env = {
        "MEMBRANE_DATABASE_URL": database_url,
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_DATA_DIR": str(tmp_path),
    }
    runner = CliRunner()
    out = runner.invoke(app, ["rotate-encryption-key", "--inline"], env=env)
    assert out.exit_code == 2 and "no MEMBRANE_ENCRYPTION_KEYS" in out.output
    env["MEMBRANE_ENCRYPTION_KEYS"] = json.dumps({"k1": K1})
    out = runner.invoke(app, ["rotate-encryption-key", "--inline"], env=env)
    assert out.exit_code == 2 and "MEMBRANE_ENCRYPTION_INDEX_KEY" in out.output  # refused, named
    env["MEMBRANE_ENCRYPTION_INDEX_KEY"] = INDEX
    out = runner.invoke(app, ["rotate-encryption-key", "--inline"], env=env)
    assert out.exit_code == 0, out.output
    assert "1 records to seal under key k1" in out.output and "every record is sealed under k1" in out.output
    env.update(MEMBRANE_ENCRYPTION_KEYS=json.dumps({"k1": K1, "k2": K2}), MEMBRANE_ENCRYPTION_KEY_ID="k2")
    out = runner.invoke(app, ["rotate-encryption-key", "--inline", "--batch", "1"], env=env)
    assert out.exit_code == 0, out.output
    assert "k1 may leave the key ring" in out.output
    only_new = Membrane(keyed(settings, {"k2": K2}), database=db)
    assert (only_new.get(rid, HYPER).payload or {})["text"] == "secret number 1"
