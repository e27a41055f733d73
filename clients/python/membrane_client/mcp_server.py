"""An MCP server that gives a model Membrane as tools: remember, recall, inspect and correct.

``membrane-mcp --url URL [--key KEY] [--transport stdio|http] [--read-only] [--no-revision]``

The server talks to a running Membrane only through :class:`membrane_client.Client`, with
one API key (``--key`` or ``MEMBRANE_API_KEY``). What the model may read and change is
therefore decided by the Membrane server from that key's policy (scopes, sensitivity);
no tool argument widens it. ``--read-only`` and ``--no-revision`` narrow further what is
advertised: a tool that is not listed cannot be called.

Answers are compact text made for a context window: one line per record, starting with
its id, under a byte cap (``--max-bytes``, 8 KiB by default) that says when it cut.
A refusal of the server (a correction that is not allowed, a record the key cannot see)
comes back as a tool error result the model can read and act on.

Needs the ``mcp`` extra: ``pip install 'membrane-client[mcp]'``.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal
from uuid import UUID

from pydantic import Field, StringConstraints

from membrane_client.client import Client
from membrane_client.errors import MembraneError
from membrane_client.models import AuditEntry, AuditHistory, Operation, Record, RetrieveResult

try:
    from mcp.server.mcpserver import MCPServer
    from mcp.server.mcpserver.exceptions import ToolError
    from mcp.server.mcpserver.tools import Tool
    from mcp_types import ToolAnnotations
except ImportError as exc:  # pragma: no cover - depends on the installed extras
    raise ImportError(
        "membrane_client.mcp_server needs the mcp package: pip install 'membrane-client[mcp]'"
    ) from exc

__all__ = [
    "CORRECTION_TOOLS",
    "READ_TOOLS",
    "WRITE_TOOLS",
    "MemoryTools",
    "build_server",
    "main",
]

#: Tools that only read; the whole set under ``--read-only``.
READ_TOOLS = ("recall", "get_memory", "memory_history")
#: Tools that change a record's status or salience; none under ``--no-revision``.
CORRECTION_TOOLS = ("supersede_memory", "retract_memory", "contest_memory", "reinforce_memory")
#: Every tool that writes.
WRITE_TOOLS = ("remember", *CORRECTION_TOOLS)

#: RFC 5.7: appended to ``remember``'s answer when what it wrote waits for a reviewer.
PROPOSED_NOTE = (
    " It is proposed: a reviewer will decide whether to keep it, and recall leaves it out until then."
)

DEFAULT_MAX_BYTES = 8 * 1024
DEFAULT_WAIT = 10.0
DEFAULT_PORT = 8765
#: A record line in a list is cut here, so that one long episode cannot fill the answer.
LINE_CHARS = 400
#: Longest rationale the API keeps (``revision_rules.Rationale``).
RATIONALE_CHARS = 4096

INSTRUCTIONS = """\
Membrane is your long-term memory, shared across conversations and kept per scope.
Recall before answering from past work and before remembering (to avoid duplicates).
Remember durable facts, notable events and where a task stands.
When a remembered fact is wrong, correct it (supersede_memory, retract_memory or
contest_memory, each with a rationale) instead of remembering a contradicting fact:
corrections keep the history and stop the wrong memory from being recalled.
Each record line starts with its id in brackets; pass that id to the other tools."""

# -- argument types (their constraints become the tools' input schemas) ---------------

MemoryId = Annotated[UUID, Field(description="Id of a memory, as shown in brackets by recall.")]
Scope = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=256)]
Phrase = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=512)]
Line = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=4096)]
Tag = Annotated[str, StringConstraints(strip_whitespace=True, min_length=1, max_length=128)]
Rationale = Annotated[
    str,
    StringConstraints(strip_whitespace=True, min_length=1, max_length=2048),
    Field(description="Why you make this change, in a sentence; kept in the memory's audit history."),
]
EVIDENCE_HELP = (
    "Short references backing the change: a file and line, a URL, a tool output, a message, or a memory id."
)
Evidence = Annotated[list[Phrase], Field(max_length=16)]
OptionalEvidence = Annotated[Evidence | None, Field(description=EVIDENCE_HELP)]
MemoryType = Literal["episodic", "working", "semantic", "competence", "plan_graph", "entity"]
TaskState = Literal["planning", "executing", "blocked", "waiting", "done"]
Sensitivity = Literal["public", "low", "medium", "high", "hyper"]


# -- rendering ------------------------------------------------------------------------


def _squash(text: str) -> str:
    """``text`` on one line: a record is one line of the answer."""
    return re.sub(r"\s+", " ", text).strip()


def _clip(text: str, chars: int | None) -> str:
    if chars is None or len(text) <= chars:
        return text
    return text[: chars - 1].rstrip() + "\u2026"


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _payload(record: Record) -> Mapping[str, Any]:
    return _mapping(record.payload)


def _successor(record: Record) -> UUID | None:
    """The record that superseded ``record``, when its view names one."""
    for relation in record.relations:
        if relation.predicate == "superseded_by":
            return relation.target_id
    value = _payload(record).get("superseded_by")
    try:
        return UUID(str(value)) if value else None
    except ValueError:
        return None


def _status(record: Record) -> str:
    """The status as a model should read it: anything but active stands out."""
    if record.status == "active":
        return "active"
    if record.status == "retracted":
        successor = _successor(record)
        return f"SUPERSEDED by [{successor}]" if successor else "RETRACTED"
    return record.status.upper()


def _validity(payload: Mapping[str, Any]) -> str:
    validity = payload.get("validity")
    if not isinstance(validity, Mapping):
        return ""
    parts = []
    if validity.get("valid_from"):
        parts.append(f"from {validity['valid_from']}")
    if validity.get("valid_to"):
        parts.append(f"until {validity['valid_to']}")
    if validity.get("mode") == "conditional" and validity.get("conditions"):
        parts.append(f"if {json.dumps(validity['conditions'], separators=(',', ':'))}")
    return f" (valid {' '.join(parts)})" if parts else ""


def _names(items: Any, key: str | None = None) -> list[str]:
    if not isinstance(items, list):
        return []
    out = []
    for item in items:
        value = item.get(key) if key and isinstance(item, Mapping) else item
        if value:
            out.append(str(value))
    return out


def _episodic(p: Mapping[str, Any]) -> str:
    text = p.get("text")
    data = _mapping(p.get("data"))
    if not text and data and {"subject", "predicate", "object"} <= set(data):
        text = f"{data['subject']} {data['predicate']} {data['object']}"
    calls = _names(p.get("tool_calls"), "tool")
    body = str(text or "")
    if calls:
        body += f" [tools: {', '.join(calls)}]"
    if p.get("outcome"):
        body += f" [outcome: {p['outcome']}]"
    return f"{p.get('source_kind') or 'event'}: {body.strip() or json.dumps(data)}"


def _working(p: Mapping[str, Any]) -> str:
    text = f"task {p.get('thread_id')} [{p.get('task_state')}]: {p.get('context_summary', '')}"
    if nexts := _names(p.get("next_actions")):
        text += f"; next: {' | '.join(nexts)}"
    if questions := _names(p.get("open_questions")):
        text += f"; open: {' | '.join(questions)}"
    return text


def _competence(p: Mapping[str, Any]) -> str:
    steps = _names(p.get("signature")) or _names(p.get("required_tools"))
    perf = _mapping(p.get("performance"))
    ok, bad = perf.get("success_count", 0), perf.get("failure_count", 0)
    return f"skill {p.get('skill_name')}: {' -> '.join(steps)} ({ok} succeeded, {bad} failed)"


def _plan(p: Mapping[str, Any]) -> str:
    ops = _names(p.get("nodes"), "op")
    return f"plan for {p.get('intent')}: {' -> '.join(ops)}"


def _entity(p: Mapping[str, Any]) -> str:
    text = f"{p.get('entity_kind') or 'entity'} {p.get('canonical_name')}"
    if aliases := _names(p.get("aliases"), "value"):
        text += f" (also: {', '.join(aliases)})"
    if p.get("description"):
        text += f": {p['description']}"
    return text


_CONTENT: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "episodic": _episodic,
    "working": _working,
    "competence": _competence,
    "plan_graph": _plan,
    "entity": _entity,
}


def content(record: Record) -> str:
    """What ``record`` says, on one line."""
    if record.redacted or record.payload is None:
        return "(content withheld: above this key's sensitivity clearance)"
    p = _payload(record)
    if record.type == "semantic" and {"subject", "predicate", "object"} <= set(p):
        text = f"{p['subject']} {p['predicate']} {p['object']}{_validity(p)}"
    elif record.type in _CONTENT:
        text = _CONTENT[record.type](p)
    else:
        text = record.summary or json.dumps(dict(p), separators=(",", ":"), default=str)
    if record.tags:
        text += f" #{' #'.join(record.tags)}"
    return _squash(text)


def record_line(record: Record, *, chars: int | None = LINE_CHARS) -> str:
    """``[id] (type, status, salience 0.83, scope s) content``: one record, one line."""
    head = f"{record.type}, {_status(record)}, salience {record.salience:.2f}, scope {record.scope}"
    return f"[{record.id}] ({head}) {_clip(content(record), chars)}"


def _cut(text: str, limit: int) -> str:
    """``text`` cut to ``limit`` UTF-8 bytes without splitting a character."""
    return text.encode()[: max(limit, 0)].decode(errors="ignore")


def bounded(lines: Sequence[str], max_bytes: int, hint: str = "") -> str:
    """``lines`` joined, cut to ``max_bytes`` UTF-8 bytes at a line boundary with a note saying so."""
    text = "\n".join(lines)
    if len(text.encode()) <= max_bytes:
        return text
    kept: list[str] = []
    used = 0
    for index, line in enumerate(lines):
        note = (
            f"\u2026 truncated at {max_bytes} bytes: {len(lines) - index} more line(s) not shown"
            f"{'; ' + hint if hint else ''}."
        )
        room = max_bytes - used - len(note.encode()) - 1
        size = len(line.encode()) + (1 if kept else 0)
        if size > room:
            if not kept:  # one line larger than the budget: show its start rather than nothing
                kept.append(_cut(line, room - 1) + "\u2026")
            kept.append(note)
            break
        kept.append(line)
        used += size
    return _cut("\n".join(kept), max_bytes)


def _details(details: Mapping[str, Any]) -> str:
    parts = []
    for key, value in details.items():
        shown = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"), default=str)
        parts.append(f"{key}={_clip(shown, 200)}")
    return f" ({', '.join(parts)})" if parts else ""


def history_lines(record_id: UUID, history: AuditHistory) -> list[str]:
    """The audit entries, oldest first, each with its rationale, then the chain's verdict."""
    chain = (
        "hash chain valid"
        if history.chain_valid
        else "hash chain INVALID: this history was altered; do not rely on it"
    )
    lines = [f"History of [{record_id}]: {len(history.entries)} entries, {chain}."]
    lines.extend(_entry_line(entry) for entry in history.entries)
    return lines


