"""Reading Mem0's shapes and turning a memory's history into writes (RFC 15.3); pure, no Mem0."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime
from typing import Any

import pytest

from membrane_core import errors
from membrane_core.transfer import mem0 as source
from membrane_core.transfer.mem0 import Mem0Memory, steps, valid_to
from membrane_core.transfer.mem0_migration import ScopeMapping, episode_id

T0 = "2025-01-02T03:04:05.123456+00:00"
T1 = "2025-02-01T00:00:00+00:00"
T2 = "2025-03-01T12:00:00+00:00"


def at(text: str) -> datetime:
    return datetime.fromisoformat(text)


def event(kind: str, old: str | None, new: str | None, updated: str, eid: str) -> dict[str, Any]:
    return {
        "id": eid,
        "event": kind,
        "old_memory": old,
        "new_memory": new,
        "created_at": T0,
        "updated_at": updated,
    }


def memory(**fields: Any) -> Mem0Memory:
    return Mem0Memory.model_validate({"id": "m1", "user_id": "alice", **fields})


def shape(m: Mem0Memory) -> list[tuple[str, str, datetime | None, str | None]]:
    return [(s.kind, s.key, s.at, s.text) for s in steps(m)]


def test_add_update_delete_replay_at_the_event_times() -> None:
    history = [
        event("ADD", None, "likes tea", T0, "e1"),
        event("UPDATE", "likes tea", "likes coffee", T1, "e2"),
        event("DELETE", "likes coffee", None, T2, "e3"),
    ]
    assert shape(memory(history=history)) == [
        ("add", "e1", at(T0), "likes tea"),
        ("update", "e2", at(T1), "likes coffee"),
        ("delete", "e3", at(T2), None),
    ]


def test_a_history_without_its_add_starts_from_the_old_text() -> None:
    history = [event("UPDATE", "likes tea", "likes coffee", T1, "e2")]
    assert shape(memory(memory="likes coffee", history=history)) == [
        ("add", "e2:before", at(T0), "likes tea"),
        ("update", "e2", at(T1), "likes coffee"),
    ]


def test_the_listed_text_is_the_last_word() -> None:
    no_history = memory(memory="likes tea", created_at=T0, updated_at=T1)
    assert shape(no_history) == [("add", "listed", at(T0), "likes tea")]
    behind = memory(
        memory="likes milk", created_at=T0, updated_at=T2, history=[event("ADD", None, "likes tea", T0, "e1")]
    )
    assert shape(behind) == [("add", "e1", at(T0), "likes tea"), ("update", "listed", at(T2), "likes milk")]
    same = memory(memory="likes tea", history=[event("ADD", None, "likes tea", T0, "e1")])
    assert shape(same) == [("add", "e1", at(T0), "likes tea")]  # nothing added when it agrees


def test_noise_is_dropped_and_order_restored() -> None:
    history = [
        {**event("DELETE", None, None, "2024-12-01T00:00:00Z", "gone"), "created_at": None},  # of nothing
        event("NONE", None, "ignored", T0, "none"),  # not an event this migration knows
        event("UPDATE", "a", "   ", T1, "blank"),  # blank text is no text
        event("ADD", None, "a", T0, "e1"),
    ]
    assert shape(memory(history=list(reversed(history)))) == [("add", "e1", at(T0), "a")]
    # a listed text stamped before the history's last event is written after it, not before
    behind = memory(
        memory="c",
        updated_at=T1,
        history=[event("ADD", None, "a", T0, "e1"), event("UPDATE", "a", "b", T2, "e2")],
    )
    assert shape(behind)[-1] == ("update", "listed", at(T2), "c")


def test_times_without_a_zone_are_utc_and_expiry_holds_through_its_day() -> None:
    m = memory(memory="x", created_at="2025-01-02T03:04:05", expiration_date="2030-12-31T00:00:00")
    assert m.created_at == datetime(2025, 1, 2, 3, 4, 5, tzinfo=UTC)
    assert valid_to(m) == datetime(2031, 1, 1, tzinfo=UTC)
    assert valid_to(memory(memory="x")) is None


def test_the_scope_is_the_first_owner_and_can_be_overridden() -> None:
    both = memory(memory="x", agent_id="helper", run_id="r1")
    assert ScopeMapping().place(both) == ("user:alice", "alice")
    assert ScopeMapping().place(memory(memory="x", user_id=None, run_id="r1")) == ("run:r1", "r1")
    assert ScopeMapping(user="tenant/{id}").place(both) == ("tenant/alice", "alice")
    assert ScopeMapping(scope="one").place(both) == ("one", "alice")
    ownerless = Mem0Memory(id="gone")
    assert ScopeMapping().place(ownerless) is None
    assert ScopeMapping(unowned="mem0:deleted").place(ownerless) == ("mem0:deleted", "unknown")


def test_an_episode_id_is_a_version_7_uuid_of_the_step() -> None:
    first = episode_id("m1", "e1", at(T0))
    assert first == episode_id("m1", "e1", at(T0))  # the same on every run
    assert first.version == 7 and first.variant == uuid.RFC_4122
    assert first.int >> 80 == int(at(T0).timestamp() * 1000)  # its time is the step's
    assert len({first, episode_id("m1", "e2", at(T0)), episode_id("m2", "e1", at(T0))}) == 3


def test_file_shapes_parse_and_a_dump_reads_back_the_same() -> None:
    listed = {"id": "m1", "memory": "likes tea", "user_id": "alice", "created_at": T0, "score": 0.3}
    history = {"m1": [event("ADD", None, "likes tea", T0, "e1")], "m2": [event("ADD", None, "x", T0, "e9")]}
    parsed = source.parse({"results": [listed], "history": history})
    assert [(m.id, m.memory, len(m.history)) for m in parsed] == [("m1", "likes tea", 1), ("m2", None, 1)]
    assert source.parse([listed])[0].history == []  # a plain list of get_all's memories
    assert source.parse(source.dump(parsed)) == parsed
    dumped = source.dump([*parsed, Mem0Memory(id="m3", user_id="bob", history=parsed[1].history)])
    assert list(dumped["history"]) == ["m2"]  # ownerless only; bob's deleted memory stays listed
    assert [r["id"] for r in dumped["results"]] == ["m1", "m3"]


@pytest.mark.parametrize(
    ("data", "says"),
    [
        ("text", "a list of memories"),
        ({"results": {"id": "x"}}, "'results' must be a list"),
        ([{"memory": "no id"}], "memory 0"),
        ([{"id": "m1", "created_at": "yesterday"}], "created_at"),
    ],
)
def test_a_file_in_another_shape_is_refused_by_name(data: Any, says: str) -> None:
    with pytest.raises(errors.InvalidInput, match=says):
        source.parse(data)


def test_the_rest_source_asks_for_each_entity_and_each_history() -> None:
    asked: list[tuple[str, dict[str, str]]] = []
    listed = {"alice": [{"id": "m1", "memory": "likes tea", "user_id": "alice"}], "r1": []}

    def get(path: str, params: Any) -> Any:
        asked.append((path, dict(params)))
        if path == "/memories":
            return {"results": listed[next(iter(params.values()))]}
        return [event("ADD", None, "likes tea", T0, "e1")]

    found = source.read_rest(get, source.Entities(users=("alice",), runs=("r1",)))
    assert [(m.id, len(m.history)) for m in found] == [("m1", 1)]
    assert asked == [
        ("/memories", {"user_id": "alice"}),
        ("/memories", {"run_id": "r1"}),
        ("/memories/m1/history", {}),
    ]
    with pytest.raises(errors.InvalidInput, match="name at least one"):
        source.read_rest(get, source.Entities())


def test_the_package_does_not_import_mem0() -> None:
    """Mem0 is an extra: importing the migration and the command's module loads none of it."""
    code = (
        "import sys, membrane_core, membrane_core.transfer.mem0_migration, membrane_cli.from_mem0\n"
        "loaded = [m for m in sys.modules if m.startswith('membrane_cli.from_mem0') or m == 'mem0']\n"
        "print(sorted(loaded))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["['membrane_cli.from_mem0']"]  # the module itself, no mem0
