"""Mem0 memories replayed into a store (RFC 15.3): each memory's history, in the order and at
the times Mem0 recorded it, through the store's own capture and revision operations.

A memory's text becomes the object of a semantic fact ``<owner> remembers <text>`` in the
owner's scope. An add is a capture (its episode is deleted once its fact is written: the
fact carries what it said), an update a supersede, a delete a retraction; so no text Mem0
corrected or forgot is current in the store, and every correction keeps its tombstone (RFC
5.4). The store's clock is set to each event's time before its write, so records, audit
entries and tombstones carry Mem0's times.

Running a migration again writes nothing twice: each write leaves a mark the next run finds
(an add's episode has an id made from the memory and the event, a supersede cites the event
as evidence), and a run that stopped part-way goes on from where it stopped.
"""

from __future__ import annotations

import hashlib
import uuid
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from pydantic import BaseModel, ConfigDict

from membrane_core import errors
from membrane_core.capture.service import CaptureService
from membrane_core.clock import utcnow
from membrane_core.enums import AuditAction
from membrane_core.listing.service import Listing
from membrane_core.results import RecordView
from membrane_core.revision import history
from membrane_core.revision.engine import Revisions
from membrane_core.sealing import Sealer
from membrane_core.storage.db import Database
from membrane_core.transfer.mem0 import Mem0Memory, Step, steps, valid_to
from membrane_core.trust import TrustPolicy

#: RFC 2.2.3: the longest subject, predicate or object.
MAX_TERM = 512
#: the tag of every record a migration writes (``membrane records --tag mem0``)
TAG = "mem0"
#: the failures a report names at most
NAMED = 20
_STATUSES = ["active", "contested", "retracted", "proposed"]
_PAGE = 200


class ReplayClock:
    """A ``Clock`` a migration sets to the time of each event it replays; unset, the real one."""

    def __init__(self) -> None:
        self.at: datetime | None = None

    def __call__(self) -> datetime:
        return self.at or utcnow()


@dataclass(frozen=True)
class Target:
    """The store a migration writes into: the services of one ``Membrane`` built with
    ``clock`` (its ``captures``, ``revisions``, ``listing``, ``db`` and ``work.sealer``)."""

    captures: CaptureService
    revisions: Revisions
    listing: Listing
    db: Database
    sealer: Sealer
    clock: ReplayClock


class ScopeMapping(BaseModel):
    """RFC 15.3: the scope and subject of a Mem0 memory, from the user, agent and run ids it
    names: the first of them, in that order, is the owner (the fact's subject); the owner's
    template, with ``{id}`` for the id, is the scope."""

    model_config = ConfigDict(frozen=True)

    user: str = "user:{id}"
    agent: str = "agent:{id}"
    run: str = "run:{id}"
    #: every memory into this one scope (the owner is still the subject)
    scope: str | None = None
    #: the scope of a memory that names no owner (a deleted one: Mem0's history names none);
    #: None leaves such memories out
    unowned: str | None = None
    #: the fact's predicate: a memory is held by its owner, its text is what is held
    predicate: str = "remembers"
    #: the subject of a memory that names no owner
    nobody: str = "unknown"

    def place(self, memory: Mem0Memory) -> tuple[str, str] | None:
        """The memory's scope and subject; None when it has neither owner nor default."""
        ids = memory.entities()
        templates = {"user_id": self.user, "agent_id": self.agent, "run_id": self.run}
        for key, template in templates.items():
            if key in ids:
                return self.scope or template.format(id=ids[key]), ids[key]
        scope = self.scope or self.unowned
        return (scope, self.nobody) if scope else None


def episode_id(memory_id: str, key: str, at: datetime | None) -> uuid.UUID:
    """RFC 2.1, 15.3: the id of the episode that captures a step: a version-7 UUID whose time is
    the step's and whose other bits come from the memory's id and the step's key, so the same
    step gets the same id on every run."""
    ms = int(at.timestamp() * 1000) & ((1 << 48) - 1) if at is not None else 0
    digest = int.from_bytes(hashlib.sha256(f"mem0:{memory_id}:{key}".encode()).digest()[:10], "big")
    rand_a, rand_b = (digest >> 68) & 0xFFF, digest & ((1 << 62) - 1)
    return uuid.UUID(int=ms << 80 | 0x7 << 76 | rand_a << 64 | 0b10 << 62 | rand_b)


def evidence_ref(memory_id: str, key: str) -> str:
    """The evidence a supersede of the step cites (its mark for a later run)."""
    return f"mem0:{memory_id}/{key}"


