"""Mem0 migration against a real Mem0 and real Postgres (RFC 15.3).

Mem0 (mem0ai) runs in the test's process with ``infer=False`` (no LLM is asked anything), a
local Qdrant and SQLite history under ``tmp_path``, and a deterministic embedder of its own;
its OpenAI clients point at a closed loopback port, and a guard refuses every connection to a
host other than this one. What it stored, updated and deleted is replayed into the store at
Mem0's times: nothing Mem0 corrected is current, each current text is.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import math
import socket
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from typer.testing import CliRunner

from membrane_cli import from_mem0
from membrane_core import Membrane, Settings
from membrane_core.results import RecordView
from membrane_core.storage.db import Database
from membrane_core.transfer import mem0 as source
from membrane_core.transfer.mem0_migration import (
    TAG,
    Mem0Report,
    ReplayClock,
    ScopeMapping,
    episode_id,
    migrate,
)
from membrane_core.trust import TrustPolicy
from tests.support import services
from tests.support.api import Server
from tests.support.services import EMBEDDING_DIM
from tests.support.sql import rows

# found, not imported: Mem0 reads its environment when first imported (``mem0_env``)
if importlib.util.find_spec("mem0") is None:
    pytest.skip("the mem0 extra is not installed", allow_module_level=True)

TRUST = TrustPolicy(actor="import:mem0")
MAPPING = ScopeMapping(unowned="mem0:deleted")
EVERY_STATUS = ["active", "contested", "retracted", "proposed"]
DIMS = 8
#: a port nothing listens on: Mem0's OpenAI clients are built, never called (infer=False)
OFFLINE = "http://127.0.0.1:9/v1"


# -- the guard: nothing leaves this machine ---------------------------------------------------


def _local(host: object) -> bool:
    return host is None or str(host) in {"localhost", "127.0.0.1", "::1", ""}


@pytest.fixture(autouse=True)
def offline(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Every name lookup or connection to another host fails, and is listed; none may happen."""
    tried: list[str] = []
    real_lookup, real_connect = socket.getaddrinfo, socket.socket.connect

    def lookup(host: Any, *args: Any, **kwargs: Any) -> Any:
        if not _local(host):
            tried.append(f"lookup {host}")
            raise socket.gaierror(f"offline test: no lookup of {host}")
        return real_lookup(host, *args, **kwargs)

    def connect(sock: socket.socket, address: Any) -> None:
        if sock.family in (socket.AF_INET, socket.AF_INET6) and not _local(address[0]):
            tried.append(f"connect {address}")
            raise OSError(f"offline test: no connection to {address}")
        real_connect(sock, address)

    monkeypatch.setattr(socket, "getaddrinfo", lookup)
    monkeypatch.setattr(socket.socket, "connect", connect)
    yield tried
    assert tried == [] or tried == ["lookup mem0.invalid"], tried


def test_the_guard_refuses_another_host(offline: list[str]) -> None:
    with pytest.raises(OSError):
        socket.getaddrinfo("mem0.invalid", 443)
    assert offline == ["lookup mem0.invalid"]
    assert socket.getaddrinfo("127.0.0.1", 9)  # positive control: loopback still resolves


# -- a real Mem0 --------------------------------------------------------------------------------