def _entry_line(entry: AuditEntry) -> str:
    when = entry.timestamp.isoformat(timespec="seconds")
    rationale = f': "{_squash(entry.rationale)}"' if entry.rationale else ""
    return f"{when} {entry.action} by {entry.actor}{rationale}{_details(entry.details)}"


def _error_text(exc: MembraneError) -> str:
    """A refusal as a model can act on it: the server's code and message, and what to do."""
    text = f"{exc.code}: {exc.message}"
    fields = [
        f"{d.get('field')}: {d.get('message')}"
        for d in exc.details
        if d.get("field") and d.get("message") and exc.code == "invalid_input"
    ]
    if fields:
        text += f" ({'; '.join(fields)})"
    for detail in exc.details:
        if detail.get("successor_id"):
            text += f". Its current version is [{detail['successor_id']}]: correct that one instead"
    if exc.code in ("connection_failed", "unavailable", "rate_limited"):
        text += ". Membrane is not answering right now; try again later"
    return text


def _refused(operation: Operation) -> ToolError:
    error = operation.error
    code = error.code if error is not None else "failed"
    message = error.message if error is not None else f"operation {operation.operation_id} failed"
    details = [d.model_dump() for d in error.details] if error is not None else []
    return ToolError("refused: " + _error_text(MembraneError(message, code=code, details=details)))