class Mem0Report(BaseModel):
    """RFC 15.3: what a migration read and wrote."""

    memories: int = 0
    #: facts written: by captures, and by supersedes (counted again in ``superseded``)
    facts_written: int = 0
    superseded: int = 0
    retracted: int = 0
    #: captures whose text a live fact of the scope already held: that fact was reinforced
    shared: int = 0
    #: captures whose text the scope retracted before (RFC 5.4): not written
    tombstoned: int = 0
    #: captures whose text a contested fact holds (RFC 5.1): left for a revision to settle
    contested: int = 0
    #: memories a run before had migrated whole
    skipped: int = 0
    #: memories a run before had migrated in part, finished now
    resumed: int = 0
    #: memories without text, or without an owner and no scope for them
    left_out: int = 0
    #: texts longer than an object may be, cut (the whole text is in the metadata)
    truncated: int = 0
    #: memories whose write was refused, with the reason (the first ``NAMED``)
    failed: dict[str, str] = {}
    failures: int = 0
    scopes: list[str] = []

    def summary(self) -> str:
        """One line for people."""
        parts = [
            f"{self.memories} Mem0 memories",
            f"{self.facts_written} facts written ({self.superseded} superseding)",
            f"{self.retracted} retracted",
            f"{self.skipped} already migrated",
        ]
        extra = {
            "resumed": self.resumed,
            "shared an existing fact": self.shared,
            "tombstoned": self.tombstoned,
            "met a contested fact": self.contested,
            "left out": self.left_out,
            "truncated": self.truncated,
            "failed": self.failures,
        }
        parts += [f"{n} {label}" for label, n in extra.items() if n]
        return f"{', '.join(parts)}; {len(self.scopes)} scopes"


def migrate(
    target: Target,
    memories: Iterable[Mem0Memory],
    trust: TrustPolicy,
    mapping: ScopeMapping | None = None,
) -> Mem0Report:
    """RFC 15.3: replay ``memories`` into ``target``.

    Every step of every memory, in the order of Mem0's times; a memory whose write is refused
    is named in the report and its later steps are not written. Needs a trusted writer that
    reads and writes the scopes (reads: to find what a run before wrote)."""
    clock = target.clock
    if target.revisions.clock is not clock or target.listing.clock is not clock:
        raise errors.InvalidInput("a Mem0 migration writes through services built on its ReplayClock")
    if trust.review_required:
        raise errors.Forbidden("a Mem0 migration writes revisions: a key whose writes are reviewed cannot")
    mapping = mapping or ScopeMapping()
    report = Mem0Report()
    clock.at = None
    replay = _Replay(target, clock, trust, mapping, report)
    replay.load()
    timeline: list[tuple[datetime, int, int, Step]] = []
    for i, memory in enumerate(memories):
        report.memories += 1
        todo = steps(memory)
        where = replay.placed_before(memory, todo) or mapping.place(memory)
        if where is None or not todo:
            report.left_out += 1
            continue
        replay.placed[memory.id] = where
        timeline += [(s.at or _END, i, n, s) for n, s in enumerate(todo)]
    timeline.sort(key=lambda t: t[:3])
    placed = replay.placed
    report.scopes = sorted({scope for scope, _ in placed.values()})
    try:
        for *_, step in timeline:
            replay.apply(step)
    finally:
        clock.at = None
    for mem_id in placed:
        done, wrote = replay.seen.get(mem_id, 0), replay.wrote.get(mem_id, 0)
        if mem_id in replay.failed:
            continue
        if wrote == 0 and done:
            report.skipped += 1
        elif wrote and done > wrote:
            report.resumed += 1
    return report


#: where steps without a time go: after every timed one (their writes take the real time)
_END = datetime.max.replace(tzinfo=UTC)
#: an owner of a fact the migration did not write: such a fact is never revised by it
_EXTERNAL = "\x00external"


