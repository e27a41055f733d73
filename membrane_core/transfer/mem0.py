"""Mem0 memories as the migration reads them (RFC 15.3): from a JSON file, a ``mem0.Memory``
object, or Mem0's REST server; and each memory's history as the steps that replay it.

Each source yields :class:`Mem0Memory` values: a memory as Mem0's ``get_all`` lists it, with
its history (Mem0's ``history(memory_id)``). A memory Mem0 has deleted is gone from
``get_all``; it is known only from its history, whose rows name no user, agent or run.

Nothing here imports ``mem0`` or an HTTP client: the Python API source takes the caller's
``Memory`` object, and the REST source a ``get(path, params)`` function that the entry point
builds on its own client.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, Field, ValidationError

from membrane_core import errors

#: Mem0's own paging default (``get_all(top_k=20)``) would cut a store short: the most
#: memories a source reads for one user, agent or run, or from a whole store.
LIMIT = 100_000
#: RFC 15.3: the entity kinds Mem0 files a memory under, in the order the scope mapping reads them.
ENTITY_KEYS = ("user_id", "agent_id", "run_id")


def _utc(value: datetime) -> datetime:
    """Mem0 writes ISO 8601 with an offset; a time without one is taken as UTC."""
    return value if value.tzinfo is not None else value.replace(tzinfo=UTC)


def _day(value: Any) -> Any:
    """Mem0 writes an expiration as ``YYYY-MM-DD``; a time after the date is dropped."""
    return value[:10] if isinstance(value, str) else value


Time = Annotated[datetime, AfterValidator(_utc)]
Day = Annotated[date, BeforeValidator(_day)]


class _Mem0Shape(BaseModel):
    """Mem0's JSON as it is: keys this migration does not read are ignored."""

    model_config = ConfigDict(frozen=True, extra="ignore")


class Mem0Event(_Mem0Shape):
    """One row of a memory's history: ``ADD``, ``UPDATE`` or ``DELETE``, with the text before
    and after. An update or delete keeps the memory's ``created_at``; ``updated_at`` is when
    it happened."""

    id: str | None = None
    memory_id: str | None = None
    event: str
    old_memory: str | None = None
    new_memory: str | None = None
    created_at: Time | None = None
    updated_at: Time | None = None
    actor_id: str | None = None
    role: str | None = None

    @property
    def at(self) -> datetime | None:
        """When the event happened."""
        if self.event.upper() == "ADD":
            return self.created_at or self.updated_at
        return self.updated_at or self.created_at


class Mem0Memory(_Mem0Shape):
    """A Mem0 memory with its history; ``memory`` (its text) is None for a deleted one."""

    id: str = Field(min_length=1)
    memory: str | None = None
    hash: str | None = None
    metadata: dict[str, Any] | None = None
    created_at: Time | None = None
    updated_at: Time | None = None
    user_id: str | None = None
    agent_id: str | None = None
    run_id: str | None = None
    actor_id: str | None = None
    role: str | None = None
    attributed_to: str | None = None
    #: the last day the memory holds (Mem0 hides it from the day after)
    expiration_date: Day | None = None
    history: list[Mem0Event] = Field(default_factory=list)

    def entities(self) -> dict[str, str]:
        """The user, agent and run ids the memory names (none for a deleted one)."""
        return {k: v for k in ENTITY_KEYS if (v := getattr(self, k))}


class Entities(BaseModel):
    """The users, agents and runs whose memories a source lists (none: the whole store, where
    the source can enumerate it)."""

    model_config = ConfigDict(frozen=True)

    users: tuple[str, ...] = ()
    agents: tuple[str, ...] = ()
    runs: tuple[str, ...] = ()

    def filters(self) -> list[dict[str, str]]:
        """One Mem0 filter per id: ``{"user_id": ...}`` and so on."""
        pairs = [("user_id", self.users), ("agent_id", self.agents), ("run_id", self.runs)]
        return [{key: value} for key, values in pairs for value in values]


Kind = Literal["add", "update", "delete"]
#: the order of a memory's events at one time
_ORDER = {"ADD": 0, "UPDATE": 1, "DELETE": 2}
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass(frozen=True)
class Step:
    """One write of a memory's replay: an add or update sets ``text``, a delete clears it."""

    memory: Mem0Memory
    kind: Kind
    key: str  #: the history event's id, or a name for a step the history does not hold
    at: datetime | None
    text: str | None = None
    actor_id: str | None = None
    role: str | None = None