# -- the tools --------------------------------------------------------------------------


class MemoryTools:
    """The tool functions, bound to one SDK client; each answers compact text.

    The functions are synchronous: the MCP server runs each call in a worker thread, and
    the SDK client is safe to share between threads.
    """

    def __init__(
        self,
        client: Client,
        *,
        default_scope: str | None = None,
        max_bytes: int = DEFAULT_MAX_BYTES,
        wait: float = DEFAULT_WAIT,
    ) -> None:
        self.client = client
        self.default_scope = default_scope
        self.max_bytes = max_bytes
        self.wait = wait

    # -- plumbing -----------------------------------------------------------------------

    def _call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """One SDK call; a refusal becomes a tool error result, never a crash of the server."""
        try:
            return fn(*args, **kwargs)
        except MembraneError as exc:
            raise ToolError(_error_text(exc)) from exc

    def _finished(self, op: Operation, what: str) -> Operation | str:
        """``op`` once it succeeded; the text to answer while it still runs; raises if refused."""
        if op.failed:
            raise _refused(op)
        if not op.succeeded:
            return (
                f"{what} was accepted but had not finished after {self.wait:g} s (operation "
                f"{op.operation_id} is {op.status}); check it later with get_memory."
            )
        return op

    def _line(self, record_id: UUID) -> str:
        """The record's line, or its bare id when it cannot be read back."""
        try:
            return record_line(self.client.get(record_id))
        except MembraneError:
            return f"[{record_id}]"

    def _answer(self, lines: Sequence[str], hint: str = "") -> str:
        return bounded(lines, self.max_bytes, hint)

    # -- reads --------------------------------------------------------------------------

    def recall(
        self,
        query: Annotated[
            str,
            StringConstraints(strip_whitespace=True, min_length=1, max_length=4096),
            Field(description="What you want to know, in words (names, terms, a question)."),
        ],
        scopes: Annotated[
            list[Scope] | None,
            Field(
                max_length=32,
                description="Scopes to search; omit for the default scope or, without one, "
                "every scope this key may read.",
            ),
        ] = None,
        memory_types: Annotated[
            list[MemoryType] | None,
            Field(
                description="Only these kinds: semantic (facts), episodic (events), working (task "
                "states), competence, plan_graph, entity. Omit for all."
            ),
        ] = None,
        limit: Annotated[int, Field(ge=1, le=50, description="Most memories to return.")] = 10,
        expand: Annotated[
            bool, Field(description="Also return memories one link away from the results, and the links.")
        ] = False,
        include_contested: Annotated[
            bool, Field(description="Keep CONTESTED (disputed) memories, flagged and ranked last.")
        ] = True,
        include_observations: Annotated[
            bool,
            Field(
                description="Also return the raw observations that facts were derived from; a raw "
                "observation keeps what was observed even after its fact is corrected."
            ),
        ] = False,
    ) -> str:
        """Search memory: the best matches first, corrected memories left out."""
        chosen = scopes or ([self.default_scope] if self.default_scope else None)
        filters: dict[str, Any] = {"include_contested": include_contested}
        if memory_types:
            filters["memory_types"] = list(memory_types)
        # observations are dropped below, so ask for a few more to still fill ``limit``
        fetch = limit if include_observations else min(2 * limit, 100)
        result: RetrieveResult = self._call(
            self.client.retrieve,
            query,
            scopes=chosen,
            limit=fetch,
            expand={"hops": 1, "max_nodes": 2 * limit, "max_edges": 4 * limit} if expand else None,
            **filters,
        )
        roots, dropped = _without_observations(result.records, include_observations)
        more = len(roots) > limit or bool(result.diagnostics.get("row_limit_applied"))
        roots = roots[:limit]
        neighbors, _ = _without_observations(result.neighbors, include_observations)
        # only the neighbours of the roots shown: the others hang off roots cut by ``limit``
        kept = {r.id for r in roots}
        touching = {e.target_id for e in result.edges if e.source_id in kept}
        touching |= {e.source_id for e in result.edges if e.target_id in kept}
        neighbors = [r for r in neighbors if r.id in touching]
        where = f"scopes {', '.join(chosen)}" if chosen else "every scope this key may read"
        if not roots:
            return f'No memories match "{_clip(query, 80)}" in {where}.'
        count = f"{len(roots)} memor{'y' if len(roots) == 1 else 'ies'}"
        lines = [f'{count} for "{_clip(query, 80)}" in {where}, best first:']
        lines.extend(record_line(r) for r in roots)
        if neighbors:
            lines.append("Linked memories (one hop):")
            lines.extend(record_line(r) for r in neighbors)
        shown = {r.id for r in roots} | {r.id for r in neighbors}
        edges = [e for e in result.edges if e.source_id in shown and e.target_id in shown]
        if edges:
            lines.append(
                "Links: " + "; ".join(f"[{e.source_id}] {e.predicate} [{e.target_id}]" for e in edges)
            )
        notes = []
        if any(r.status == "contested" for r in [*roots, *neighbors]):
            notes.append("CONTESTED memories are disputed: verify before relying on them")
        if more:
            notes.append("more matches exist: raise limit or narrow the query")
        if dropped:
            notes.append(f"{dropped} raw observation(s) behind facts left out")
        if notes:
            lines.append("Note: " + "; ".join(notes) + ".")
        return self._answer(lines, "lower limit or narrow the query")

    def get_memory(self, record_id: MemoryId) -> str:
        """One memory by id, whatever its status, with its provenance and links."""
        record: Record = self._call(self.client.get, record_id)
        lines = [record_line(record, chars=None)]
        successor = _successor(record)
        if record.status == "retracted":
            lines.append(
                f"This memory was superseded by [{successor}]: use that one."
                if successor
                else "This memory was retracted: it is no longer held true."
            )
        elif record.status == "contested":
            lines.append("This memory is CONTESTED: it is disputed; verify before relying on it.")
        facts = [f"confidence {record.confidence:.2f}", f"sensitivity {record.sensitivity}"]
        for name in ("recorded_at", "updated_at", "retracted_at"):
            value = getattr(record, name)
            if value is not None:
                facts.append(f"{name.removesuffix('_at')} {value.isoformat(timespec='seconds')}")
        lines.append(", ".join(facts))
        if record.summary and record.summary != content(record):
            lines.append(f"summary: {_squash(record.summary)}")
        evidence = [
            f"{e.get('kind')}:{e.get('ref')}"
            for e in _payload(record).get("evidence") or []
            if isinstance(e, Mapping)
        ]
        if evidence:
            lines.append(f"evidence: {', '.join(evidence)}")
        sources = [f"{s.get('kind')}:{s.get('ref')}" for s in record.provenance]
        if sources:
            lines.append(f"provenance: {', '.join(sources)}")
        if record.relations:
            lines.append("links: " + "; ".join(f"{r.predicate} [{r.target_id}]" for r in record.relations))
        return self._answer(lines)

    def memory_history(self, record_id: MemoryId) -> str:
        """The audit entries of one memory, with their rationale and the chain's validity."""
        history: AuditHistory = self._call(self.client.audit, record_id)
        return self._answer(history_lines(record_id, history))

    # -- writes -------------------------------------------------------------------------

    def remember(
        self,
        kind: Annotated[
            Literal["fact", "event", "working_state"],
            Field(
                description="fact: subject, predicate, object; event: text; working_state: thread_id, "
                "task_state, context_summary."
            ),
        ],
        scope: Annotated[
            Scope | None, Field(description="The project or area this memory belongs to.")
        ] = None,
        subject: Annotated[Phrase | None, Field(description="fact: what it is about, e.g. acme-api.")] = None,
        predicate: Annotated[Phrase | None, Field(description="fact: the relation, e.g. runs_on.")] = None,
        object: Annotated[Phrase | None, Field(description="fact: the value, e.g. Python 3.13.")] = None,
        text: Annotated[
            str | None,
            StringConstraints(strip_whitespace=True, max_length=65536),
            Field(description="event: what happened, in a few sentences."),
        ] = None,
        thread_id: Annotated[Phrase | None, Field(description="working_state: the task's name.")] = None,
        task_state: Annotated[TaskState | None, Field(description="working_state: where it stands.")] = None,
        context_summary: Annotated[
            Line | None, Field(description="working_state: what is done and what matters to resume.")
        ] = None,
        next_actions: Annotated[
            list[Line] | None, Field(max_length=128, description="working_state: the next steps.")
        ] = None,
        open_questions: Annotated[
            list[Line] | None, Field(max_length=128, description="working_state: what is still unknown.")
        ] = None,
        tags: Annotated[list[Tag] | None, Field(max_length=64, description="Labels to filter on.")] = None,
        reason: Annotated[
            str | None,
            StringConstraints(strip_whitespace=True, max_length=4096),
            Field(description="Why this is worth remembering."),
        ] = None,
        sensitivity: Annotated[
            Sensitivity | None, Field(description="How sensitive it is; omit for the server's default.")
        ] = None,
    ) -> str:
        """Capture a fact (as an observation), an event or a working state."""
        where = scope or self.default_scope
        if not where:
            raise ToolError("scope is required: the project or area this memory belongs to")
        given = {
            "subject": subject,
            "predicate": predicate,
            "object": object,
            "text": text,
            "thread_id": thread_id,
            "task_state": task_state,
            "context_summary": context_summary,
            "next_actions": next_actions,
            "open_questions": open_questions,
        }
        source_kind, body = _capture_content(kind, {k: v for k, v in given.items() if v})
        capture: dict[str, Any] = {"source_kind": source_kind, "scope": where, "content": body}
        for key, value in (("tags", tags), ("reason_to_remember", reason), ("sensitivity", sensitivity)):
            if value:
                capture[key] = value
        op: Operation = self._call(self.client.capture, capture, wait=self.wait)
        done = self._finished(op, "The capture")
        if isinstance(done, str):
            return done
        said = self._remembered(kind, where, done.record_ids)
        return said + PROPOSED_NOTE if _proposed(done) else said

    def _remembered(self, kind: str, where: str, ids: Sequence[UUID]) -> str:
        """What a finished capture wrote, as ``remember`` answers it."""
        if kind != "fact":
            return f"Remembered {kind.replace('_', ' ')} [{ids[0]}] in scope {where}."
        if len(ids) < 2:
            return (
                f"Recorded the observation [{ids[0]}], but no fact was kept: the same fact was "
                f"retracted earlier in scope {where} (or is contested there), and an observation "
                "does not bring it back. If it is true again, supersede the fact that replaced it."
            )
        return f"Remembered fact {self._line(ids[1])} (observation [{ids[0]}])."

    def supersede_memory(
        self,
        record_id: MemoryId,
        rationale: Rationale,
        evidence: Annotated[Evidence, Field(min_length=1, description=EVIDENCE_HELP)],
        object: Annotated[Phrase | None, Field(description="The right value, when it changes.")] = None,
        subject: Annotated[Phrase | None, Field(description="The new subject, when it changes.")] = None,
        predicate: Annotated[Phrase | None, Field(description="The new relation, when it changes.")] = None,
    ) -> str:
        """Replace a wrong fact with the right one; the old one is kept, marked superseded."""
        new = {k: v for k, v in (("subject", subject), ("predicate", predicate), ("object", object)) if v}
        if not new:
            raise ToolError("give the corrected object (or subject or predicate) of the fact")
        refs = [{"kind": "observation", "ref": ref} for ref in evidence]
        op: Operation = self._call(
            self.client.supersede, record_id, new, rationale, evidence=refs, wait=self.wait
        )
        done = self._finished(op, "The supersede")
        if isinstance(done, str):
            return done
        return (
            f"Superseded [{record_id}] with {self._line(done.record_ids[0])}. The old memory is kept, "
            "marked superseded, and no longer recalled."
        )

    def retract_memory(
        self, record_id: MemoryId, rationale: Rationale, evidence: OptionalEvidence = None
    ) -> str:
        """Withdraw a wrong memory that has no replacement."""
        op: Operation = self._call(
            self.client.retract, record_id, _with_evidence(rationale, evidence), wait=self.wait
        )
        done = self._finished(op, "The retraction")
        if isinstance(done, str):
            return done
        return (
            f"Retracted [{record_id}]. It is no longer recalled and its fact is not learned again "
            "from later observations; it stays readable by id, with its history."
        )

    def contest_memory(
        self,
        record_id: MemoryId,
        rationale: Rationale,
        evidence: OptionalEvidence = None,
        contesting_record_id: Annotated[
            UUID | None, Field(description="A memory that contradicts this one, if there is one.")
        ] = None,
    ) -> str:
        """Flag a memory as disputed without removing it."""
        op: Operation = self._call(
            self.client.contest,
            record_id,
            _with_evidence(rationale, evidence),
            contesting_record_id=contesting_record_id,
            wait=self.wait,
        )
        done = self._finished(op, "The contest")
        if isinstance(done, str):
            return done
        return (
            f"Marked [{record_id}] CONTESTED: recall flags it and ranks it below active memories. "
            "Supersede or retract it once you know it is wrong."
        )

    def reinforce_memory(
        self, record_id: MemoryId, rationale: Rationale, evidence: OptionalEvidence = None
    ) -> str:
        """Confirm that a memory was right and useful: its salience rises."""
        op: Operation = self._call(
            self.client.reinforce, record_id, _with_evidence(rationale, evidence), wait=self.wait
        )
        done = self._finished(op, "The reinforcement")
        if isinstance(done, str):
            return done
        return f"Reinforced {self._line(record_id)}."