@dataclass
class _Replay:
    """The state of one replay: each memory's current fact, and the memories holding each fact."""

    target: Target
    clock: ReplayClock
    trust: TrustPolicy
    mapping: ScopeMapping
    report: Mem0Report
    #: each memory's scope and subject
    placed: dict[str, tuple[str, str]] = field(default_factory=dict)
    #: the store's facts by a provenance ref they carry (the marks of runs before)
    marked: dict[str, RecordView] = field(default_factory=dict)
    #: facts a migration wrote (they carry Mem0's metadata)
    ours: set[uuid.UUID] = field(default_factory=set)
    retracted: set[uuid.UUID] = field(default_factory=set)
    head: dict[str, uuid.UUID] = field(default_factory=dict)
    holders: dict[uuid.UUID, set[str]] = field(default_factory=dict)
    failed: set[str] = field(default_factory=set)
    seen: dict[str, int] = field(default_factory=dict)
    wrote: dict[str, int] = field(default_factory=dict)

    def load(self) -> None:
        """The facts migrations wrote (their tag and predicate), in every scope the caller
        reads and of every status, by the marks in their provenance."""
        request: dict[str, Any] = {
            "types": ["semantic"],
            "statuses": _STATUSES,
            "tags": [TAG],
            "predicate": self.mapping.predicate,
            "limit": _PAGE,
        }
        while True:
            page = self.target.listing.records(request, self.trust)
            for view in page.records:
                for source in view.provenance:
                    self.marked.setdefault(str(source.get("ref")), view)
                if isinstance(view.metadata.get(TAG), dict):
                    self.ours.add(view.id)
                if view.status.value == "retracted":
                    self.retracted.add(view.id)
            if page.next_cursor is None:
                return
            request["cursor"] = page.next_cursor

    def placed_before(self, memory: Mem0Memory, todo: list[Step]) -> tuple[str, str] | None:
        """Where a run before put a memory that names no owner now (Mem0 deleted it since)."""
        if memory.entities() or not todo or todo[0].kind != "add":
            return None
        first = todo[0]
        view = self.marked.get(f"capture:{episode_id(memory.id, first.key, first.at)}")
        if view is None:
            return None
        return view.scope, str((view.payload or {}).get("subject") or self.mapping.nobody)

    def apply(self, step: Step) -> None:
        """Write one step, unless a run before wrote it; a refusal fails the memory."""
        mem_id = step.memory.id
        if mem_id in self.failed:
            return
        self.seen[mem_id] = self.seen.get(mem_id, 0) + 1
        try:
            wrote = self._apply(step)
        except errors.MembraneError as exc:
            self.failed.add(mem_id)
            self.report.failures += 1
            if len(self.report.failed) < NAMED:
                self.report.failed[mem_id] = f"{exc.code}: {exc.message}"
            return
        if wrote:
            self.wrote[mem_id] = self.wrote.get(mem_id, 0) + 1

    def _apply(self, step: Step) -> bool:
        mem_id = step.memory.id
        head = self.head.get(mem_id)
        if step.kind == "delete":
            return self._release(step, head) if head is not None else False
        ref, eid = evidence_ref(mem_id, step.key), episode_id(mem_id, step.key, step.at)
        # the marks first: what this run decides must be what the run that wrote them decided
        if (done := self.marked.get(ref)) is not None:
            self._move(mem_id, done.id)
            return False
        if (done := self.marked.get(f"capture:{eid}")) is not None:
            self._hold(mem_id, done.id)
            self._forget_episode(eid, step, self._episode(eid))
            return False
        sole = head is not None and head not in self.retracted and self.holders.get(head) == {mem_id}
        if head is not None and sole:
            return self._supersede(step, head, ref)
        return self._capture(step, eid)

    def _capture(self, step: Step, eid: uuid.UUID) -> bool:
        mem_id = step.memory.id
        if (before := self._episode(eid)) is not None:  # captured, yet holds no fact: a tombstone
            self._leave(mem_id)
            self._forget_episode(eid, step, before)
            return False
        scope, subject = self.placed[mem_id]
        self.clock.at = step.at
        text, meta = self._content(step)
        content: dict[str, Any] = {"subject": subject, "predicate": self.mapping.predicate, "object": text}
        if (until := valid_to(step.memory)) is not None:
            content["valid_to"] = until.isoformat()
        request: dict[str, Any] = {"source_kind": "observation", "scope": scope, "content": content}
        request |= {"tags": [TAG], "metadata": meta, "occurred_at": self.clock()}
        plan = self.target.captures.plan(request, self.trust, record_id=eid)
        if self.clock.at is not None and plan.primary.created_at != self.clock.at:
            raise errors.InvalidInput("a Mem0 migration writes through services built on its ReplayClock")
        if plan.fact is not None:  # the fact carries Mem0's metadata: its episode will be gone
            record = plan.fact.record.model_copy(update={"metadata": meta})
            plan = plan.model_copy(update={"fact": plan.fact.model_copy(update={"record": record})})
        result = self.target.captures.write_plans([plan])[0]
        fact_id = result.record_ids[1] if len(result.record_ids) > 1 else None
        if fact_id is None:  # tombstoned, or a contested fact of the text (RFC 3.4)
            self.report.tombstoned += result.fact == "tombstoned"
            self.report.contested += result.fact == "contested"
            self._leave(mem_id)
        else:
            if result.fact == "created":
                self.report.facts_written += 1
                self.ours.add(fact_id)
            else:
                self.report.shared += 1
            self._hold(mem_id, fact_id)
        self._forget_episode(eid, step, AuditAction.CREATE)
        return True

    def _supersede(self, step: Step, head: uuid.UUID, ref: str) -> bool:
        text, meta = self._content(step)
        record: dict[str, Any] = {"object": text, "metadata": meta, "tags": [TAG]}
        if (until := valid_to(step.memory)) is not None:
            record["valid_to"] = until
        body = {
            "record": record,
            "rationale": f"updated in Mem0 (event {step.key})",
            "evidence": [{"kind": "observation", "ref": ref}],
        }
        self.clock.at = step.at
        new = self.target.revisions.supersede(head, body, self.trust)
        self.report.facts_written += 1
        self.report.superseded += 1
        self.retracted.add(head)
        self.ours.add(new)
        self._move(step.memory.id, new)
        return True

    def _release(self, step: Step, head: uuid.UUID) -> bool:
        """A delete: the memory no longer holds its fact, which is retracted once nothing else
        does (another memory of the same text, or a fact the migration did not write)."""
        self._leave(step.memory.id)
        if self.holders.get(head) or head in self.retracted:
            return False
        self.clock.at = step.at
        rationale = f"deleted in Mem0 (event {step.key})"
        self.target.revisions.retract(head, {"rationale": rationale}, self.trust)
        self.report.retracted += 1
        self.retracted.add(head)
        return True

    def _hold(self, mem_id: str, fact_id: uuid.UUID) -> None:
        self._leave(mem_id)
        holders = self.holders.setdefault(fact_id, set() if fact_id in self.ours else {_EXTERNAL})
        holders.add(mem_id)
        self.head[mem_id] = fact_id

    def _move(self, mem_id: str, new: uuid.UUID) -> None:
        """The memory's fact was superseded by ``new``, which it alone holds."""
        old = self.head.pop(mem_id, None)
        if old is not None:
            self.holders.pop(old, None)
        self.holders[new] = {mem_id}
        self.head[mem_id] = new

    def _leave(self, mem_id: str) -> None:
        old = self.head.pop(mem_id, None)
        if old is not None:
            self.holders.get(old, set()).discard(mem_id)

    def _episode(self, eid: uuid.UUID) -> str | None:
        """The last audit action of a capture's episode; None when it was never written."""
        try:
            entries = history.history(self.target.db, eid, self.trust, self.target.sealer).entries
        except errors.NotFound:
            return None
        return entries[-1].action if entries else None

    def _forget_episode(self, eid: uuid.UUID, step: Step, last: str | None) -> None:
        """The episode of a capture goes once its fact is written (RFC 15.3); one left by a run
        that stopped between the two goes now."""
        if last is None or last == AuditAction.DELETE:
            return
        self.clock.at = step.at
        why = "Mem0 migration: the fact holds what this capture said"
        history.delete(self.target.db, eid, self.trust, why, now=self.clock(), sealer=self.target.sealer)

    def _content(self, step: Step) -> tuple[str, dict[str, Any]]:
        """The object (cut to the longest an object may be) and the record's metadata."""
        mem = step.memory
        text = step.text or ""
        meta: dict[str, Any] = {
            "id": mem.id,
            "event": step.key,
            "hash": mem.hash if text == (mem.memory or "").strip() else None,  # the current text's
            "metadata": mem.metadata,
            "actor_id": step.actor_id or mem.actor_id,
            "role": step.role or mem.role,
            "attributed_to": mem.attributed_to,
            **mem.entities(),
            "created_at": mem.created_at.isoformat() if mem.created_at else None,
            "updated_at": mem.updated_at.isoformat() if mem.updated_at else None,
            "expiration_date": mem.expiration_date.isoformat() if mem.expiration_date else None,
        }
        if len(text) > MAX_TERM:
            meta["memory"] = text
            text = text[: MAX_TERM - 1].rstrip() + "\u2026"
            self.report.truncated += 1
        return text, {TAG: {k: v for k, v in meta.items() if v is not None}}