def steps(memory: Mem0Memory) -> list[Step]:
    """RFC 15.3: a memory's history as writes, in order. An update or delete of a memory whose
    add the history lacks starts with an add of its old text; a memory listed with a text the
    history does not end with gets a last update (or its only add) with that text; a delete of
    nothing is dropped, and so is blank text."""
    out: list[Step] = []
    text: str | None = None
    events = sorted(
        (e for e in memory.history if e.event.upper() in _ORDER),
        key=lambda e: (e.at or _EPOCH, _ORDER[e.event.upper()]),
    )
    for n, e in enumerate(events):
        kind, key = e.event.upper(), e.id or f"event-{n}"
        who = {"actor_id": e.actor_id, "role": e.role}
        old, new = _text(e.old_memory), _text(e.new_memory)
        if kind != "ADD" and text is None and old:
            out.append(Step(memory, "add", f"{key}:before", e.created_at or e.at, old, **who))
            text = old
        if kind == "DELETE":
            if text is not None:
                out.append(Step(memory, "delete", key, e.at, None, **who))
            text = None
        elif new:
            out.append(Step(memory, "add" if text is None else "update", key, e.at, new, **who))
            text = new
    current = _text(memory.memory)
    if current and current != text:
        at = memory.created_at if text is None else memory.updated_at or memory.created_at
        who = {"actor_id": memory.actor_id, "role": memory.role}
        out.append(Step(memory, "add" if text is None else "update", "listed", at, current, **who))
    return _monotonic(out)


def _text(value: str | None) -> str | None:
    return value.strip() or None if value else None


def _monotonic(out: list[Step]) -> list[Step]:
    """A step never goes before the one it follows, whatever the history's times say."""
    last: datetime | None = None
    fixed = []
    for s in out:
        at = s.at if s.at is None or last is None else max(s.at, last)
        fixed.append(Step(s.memory, s.kind, s.key, at, s.text, s.actor_id, s.role))
        last = at or last
    return fixed


def valid_to(memory: Mem0Memory) -> datetime | None:
    """RFC 15.3: a memory Mem0 hides after its expiration date holds until the next day."""
    day = memory.expiration_date
    return datetime.combine(day + timedelta(days=1), time(), UTC) if day is not None else None


def parse(data: Any) -> list[Mem0Memory]:
    """RFC 15.3: memories from the file shape: ``get_all``'s result (``{"results": [...]}``)
    or a plain list of its memories, each with an optional ``history`` list, and an optional
    top-level ``history`` map of memory id to events, which also names deleted memories."""
    extra: Any
    if isinstance(data, list):
        listed, extra = data, {}
    elif isinstance(data, dict):
        listed, extra = data.get("results", []), data.get("history") or {}
    else:
        raise errors.InvalidInput("a Mem0 file holds a list of memories or an object with 'results'")
    if not isinstance(listed, list) or not isinstance(extra, dict):
        raise errors.InvalidInput("'results' must be a list and 'history' an object of memory ids")
    out: list[Mem0Memory] = []
    seen: set[str] = set()
    for i, item in enumerate([*listed, *({"id": k, "history": v} for k, v in extra.items())]):
        if not isinstance(item, dict):
            raise errors.InvalidInput(f"Mem0 memory {i} is not an object")
        mem_id = str(item.get("id", ""))
        if mem_id in seen:
            continue  # listed, and its history given in the map as well
        history = item.get("history") or extra.get(mem_id) or []
        out.append(_memory({**item, "history": history}, where=f"memory {mem_id or i}"))
        seen.add(mem_id)
    return out


def read_file(path: Path) -> list[Mem0Memory]:
    """RFC 15.3: the memories of a JSON file of the shape :func:`parse` reads."""
    try:
        data = json.loads(path.read_bytes())
    except OSError as exc:
        raise errors.InvalidInput(f"cannot read {path}: {exc.strerror}") from exc
    except ValueError as exc:
        raise errors.InvalidInput(f"{path} is not JSON: {exc}") from exc
    return parse(data)