def _proposed(done: Operation) -> bool:
    """RFC 5.7: the capture's records were proposed (the key's writes are reviewed): its
    operation's result names the proposal a reviewer decides."""
    return bool((done.result or {}).get("proposal_id"))


def _without_observations(records: Sequence[Record], keep: bool) -> tuple[list[Record], int]:
    """``records`` without raw observation episodes, and how many were dropped.

    An observation is immutable history; the fact derived from it is what corrections
    act on. Listed beside the facts, an observation would bring a superseded value back
    into an answer that has just left its fact out.
    """
    if keep:
        return list(records), 0
    kept = [
        r for r in records if not (r.type == "episodic" and _payload(r).get("source_kind") == "observation")
    ]
    return kept, len(records) - len(kept)


def _capture_content(kind: str, given: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The capture's ``source_kind`` and ``content`` for ``kind``, refusing fields of another kind."""
    fields = {
        "fact": ("subject", "predicate", "object"),
        "event": ("text",),
        "working_state": ("thread_id", "task_state", "context_summary"),
    }
    optional = {"working_state": ("next_actions", "open_questions")}
    required = fields[kind]
    allowed = set(required) | set(optional.get(kind, ()))
    missing = [name for name in required if name not in given]
    label = kind.replace("_", " ")
    stray = sorted(set(given) - allowed)
    if missing:
        raise ToolError(f"a {label} needs {', '.join(required)}; missing: {', '.join(missing)}")
    if stray:
        raise ToolError(f"{', '.join(stray)} do(es) not apply to a {label}")
    source_kind = {"fact": "observation", "event": "event", "working_state": "working_state"}[kind]
    return source_kind, {name: given[name] for name in allowed if name in given}


def _with_evidence(rationale: str, evidence: Sequence[str] | None) -> str:
    """The rationale with its evidence appended: retract, contest and reinforce take no
    evidence field, and the audit entry keeps the rationale, so the references stay on record."""
    if not evidence:
        return rationale
    return _clip(f"{rationale} (evidence: {'; '.join(evidence)})", RATIONALE_CHARS)


# -- the server -------------------------------------------------------------------------

READ = ToolAnnotations(read_only_hint=True, open_world_hint=False)

#: name -> (title, description, annotations); the descriptions are written for the model.
SPECS: dict[str, tuple[str, str, ToolAnnotations]] = {
    "remember": (
        "Remember",
        """\
Store something worth keeping across conversations: kind=fact for a durable statement \
(subject, predicate, object: acme-api / runs_on / Python 3.13), kind=event for something that \
happened (text), kind=working_state for where a task stands (thread_id, task_state, \
context_summary), to resume it later. Recall first to avoid duplicates. Do not use it to fix a \
wrong memory: a new fact does not replace the old one; use supersede_memory.""",
        ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    ),
    "recall": (
        "Recall memories",
        """\
Search memory before answering from past work or decisions. Hybrid search (words, meaning, \
entities, salience), best first, one line per memory starting with its [id]. Superseded and \
retracted memories are left out; CONTESTED ones are flagged and ranked last. expand=true adds \
memories one link away. Use get_memory for one record by id.""",
        READ,
    ),
    "get_memory": (
        "Read a memory",
        """\
Read one memory by id, with its status, evidence and links. A SUPERSEDED or RETRACTED memory \
is still shown, marked, with the id of its replacement when there is one: use that one. Use \
recall to search; memory_history for why it changed.""",
        READ,
    ),
    "memory_history": (
        "Memory history",
        """\
The audit trail of one memory: each creation, correction and reinforcement with who, when and \
the rationale given, and whether the tamper-evident hash chain verifies. Use it to explain why \
a memory changed or who asserted it.""",
        READ,
    ),
    "supersede_memory": (
        "Correct a fact",
        """\
Use when a remembered fact is wrong and you know the right value: writes the corrected fact and \
retires the old one (kept, marked superseded, no longer recalled). Give only what changes \
(usually object), a rationale and at least one evidence reference. Use retract_memory when it is \
wrong and there is no replacement; contest_memory when you are unsure. Events cannot be \
superseded.""",
        ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
        ),
    ),
    "retract_memory": (
        "Retract a memory",
        """\
Use when a memory is wrong or no longer true and there is no replacement: it stops being \
recalled and its fact is not learned again from later observations; its history stays. Use \
supersede_memory when you know the right value; contest_memory when you are unsure. Events \
cannot be retracted.""",
        ToolAnnotations(
            read_only_hint=False, destructive_hint=True, idempotent_hint=False, open_world_hint=False
        ),
    ),
    "contest_memory": (
        "Contest a memory",
        """\
Use when you doubt a memory but cannot show it is wrong (conflicting sources, a surprising \
value): it stays, marked CONTESTED and ranked below active memories. Optionally name the memory \
that contradicts it. Once you know, use supersede_memory or retract_memory.""",
        ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    ),
    "reinforce_memory": (
        "Reinforce a memory",
        """\
Use when a memory proved right and useful: raises its salience so it ranks higher and fades more \
slowly. It changes no content; to change content use supersede_memory.""",
        ToolAnnotations(
            read_only_hint=False, destructive_hint=False, idempotent_hint=False, open_world_hint=False
        ),
    ),
}