def _embedder() -> Any:
    """A Mem0 embedder whose vectors come from SHA-256 of the text (no model, no network)."""
    from mem0.configs.embeddings.base import BaseEmbedderConfig
    from mem0.embeddings.base import EmbeddingBase

    class Sha256Embedder(EmbeddingBase):  # type: ignore[misc]
        def embed(self, text: str, memory_action: str | None = None) -> list[float]:
            raw = b"".join(hashlib.sha256(f"{n}/{text}".encode()).digest() for n in range(DIMS // 8 + 1))
            values = [b / 255 - 0.5 for b in raw[:DIMS]]
            norm = math.sqrt(sum(v * v for v in values)) or 1.0
            return [v / norm for v in values]

    return Sha256Embedder(BaseEmbedderConfig(embedding_dims=DIMS))


def mem0_config(folder: Path) -> dict[str, Any]:
    """A Mem0 configuration whose stores live under ``folder``."""
    openai = {"api_key": "sk-offline", "openai_base_url": OFFLINE}
    return {
        "vector_store": {
            "provider": "qdrant",
            "config": {
                "path": str(folder / "qdrant"),
                "on_disk": True,
                "collection_name": "memories",
                "embedding_model_dims": DIMS,
            },
        },
        "history_db_path": str(folder / "history.db"),
        "llm": {"provider": "openai", "config": openai},
        "embedder": {"provider": "openai", "config": {**openai, "embedding_dims": DIMS}},
    }


@pytest.fixture(scope="session")
def mem0_env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Set before Mem0 is first imported, which reads them once: no telemetry, and its own
    files (it writes a config on import) in a folder of the run."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("MEM0_TELEMETRY", "False")
        patch.setenv("MEM0_DIR", str(tmp_path_factory.mktemp("mem0home")))
        yield


class Mem0:
    """A Mem0 ``Memory`` under a folder; :meth:`close` lets another client open its Qdrant."""

    def __init__(self, folder: Path) -> None:
        from mem0 import Memory

        self.memory = Memory.from_config(mem0_config(folder))
        self.memory.embedding_model = _embedder()

    def add(self, text: str, **ids: Any) -> str:
        found = self.memory.add(text, infer=False, **ids)
        return str(found["results"][0]["id"])

    def close(self) -> None:
        self.memory.close()
        self.memory.vector_store.client.close()


@pytest.fixture
def mem0(mem0_env: None, tmp_path: Path) -> Iterator[Mem0]:
    store = Mem0(tmp_path / "mem0")
    yield store
    store.close()


def fill(store: Mem0) -> dict[str, str]:
    """A user's, an agent's and a run's memories; one updated, one deleted."""
    ids = {
        "tea": store.add("Alice likes green tea", user_id="alice", metadata={"source": "chat"}),
        "home": store.add(
            [{"role": "user", "content": "Alice lives in Berlin", "name": "alice-phone"}], user_id="alice"
        ),
        "bot": store.add("Answer in English", agent_id="helper", metadata={"kind": "policy"}),
        "run": store.add("The import of run r1 finished", run_id="r1"),
    }
    store.memory.update(ids["tea"], "Alice likes jasmine tea")
    store.memory.delete(ids["home"])
    return ids


class Store:
    """A store built on a ReplayClock: ``m`` to read it, ``target`` for the migration."""

    def __init__(self, database: Database, settings: Settings) -> None:
        clock = ReplayClock()
        self.m = Membrane(settings, database=database, clock=clock)
        self.target = from_mem0.target(self.m, clock)


@pytest.fixture
def store(db: Database, settings: Settings) -> Store:
    return Store(db, settings)


def facts(m: Membrane) -> dict[str, RecordView]:
    """Every fact of the store by its object."""
    page = m.listing.records({"types": ["semantic"], "statuses": EVERY_STATUS, "limit": 200}, TRUST)
    return {str((r.payload or {})["object"]): r for r in page.records}


def retrieved(m: Membrane, query: str) -> list[RecordView]:
    return m.retrieve({"query": query, "limit": 50}, TRUST).records


def times(store: Mem0, memory_id: str) -> list[datetime]:
    return [datetime.fromisoformat(e["updated_at"]) for e in store.memory.history(memory_id)]


# -- the tests ----------------------------------------------------------------------------------


def test_mem0_history_replays_at_its_times_and_nothing_corrected_is_current(
    mem0: Mem0, store: Store, database_url: str
) -> None:
    ids = fill(mem0)
    memories = source.read_memory(mem0.memory)
    assert {x.id for x in memories} == set(ids.values())  # the deleted one from the history

    report = migrate(store.target, memories, TRUST, MAPPING)
    assert (report.memories, report.facts_written, report.superseded, report.retracted) == (4, 5, 1, 1)
    assert report.scopes == ["agent:helper", "mem0:deleted", "run:r1", "user:alice"]
    assert (report.skipped, report.failures, report.left_out) == (0, 0, 0)

    by_object = facts(store.m)
    current = ["Alice likes jasmine tea", "Answer in English", "The import of run r1 finished"]
    corrected = ["Alice likes green tea", "Alice lives in Berlin"]
    assert sorted(by_object) == sorted(current + corrected)
    assert all(by_object[o].status.value == "active" for o in current)
    assert all(by_object[o].status.value == "retracted" for o in corrected)

    # RFC 5.1: retrieval returns each current text, and no corrected one; no episode stays
    for query, kept, gone in [
        ("Alice tea", "Alice likes jasmine tea", "Alice likes green tea"),
        ("Alice lives in Berlin", "Alice likes jasmine tea", "Alice lives in Berlin"),
        ("English", "Answer in English", None),
    ]:
        found = retrieved(store.m, query)
        objects = [str((r.payload or {}).get("object")) for r in found]
        assert kept in objects, (query, objects)
        assert gone not in objects and {r.type.value for r in found} == {"semantic"}

    # Mem0's times: the add, the update and the delete
    tea, green, home = by_object["Alice likes jasmine tea"], by_object[corrected[0]], by_object[corrected[1]]
    added, updated = times(mem0, ids["tea"])
    assert green.created_at == green.recorded_at == added and green.retracted_at == updated
    assert tea.created_at == updated and tea.scope == "user:alice"
    assert (tea.payload or {})["subject"] == "alice" and (tea.payload or {})["predicate"] == "remembers"
    assert home.retracted_at == times(mem0, ids["home"])[-1] and home.scope == "mem0:deleted"
    assert ("superseded_by", tea.id) in {(r.predicate, r.target_id) for r in green.relations}

    # Mem0's ids, hash, metadata and actor are kept
    kept_meta = tea.metadata[TAG]
    listed = mem0.memory.get(ids["tea"])
    assert kept_meta["id"] == ids["tea"] and kept_meta["hash"] == listed["hash"]
    assert kept_meta["metadata"] == {"source": "chat"} and kept_meta["user_id"] == "alice"
    assert "hash" not in green.metadata[TAG]  # Mem0 keeps the hash of the current text only
    assert by_object["Answer in English"].metadata[TAG]["metadata"] == {"kind": "policy"}
    assert home.metadata[TAG]["actor_id"] == "alice-phone" and TAG in tea.tags

    # RFC 5.4: both corrected texts are tombstoned
    assert {r[0] for r in rows(database_url, "SELECT object FROM fact_tombstones")} == {
        "alice likes green tea",
        "alice lives in berlin",
    }
    # each add's episode was written, then deleted: its audit stays
    run = next(x for x in memories if x.id == ids["run"])
    add = source.steps(run)[0]
    episode = episode_id(run.id, add.key, add.at)
    assert episode.version == 7
    assert [e.action for e in store.m.audit(episode, TRUST).entries] == ["create", "delete"]
    assert rows(database_url, "SELECT count(*) FROM memory_records WHERE type = 'episodic'") == [(0,)]

    # a second run writes nothing: not a record, not an audit entry
    counts = "SELECT (SELECT count(*) FROM memory_records), (SELECT count(*) FROM audit_log)"
    before = rows(database_url, counts)
    again = migrate(store.target, source.read_memory(mem0.memory), TRUST, MAPPING)
    assert (again.skipped, again.facts_written, again.retracted, again.memories) == (4, 0, 0, 4)
    assert rows(database_url, counts) == before and before[0][0] == 5  # positive control: 5 facts


def test_a_dump_file_migrates_as_the_store_itself(
    mem0: Mem0, store: Store, pg_admin_url: str, settings: Settings, tmp_path: Path
) -> None:
    fill(mem0)
    dumped = tmp_path / "mem0.json"
    dumped.write_text(json.dumps(source.dump(source.read_memory(mem0.memory))))
    assert len(json.loads(dumped.read_text())["history"]) == 1  # the deleted memory, ownerless

    direct = migrate(store.target, source.read_memory(mem0.memory), TRUST, MAPPING)
    with services.fresh_database(pg_admin_url) as url:
        other = Database(url, embedding_dim=EMBEDDING_DIM, min_size=1, max_size=2)
        try:
            second = Store(other, settings.model_copy(update={"database_url": url}))
            from_file = migrate(second.target, source.read_file(dumped), TRUST, MAPPING)
            assert from_file == direct
            assert _shape(facts(second.m)) == _shape(facts(store.m))
        finally:
            other.close()


def _shape(found: dict[str, RecordView]) -> dict[str, tuple[Any, ...]]:
    return {
        o: (r.scope, r.status.value, r.created_at, r.retracted_at, r.metadata, r.tags)
        for o, r in found.items()
    }


def test_a_deleted_memory_with_its_owner_in_the_file_is_retracted_in_its_scope(
    store: Store, tmp_path: Path
) -> None:
    file = tmp_path / "hand.json"
    history = [
        {"id": "e1", "event": "ADD", "new_memory": "Bob owns a boat", "created_at": "2024-03-01T10:00:00Z"},
        {
            "id": "e2",
            "event": "DELETE",
            "old_memory": "Bob owns a boat",
            "created_at": "2024-03-01T10:00:00Z",
            "updated_at": "2024-05-01T08:30:00Z",
        },
    ]
    kept = {
        "id": "m2",
        "memory": "Bob sails on Sundays",
        "user_id": "bob",
        "created_at": "2024-03-02T09:00:00",  # no zone: UTC
        "expiration_date": "2030-12-31",
    }
    file.write_text(json.dumps({"results": [{"id": "m1", "user_id": "bob", "history": history}, kept]}))

    report = migrate(store.target, source.read_file(file), TRUST)  # no scope for ownerless memories
    assert (report.facts_written, report.retracted, report.scopes) == (2, 1, ["user:bob"])
    found = facts(store.m)
    boat, sail = found["Bob owns a boat"], found["Bob sails on Sundays"]
    assert boat.status.value == "retracted" and boat.scope == "user:bob"
    assert boat.retracted_at == datetime.fromisoformat("2024-05-01T08:30:00+00:00")
    assert sail.status.value == "active"  # positive control
    assert sail.created_at == datetime.fromisoformat("2024-03-02T09:00:00+00:00")
    assert sail.validity is not None and sail.validity.valid_to == datetime.fromisoformat("2031-01-01T00:00Z")


def test_a_later_run_carries_on_with_what_mem0_did_since(mem0: Mem0, store: Store) -> None:
    tea = mem0.add("Alice likes green tea", user_id="alice")
    home = mem0.add("Alice lives in Berlin", user_id="alice")
    first = migrate(store.target, source.read_memory(mem0.memory), TRUST, MAPPING)
    assert (first.facts_written, first.skipped) == (2, 0)

    mem0.memory.update(tea, "Alice likes jasmine tea")
    mem0.memory.delete(home)
    mem0.add("Alice plays chess", user_id="alice")
    second = migrate(store.target, source.read_memory(mem0.memory), TRUST, MAPPING)
    assert (second.resumed, second.superseded, second.retracted, second.facts_written) == (2, 1, 1, 2)
    status = {o: r.status.value for o, r in facts(store.m).items()}
    assert status == {
        "Alice likes green tea": "retracted",
        "Alice likes jasmine tea": "active",
        "Alice lives in Berlin": "retracted",
        "Alice plays chess": "active",
    }
    # the deleted memory is in alice's scope: the first run saw its owner
    assert facts(store.m)["Alice lives in Berlin"].scope == "user:alice"


def test_two_memories_of_one_text_share_a_fact_until_both_are_gone(mem0: Mem0, store: Store) -> None:
    first = mem0.add("Alice likes tea", user_id="alice")
    second = mem0.add("Alice likes tea", user_id="alice")
    report = migrate(store.target, source.read_memory(mem0.memory), TRUST)
    assert (report.facts_written, report.shared) == (1, 1)  # RFC 3.4: one key, reinforced

    # deleted, a memory names no owner: it is found where the run before put it
    mem0.memory.delete(first)
    later = migrate(store.target, source.read_memory(mem0.memory), TRUST)
    assert (later.retracted, later.left_out, later.scopes) == (0, 0, ["user:alice"])
    assert facts(store.m)["Alice likes tea"].status.value == "active"  # the second still holds it

    mem0.memory.delete(second)
    last = migrate(store.target, source.read_memory(mem0.memory), TRUST)
    assert (last.retracted, last.facts_written, last.shared) == (1, 0, 0)
    assert facts(store.m)["Alice likes tea"].status.value == "retracted"


def _rest_app(memory: Any) -> FastAPI:
    """The two routes of Mem0's REST server a migration reads, on the same ``Memory``."""
    app = FastAPI()

    @app.get("/memories")
    def listed(user_id: str | None = None, agent_id: str | None = None, run_id: str | None = None) -> Any:
        ids = {"user_id": user_id, "agent_id": agent_id, "run_id": run_id}
        return memory.get_all(filters={k: v for k, v in ids.items() if v})

    @app.get("/memories/{memory_id}/history")
    def history(memory_id: str) -> Any:
        return memory.history(memory_id)

    return app


def test_the_rest_source_reads_a_running_server(mem0: Mem0, store: Store) -> None:
    fill(mem0)
    with Server(_rest_app(mem0.memory)) as server, httpx.Client(base_url=server.url) as client:

        def get(path: str, params: Any) -> Any:
            return client.get(path, params=params).raise_for_status().json()

        entities = source.Entities(users=("alice",), agents=("helper",))
        memories = source.read_rest(get, entities)
    assert len(memories) == 2  # the run's memory is not asked for, the deleted one not listed
    report = migrate(store.target, memories, TRUST)
    assert (report.facts_written, report.superseded, report.scopes) == (3, 1, ["agent:helper", "user:alice"])
    status = {o: r.status.value for o, r in facts(store.m).items()}
    assert status == {
        "Alice likes green tea": "retracted",
        "Alice likes jasmine tea": "active",
        "Answer in English": "active",
    }


def _cli(args: list[str], database_url: str, tmp_path: Path) -> tuple[int, str]:
    from membrane_cli import main

    env = {
        "MEMBRANE_DATABASE_URL": database_url,
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_DATA_DIR": str(tmp_path / "cli"),
    }
    out = CliRunner().invoke(main.app, ["import", "--from", "mem0", *args], env=env)
    if out.exception is not None and not isinstance(out.exception, SystemExit):
        raise out.exception
    return out.exit_code, " ".join(out.output.split())


def test_membrane_import_from_mem0_reads_a_config_or_a_file(
    mem0: Mem0, database_url: str, tmp_path: Path, store: Store
) -> None:
    fill(mem0)
    dumped = tmp_path / "mem0.json"
    dumped.write_text(json.dumps(source.dump(source.read_memory(mem0.memory))))
    mem0.close()  # one Qdrant client per folder: the command opens its own
    config = tmp_path / "mem0-config.json"
    config.write_text(json.dumps(mem0_config(tmp_path / "mem0")))

    code, out = _cli(
        ["--mem0-config", str(config), "--unowned-scope", "mem0:deleted"], database_url, tmp_path
    )
    assert code == 0, out
    assert "4 Mem0 memories, 5 facts written (1 superseding), 1 retracted, 0 already migrated" in out
    code, out = _cli([str(dumped), "--unowned-scope", "mem0:deleted"], database_url, tmp_path)
    assert code == 0 and "4 already migrated" in out, out
    assert sorted(facts(store.m)) == sorted(
        [
            "Alice likes green tea",
            "Alice likes jasmine tea",
            "Alice lives in Berlin",
            "Answer in English",
            "The import of run r1 finished",
        ]
    )

    code, out = _cli([], database_url, tmp_path)
    assert code == 1 and "a file, --mem0-config or --mem0-url" in out, out


def test_report_summary_names_only_what_happened() -> None:
    line = Mem0Report(memories=3, facts_written=2, retracted=1, scopes=["user:a"]).summary()
    assert (
        line == "3 Mem0 memories, 2 facts written (0 superseding), 1 retracted, 0 already migrated; 1 scopes"
    )


def test_a_migration_needs_a_replay_clock_and_a_trusted_writer(membrane: Membrane, store: Store) -> None:
    from membrane_core import errors

    with pytest.raises(errors.InvalidInput):  # the test's clock: Mem0's times could not be set
        migrate(from_mem0.target(membrane, ReplayClock()), [], TRUST)
    with pytest.raises(errors.Forbidden):
        migrate(store.target, [], TrustPolicy(actor="model", review_required=True))
    assert migrate(store.target, [], TRUST).memories == 0  # positive control