def read_memory(memory: Any, entities: Entities | None = None, *, limit: int = LIMIT) -> list[Mem0Memory]:
    """RFC 15.3: every memory of a ``mem0.Memory`` with its history.

    With ``entities``, the memories ``get_all`` lists for each id. Without, the whole store:
    the ids its vector store lists, and, where its history database is a SQLite file Mem0 opened
    (the default), every id the history names, so deleted memories come too (without an owner,
    which Mem0 does not keep)."""
    live: dict[str, dict[str, Any]] = {}
    if entities is not None and entities.filters():
        for f in entities.filters():
            found = memory.get_all(filters=f, top_k=limit, show_expired=True)
            _append(live, _listed(found), limit, f)
    else:
        for mem_id in _vector_ids(memory, limit):
            item = memory.get(mem_id)
            if item is not None:
                live[str(item["id"])] = item
    gone = [] if entities is not None and entities.filters() else _history_ids(memory)
    out = [_memory({**item, "history": memory.history(i)}, where=f"memory {i}") for i, item in live.items()]
    out += [
        _memory({"id": i, "history": memory.history(i)}, where=f"memory {i}") for i in gone if i not in live
    ]
    return out


def read_rest(get: Callable[[str, Mapping[str, str]], Any], entities: Entities) -> list[Mem0Memory]:
    """RFC 15.3: the memories of a Mem0 REST server, ``GET /memories?user_id=...`` for each id
    and ``GET /memories/{id}/history`` for each memory; ``get`` returns the decoded JSON."""
    if not entities.filters():
        raise errors.InvalidInput("Mem0's REST API lists memories by user, agent or run: name at least one")
    live: dict[str, dict[str, Any]] = {}
    for f in entities.filters():
        _append(live, _listed(get("/memories", f)), LIMIT, f)
    return [
        _memory({**item, "history": get(f"/memories/{i}/history", {})}, where=f"memory {i}")
        for i, item in live.items()
    ]


def dump(memories: Iterable[Mem0Memory]) -> dict[str, Any]:
    """RFC 15.3: the file shape of ``memories``: each under ``results`` with its ``history``,
    but a deleted one that names no owner (no text, no ids) in the ``history`` map."""
    results: list[dict[str, Any]] = []
    gone: dict[str, Any] = {}
    for m in memories:
        body = m.model_dump(mode="json", exclude_none=True)
        if m.memory is None and not m.entities():
            gone[m.id] = body["history"]
        else:
            results.append(body)
    return {"results": results, "history": gone}


def _listed(found: Any) -> list[dict[str, Any]]:
    items = found.get("results") if isinstance(found, dict) else found
    if not isinstance(items, list) or not all(isinstance(i, dict) and "id" in i for i in items):
        raise errors.InvalidInput("Mem0 listed memories in a shape other than get_all's")
    return items


def _append(
    live: dict[str, dict[str, Any]], items: list[dict[str, Any]], limit: int, f: Mapping[str, str]
) -> None:
    if len(items) >= limit:
        raise errors.InvalidInput(f"Mem0 lists {limit} memories or more for {dict(f)}: raise the limit")
    for item in items:
        live.setdefault(str(item["id"]), item)


def _vector_ids(memory: Any, limit: int) -> list[str]:
    """The ids of the vector store's points (its ``list`` returns them bare or in one more
    list, as ``(points, next_page)`` for Qdrant)."""
    found = memory.vector_store.list(filters=None, top_k=limit)
    points = found[0] if found and isinstance(found[0], list | tuple) else found
    if len(points) >= limit:
        raise errors.InvalidInput(f"Mem0's vector store holds {limit} memories or more: raise the limit")
    return [str(p.id) for p in points]


def _history_ids(memory: Any) -> list[str]:
    """Every memory id of Mem0's SQLite history (deleted memories are only there), or none
    where the store keeps its history elsewhere."""
    db = getattr(memory, "db", None)
    conn = getattr(db, "connection", None)
    if conn is None:
        return []
    rows = conn.execute("SELECT memory_id FROM history GROUP BY memory_id ORDER BY min(created_at)")
    return [str(r[0]) for r in rows.fetchall() if r[0]]


def _memory(data: dict[str, Any], *, where: str) -> Mem0Memory:
    try:
        return Mem0Memory.model_validate(data)
    except ValidationError as exc:
        fields = "; ".join(f"{'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()[:5])
        raise errors.InvalidInput(f"Mem0 {where} is not in Mem0's shape: {fields}") from exc