def tool_names(*, read_only: bool = False, no_revision: bool = False) -> list[str]:
    """The tools advertised under these flags, in listing order."""
    if read_only:
        return list(READ_TOOLS)
    return ["remember", *READ_TOOLS, *([] if no_revision else CORRECTION_TOOLS)]


def _require(tool: Tool, name: str) -> None:
    """Make the optional argument ``name`` required in the advertised schema.

    ``remember`` takes ``scope: str | None`` so that one signature serves both setups; without a
    default scope the schema should say the model has to give one.
    """
    schema = tool.parameters
    prop = dict(schema["properties"][name])
    branches = [b for b in prop.pop("anyOf", []) if b.get("type") != "null"]
    prop.pop("default", None)
    schema["properties"][name] = {**(branches[0] if len(branches) == 1 else {"anyOf": branches}), **prop}
    schema["required"] = [*schema.get("required", []), name]


def build_server(
    client: Client,
    *,
    read_only: bool = False,
    no_revision: bool = False,
    default_scope: str | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
    wait: float = DEFAULT_WAIT,
) -> MCPServer[Any]:
    """The MCP server with the tools these flags allow, over ``client``."""
    impl = MemoryTools(client, default_scope=default_scope, max_bytes=max_bytes, wait=wait)
    tools = []
    for name in tool_names(read_only=read_only, no_revision=no_revision):
        title, description, annotations = SPECS[name]
        if name in ("remember", "recall") and default_scope:
            description += f" Scope defaults to {default_scope!r}."
        tool = Tool.from_function(
            getattr(impl, name),
            name=name,
            title=title,
            description=description,
            annotations=annotations,
            structured_output=False,
        )
        if name == "remember" and not default_scope:
            _require(tool, "scope")
        tools.append(tool)
    return MCPServer(
        "membrane", title="Membrane memory", instructions=INSTRUCTIONS, tools=tools, log_level="WARNING"
    )


# -- command line -----------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="membrane-mcp", description="Serve a Membrane memory to MCP clients (tools for a model)."
    )
    parser.add_argument(
        "--url", required=True, help="base URL of the Membrane API, e.g. http://127.0.0.1:8080"
    )
    parser.add_argument(
        "--key",
        default=None,
        help="API key (default: $MEMBRANE_API_KEY); the key's policy bounds what the "
        "model may read and change. Prefer the variable: arguments are visible to "
        "other local users.",
    )
    parser.add_argument(
        "--transport",
        choices=("stdio", "http"),
        default="stdio",
        help="stdio (default) or streamable HTTP on 127.0.0.1",
    )
    parser.add_argument(
        "--port", type=int, default=DEFAULT_PORT, help=f"port of the HTTP transport (default {DEFAULT_PORT})"
    )
    parser.add_argument(
        "--read-only", action="store_true", help="advertise only recall, get_memory and memory_history"
    )
    parser.add_argument(
        "--no-revision",
        action="store_true",
        help="advertise no correction tool (supersede, retract, contest, reinforce)",
    )
    parser.add_argument(
        "--scope", default=None, help="scope of remember and recall when the model names none"
    )
    parser.add_argument(
        "--max-bytes",
        type=int,
        default=DEFAULT_MAX_BYTES,
        help=f"byte cap of one tool answer (default {DEFAULT_MAX_BYTES})",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=DEFAULT_WAIT,
        help=f"seconds a write waits for its operation (default {DEFAULT_WAIT:g})",
    )
    parser.add_argument("--timeout", type=float, default=10.0, help="HTTP timeout towards Membrane, seconds")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Run the server until its transport closes; ``membrane-mcp --help`` lists the options."""
    parser = _parser()
    args = parser.parse_args(argv)
    if args.max_bytes < 512:
        parser.error("--max-bytes must be at least 512")
    if not 0 < args.wait <= 30:
        parser.error("--wait must be in (0, 30]")
    key = args.key or os.environ.get("MEMBRANE_API_KEY") or None
    with Client(args.url, api_key=key, timeout=args.timeout) as client:
        server = build_server(
            client,
            read_only=args.read_only,
            no_revision=args.no_revision,
            default_scope=args.scope,
            max_bytes=args.max_bytes,
            wait=args.wait,
        )
        if args.transport == "http":
            # loopback only: the endpoint has no authentication of its own, and whoever reaches
            # it acts with this process's Membrane key
            server.run("streamable-http", host="127.0.0.1", port=args.port)
        else:
            server.run("stdio")
    return 0


if __name__ == "__main__":
    sys.exit(main())
