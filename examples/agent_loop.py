"""An agent loop with Membrane as its long-term memory, over any OpenAI-compatible chat endpoint.

``python examples/agent_loop.py --base-url URL --model NAME [--scope SCOPE] [-m MESSAGE ...]``

Each user turn:

1. the memories that match the user's message are retrieved from Membrane (in ``--scope``) and
   put, one compact line per memory starting with its id, in the system message of that turn;
2. ``POST {base_url}/chat/completions`` is called with the conversation and four tools:
   ``remember`` (a fact: subject, predicate, object) and the corrections ``supersede_memory``,
   ``retract_memory`` and ``contest_memory``, each with a rationale kept in the memory's audit;
3. each tool call is executed through the Membrane SDK (waiting for its operation), its outcome
   is sent back as the tool message and the completion is asked again, until the model answers
   without tool calls (at most ``--max-rounds`` completions a turn);
4. each tool call is captured as a ``tool_output`` episode (tool, args, result) and the answer
   as an ``event``.

The chat endpoint is spoken to with httpx alone, so any server with the OpenAI chat completions
API and tool calling works (a hosted one, or a local one such as llama.cpp's ``llama-server``,
vLLM or Ollama). Settings come from the arguments or the environment: ``OPENAI_BASE_URL``,
``OPENAI_MODEL``, ``OPENAI_API_KEY``, ``MEMBRANE_URL``, ``MEMBRANE_API_KEY``.

Importable: :class:`Agent` runs turns over a :class:`ChatModel` and a
:class:`membrane_client.Client`; :func:`main` is the command line.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import TracebackType
from typing import Any
from uuid import UUID

import httpx
from membrane_client import Client, MembraneError
from membrane_client.models import Operation, Record

__all__ = [
    "INSTRUCTIONS",
    "TOOLS",
    "Agent",
    "ChatError",
    "ChatModel",
    "ToolCall",
    "Turn",
    "main",
    "memory_block",
    "record_line",
]

DEFAULT_MEMBRANE_URL = "http://127.0.0.1:8080"
DEFAULT_SCOPE = "agent"
#: Completions per user turn: a model that keeps calling tools is stopped here.
MAX_ROUNDS = 8
#: Memories listed in a turn's system message.
MEMORIES = 10
#: Seconds a Membrane write waits for its operation.
WAIT = 10.0
#: Earlier turns sent with each completion; older ones are dropped whole, so that a tool
#: message is never sent without the assistant message that called it.
HISTORY_TURNS = 20
#: A memory line is cut here, so that one long episode cannot fill the system message.
LINE_CHARS = 400
#: Byte cap of the memory section of a system message.
MAX_BYTES = 8 * 1024
#: Longest rationale the API keeps (``revision_rules.Rationale``).
RATIONALE_CHARS = 4096

INSTRUCTIONS = """\
You are a helpful assistant with a long-term memory (Membrane), shared across conversations \
and kept per scope. Before each user message, the memories that match it are listed below.
Remember durable facts the user tells you (remember: subject, predicate, object), unless the \
same fact is already listed.
When a remembered fact is wrong, correct it (supersede_memory, retract_memory or \
contest_memory, each with a rationale) instead of remembering a contradicting fact: \
corrections keep the history and stop the wrong memory from being recalled.
Each memory line starts with its id in brackets; pass that id to the correction tools."""

# -- the tools, as the model sees them (wording shared with membrane_client.mcp_server) -----

_ID = {
    "type": "string",
    "format": "uuid",
    "description": "Id of a memory, as shown in brackets in the memories listed.",
}
_RATIONALE = {
    "type": "string",
    "minLength": 1,
    "maxLength": 2048,
    "description": "Why you make this change, in a sentence; kept in the memory's audit history.",
}
_EVIDENCE = {
    "type": "array",
    "maxItems": 16,
    "items": {"type": "string", "minLength": 1, "maxLength": 512},
    "description": "Short references backing the change: a file and line, a URL, a tool "
    "output, a message, or a memory id.",
}


def _phrase(description: str) -> dict[str, Any]:
    return {"type": "string", "minLength": 1, "maxLength": 512, "description": description}


def _function(name: str, description: str, properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": name,
            "description": description,
            "parameters": {
                "type": "object",
                "properties": properties,
                "required": required,
                "additionalProperties": False,
            },
        },
    }


TOOLS: list[dict[str, Any]] = [
    _function(
        "remember",
        """\
Store a durable fact worth keeping across conversations: subject, predicate, object (acme-api / \
runs_on / Python 3.13). Do not remember a fact already listed in the memories. Do not use it to \
fix a wrong memory: a new fact does not replace the old one; use supersede_memory.""",
        {
            "subject": _phrase("What it is about, e.g. acme-api."),
            "predicate": _phrase("The relation, e.g. runs_on."),
            "object": _phrase("The value, e.g. Python 3.13."),
            "reason": {"type": "string", "maxLength": 4096, "description": "Why this is worth remembering."},
        },
        ["subject", "predicate", "object"],
    ),
    _function(
        "supersede_memory",
        """\
Use when a remembered fact is wrong and you know the right value: writes the corrected fact and \
retires the old one (kept, marked superseded, no longer recalled). Give only what changes \
(usually object), a rationale and at least one evidence reference. Use retract_memory when it is \
wrong and there is no replacement; contest_memory when you are unsure. Events cannot be \
superseded.""",
        {
            "record_id": _ID,
            "rationale": _RATIONALE,
            "evidence": {**_EVIDENCE, "minItems": 1},
            "object": _phrase("The right value, when it changes."),
            "subject": _phrase("The new subject, when it changes."),
            "predicate": _phrase("The new relation, when it changes."),
        },
        ["record_id", "rationale", "evidence"],
    ),
    _function(
        "retract_memory",
        """\
Use when a memory is wrong or no longer true and there is no replacement: it stops being \
recalled and its fact is not learned again from later observations; its history stays. Use \
supersede_memory when you know the right value; contest_memory when you are unsure. Events \
cannot be retracted.""",
        {"record_id": _ID, "rationale": _RATIONALE, "evidence": _EVIDENCE},
        ["record_id", "rationale"],
    ),
    _function(
        "contest_memory",
        """\
Use when you doubt a memory but cannot show it is wrong (conflicting sources, a surprising \
value): it stays, marked CONTESTED and ranked below active memories. Optionally name the memory \
that contradicts it. Once you know, use supersede_memory or retract_memory.""",
        {
            "record_id": _ID,
            "rationale": _RATIONALE,
            "evidence": _EVIDENCE,
            "contesting_record_id": {
                **_ID,
                "description": "A memory that contradicts this one, if there is one.",
            },
        },
        ["record_id", "rationale"],
    ),
]

# -- memories as compact lines (as membrane_client.mcp_server renders them; that module needs
# the mcp package, which this example does not) ---------------------------------------------


def _squash(text: str) -> str:
    """``text`` on one line: a memory is one line of the system message."""
    return re.sub(r"\s+", " ", text).strip()


def _clip(text: str, chars: int) -> str:
    return text if len(text) <= chars else text[: chars - 1].rstrip() + "\u2026"


def _status(record: Record) -> str:
    """The status as a model should read it: anything but active stands out."""
    if record.status == "active":
        return "active"
    if record.status == "retracted":
        successor = next((r.target_id for r in record.relations if r.predicate == "superseded_by"), None)
        return f"SUPERSEDED by [{successor}]" if successor else "RETRACTED"
    return record.status.upper()


def content(record: Record) -> str:
    """What ``record`` says, on one line."""
    if record.redacted or record.payload is None:
        return "(content withheld: above this key's sensitivity clearance)"
    p = record.payload
    if record.type == "semantic" and {"subject", "predicate", "object"} <= set(p):
        text = f"{p['subject']} {p['predicate']} {p['object']}"
    elif record.type == "episodic":
        # a tool call is shown by its tool's name only: its arguments are history, and echoing
        # them would bring back the values a correction has since retired
        tools = [c.get("tool") for c in p.get("tool_calls") or [] if isinstance(c, Mapping)]
        data = p.get("data") if isinstance(p.get("data"), Mapping) else {}
        text = str(p.get("text") or "")
        if not text and {"subject", "predicate", "object"} <= set(data):
            text = f"{data['subject']} {data['predicate']} {data['object']}"
        if tools:
            text += f" [tools: {', '.join(str(t) for t in tools)}]"
        if p.get("outcome"):
            text += f" [outcome: {p['outcome']}]"
        text = f"{p.get('source_kind') or 'event'}: {text.strip()}"
    elif record.type == "working":
        text = f"task {p.get('thread_id')} [{p.get('task_state')}]: {p.get('context_summary', '')}"
    else:
        text = record.summary or json.dumps(p, separators=(",", ":"), default=str)
    return _squash(text)


def record_line(record: Record, *, chars: int = LINE_CHARS) -> str:
    """``[id] (type, status, salience 0.83) content``: one memory, one line."""
    return (
        f"[{record.id}] ({record.type}, {_status(record)}, salience {record.salience:.2f}) "
        f"{_clip(content(record), chars)}"
    )


def _is_observation(record: Record) -> bool:
    """A raw observation episode: immutable history of a fact, which corrections act on instead.

    Listed beside the facts, it would bring a retracted value back into the context that
    retrieval has just left it out of.
    """
    return record.type == "episodic" and (record.payload or {}).get("source_kind") == "observation"


def memory_block(
    records: Sequence[Record], scope: str, *, limit: int = MEMORIES, max_bytes: int = MAX_BYTES
) -> str:
    """The memory section of a system message: one line per record, best first, under ``max_bytes``."""
    shown = [r for r in records if not _is_observation(r)][:limit]
    if not shown:
        return f"No memories match this message in scope {scope}."
    lines = [f"Memories that match this message in scope {scope}, best first:"]
    used = len(lines[0].encode())
    for index, record in enumerate(shown):
        line = record_line(record)
        if used + len(line.encode()) + 1 > max_bytes:
            lines.append(f"\u2026 {len(shown) - index} more not shown.")
            break
        lines.append(line)
        used += len(line.encode()) + 1
    if any(r.status == "contested" for r in shown):
        lines.append("Note: CONTESTED memories are disputed: verify before relying on them.")
    return "\n".join(lines)


# -- the chat endpoint ------------------------------------------------------------------------


class ChatError(RuntimeError):
    """The chat endpoint refused a request or answered something that is not a completion."""


class ChatModel:
    """``POST {base_url}/chat/completions`` with tools, through httpx."""

    def __init__(
        self,
        base_url: str,
        model: str,
        *,
        api_key: str | None = None,
        timeout: float = 120.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self.model = model
        headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
        # the endpoint is {base_url}/chat/completions whether or not base_url ends in a slash
        self._http = httpx.Client(
            base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout, transport=transport
        )

    def close(self) -> None:
        """Close the connections."""
        self._http.close()

    def __enter__(self) -> ChatModel:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def complete(
        self, messages: Sequence[Mapping[str, Any]], tools: Sequence[Mapping[str, Any]]
    ) -> dict[str, Any]:
        """The assistant message of one completion: ``content`` and maybe ``tool_calls``."""
        body = {"model": self.model, "messages": list(messages), "tools": list(tools), "tool_choice": "auto"}
        try:
            response = self._http.post("chat/completions", json=body)
        except httpx.HTTPError as exc:
            raise ChatError(f"the chat endpoint did not answer: {exc}") from exc
        if response.status_code >= 400:
            raise ChatError(f"the chat endpoint answered {response.status_code}: {_clip(response.text, 500)}")
        try:
            message = response.json()["choices"][0]["message"]
        except (ValueError, LookupError, TypeError) as exc:
            raise ChatError(f"not a chat completion: {_clip(response.text, 500)}") from exc
        if not isinstance(message, dict):
            raise ChatError(f"not a chat completion: {_clip(response.text, 500)}")
        return message


# -- the loop ------------------------------------------------------------------------------------


@dataclass
class ToolCall:
    """One tool call of the model, as executed."""

    name: str
    args: dict[str, Any]
    result: str
    ok: bool
    #: the ``tool_output`` episode that records this call, once captured
    record_id: UUID | None = None


@dataclass
class Turn:
    """What one user turn did."""

    user: str
    #: the system message of the turn: the instructions and the memories retrieved for it
    system: str
    reply: str = ""
    tool_calls: list[ToolCall] = field(default_factory=list)
    #: completions asked for
    rounds: int = 0
    #: False when the model was still calling tools after the last round
    answered: bool = False
    #: the ``event`` episode that records the reply, once captured
    reply_record_id: UUID | None = None


class ToolInputError(ValueError):
    """Arguments of a tool call that the tool cannot run with; the message is for the model."""


def _arguments(raw: Any) -> dict[str, Any]:
    """A tool call's arguments: a JSON object, as a string (the OpenAI format) or already decoded."""
    if isinstance(raw, str):
        try:
            raw = json.loads(raw or "{}")
        except ValueError as exc:
            raise ToolInputError(f"the arguments are not valid JSON: {exc}") from exc
    if not isinstance(raw, dict):
        raise ToolInputError("the arguments must be a JSON object")
    return raw


def _optional(args: Mapping[str, Any], name: str) -> str | None:
    """The string argument ``name``, stripped; None when it is missing or blank."""
    value = args.get(name)
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    if not isinstance(value, str):
        raise ToolInputError(f"{name} must be a string")
    return value.strip()


def _text(args: Mapping[str, Any], name: str) -> str:
    """The required string argument ``name``, stripped."""
    value = _optional(args, name)
    if value is None:
        raise ToolInputError(f"{name} is required")
    return value


def _record_id(value: str | None, name: str) -> UUID | None:
    """``value`` as a memory id (brackets allowed, as the memory lines show it)."""
    if value is None:
        return None
    try:
        return UUID(value.strip("[]"))
    except ValueError as exc:
        raise ToolInputError(f"{name} must be a memory id (a UUID, as shown in brackets)") from exc


def _target(args: Mapping[str, Any]) -> tuple[UUID, str]:
    """The ``record_id`` and ``rationale`` every correction requires."""
    record_id = _record_id(_text(args, "record_id"), "record_id")
    assert record_id is not None  # a string was given, so it parsed or raised
    return record_id, _text(args, "rationale")


def _evidence(args: Mapping[str, Any], *, required: bool = False) -> list[str]:
    value = args.get("evidence") or []
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise ToolInputError("evidence must be a list of strings")
    refs = [v.strip() for v in value if v.strip()]
    if required and not refs:
        raise ToolInputError("evidence needs at least one reference")
    return refs


def _with_evidence(rationale: str, evidence: Sequence[str]) -> str:
    """The rationale with its evidence appended: retract and contest take no evidence field, and
    the audit entry keeps the rationale, so the references stay on record."""
    if not evidence:
        return rationale
    return _clip(f"{rationale} (evidence: {'; '.join(evidence)})", RATIONALE_CHARS)


def _refusal(exc: MembraneError) -> str:
    text = f"refused: {exc.code}: {exc.message}"
    for detail in exc.details:
        if detail.get("successor_id"):
            text += f". Its current version is [{detail['successor_id']}]: correct that one instead"
    return text


def _log_to_stderr(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


class Agent:
    """Runs user turns: retrieve, complete with tools until answered, capture what happened.

    The conversation is kept in memory for ``history_turns`` turns; the system message is
    rebuilt each turn, so the memories of an earlier turn (which a correction may have retired
    since) are never sent again.
    """

    def __init__(
        self,
        chat: ChatModel,
        memory: Client,
        scope: str,
        *,
        memories: int = MEMORIES,
        max_rounds: int = MAX_ROUNDS,
        wait: float = WAIT,
        history_turns: int = HISTORY_TURNS,
        instructions: str = INSTRUCTIONS,
        log: Callable[[str], Any] = _log_to_stderr,
    ) -> None:
        if max_rounds < 1:
            raise ValueError("max_rounds must be at least 1")
        self.chat = chat
        self.memory = memory
        self.scope = scope
        self.memories = memories
        self.max_rounds = max_rounds
        self.wait = wait
        self.history_turns = history_turns
        self.instructions = instructions
        self.log = log
        self._turns: list[list[dict[str, Any]]] = []
        self._tools: dict[str, Callable[[dict[str, Any]], str]] = {
            "remember": self._remember,
            "supersede_memory": self._supersede,
            "retract_memory": self._retract,
            "contest_memory": self._contest,
        }

    # -- a turn ---------------------------------------------------------------------------------

    def turn(self, user_message: str) -> Turn:
        """Answer ``user_message``; the turn joins the conversation only once the model answered
        or the rounds ran out. A :class:`ChatError` leaves the conversation as it was, but not
        the memory: what its tool calls wrote before it stays written, and captured."""
        turn = Turn(user=user_message, system=f"{self.instructions}\n\n{self.recall(user_message)}")
        kept = self._turns[-self.history_turns :] if self.history_turns > 0 else []
        history = [message for past in kept for message in past]
        messages: list[dict[str, Any]] = [{"role": "user", "content": user_message}]
        for _ in range(self.max_rounds):
            turn.rounds += 1
            answer = self.chat.complete(
                [{"role": "system", "content": turn.system}, *history, *messages], TOOLS
            )
            calls = [c for c in answer.get("tool_calls") or [] if isinstance(c, Mapping)]
            if not calls:
                turn.reply, turn.answered = str(answer.get("content") or ""), True
                messages.append({"role": "assistant", "content": turn.reply})
                turn.reply_record_id = self._capture_reply(turn.reply)
                break
            calls = [self._normalised(call) for call in calls]
            messages.append({"role": "assistant", "content": answer.get("content"), "tool_calls": calls})
            for call in calls:
                done = self.execute(call["function"]["name"], call["function"]["arguments"])
                turn.tool_calls.append(done)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": done.result})
        else:
            turn.reply = f"(no answer: the model was still calling tools after {self.max_rounds} rounds)"
        self._turns.append(messages)
        return turn

    @staticmethod
    def _normalised(call: Mapping[str, Any]) -> dict[str, Any]:
        """The call as it is sent back: an id to answer it under, and arguments as a JSON string
        (some servers send an object, or no id)."""
        given = call.get("function")
        function: Mapping[str, Any] = given if isinstance(given, Mapping) else {}
        arguments = function.get("arguments")
        if not isinstance(arguments, str):
            arguments = json.dumps(arguments if arguments is not None else {})
        return {
            "id": str(call.get("id") or f"call_{uuid.uuid4().hex[:24]}"),
            "type": "function",
            "function": {"name": str(function.get("name") or ""), "arguments": arguments},
        }

    def recall(self, query: str) -> str:
        """The memory section for ``query``: what Membrane retrieves for it in the scope."""
        try:
            # observations are dropped from the list, so ask for more to still fill it
            result = self.memory.retrieve(query, scopes=[self.scope], limit=min(2 * self.memories, 100))
        except MembraneError as exc:
            # the conversation goes on without memory rather than stopping
            self.log(f"membrane: retrieval failed: {exc.code}: {exc.message}")
            return f"Memory is unavailable for this message ({exc.code}); answer without it."
        return memory_block(result.records, self.scope, limit=self.memories)

    # -- tools ------------------------------------------------------------------------------------

    def execute(self, name: str, raw_arguments: Any) -> ToolCall:
        """Run one tool call through the SDK and capture it; a refusal is a result, not a crash."""
        args: dict[str, Any] = {}
        try:
            args = _arguments(raw_arguments)
            tool = self._tools.get(name)
            if tool is None:
                raise ToolInputError(f"unknown tool {name!r}; the tools are {', '.join(self._tools)}")
            result, ok = tool(args), True
        except ToolInputError as exc:
            result, ok = f"error: {exc}", False
        except MembraneError as exc:
            result, ok = _refusal(exc), False
        call = ToolCall(name=name, args=args, result=result, ok=ok)
        self.log(f"tool {name}({json.dumps(args, ensure_ascii=False)}) -> {_squash(result)}")
        call.record_id = self._capture(
            {
                "source_kind": "tool_output",
                "content": {
                    "tool_calls": [{"tool": name or "unknown", "args": args, "result": result}],
                    "outcome": "success" if ok else "failure",
                },
            }
        )
        return call

    def _finished(self, op: Operation, what: str) -> Operation | str:
        """``op`` once it succeeded; the text to answer while it still runs; raises if refused."""
        op.raise_for_error()
        if not op.succeeded:
            return (
                f"{what} was accepted but had not finished after {self.wait:g} s (operation "
                f"{op.operation_id} is {op.status})."
            )
        return op

    def _line(self, record_id: UUID) -> str:
        """The record's line, or its bare id when it cannot be read back."""
        try:
            return record_line(self.memory.get(record_id))
        except MembraneError:
            return f"[{record_id}]"

    def _remember(self, args: dict[str, Any]) -> str:
        fact = {name: _text(args, name) for name in ("subject", "predicate", "object")}
        capture: dict[str, Any] = {"source_kind": "observation", "scope": self.scope, "content": fact}
        if reason := _optional(args, "reason"):
            capture["reason_to_remember"] = reason
        done = self._finished(self.memory.capture(capture, wait=self.wait), "The capture")
        if isinstance(done, str):
            return done
        observation, *derived = done.record_ids
        if not derived:
            return (
                f"Recorded the observation [{observation}], but no fact was kept: the same fact was "
                f"retracted earlier in scope {self.scope} (or is contested there), and an observation "
                "does not bring it back. If it is true again, supersede the fact that replaced it."
            )
        return f"Remembered fact {self._line(derived[0])} (observation [{observation}])."

    def _supersede(self, args: dict[str, Any]) -> str:
        record_id, rationale = _target(args)
        given = {name: _optional(args, name) for name in ("subject", "predicate", "object")}
        new = {name: value for name, value in given.items() if value}
        if not new:
            raise ToolInputError("give the corrected object (or subject or predicate) of the fact")
        refs = [{"kind": "observation", "ref": ref} for ref in _evidence(args, required=True)]
        op = self.memory.supersede(record_id, new, rationale, evidence=refs, wait=self.wait)
        done = self._finished(op, "The supersede")
        if isinstance(done, str):
            return done
        return (
            f"Superseded [{record_id}] with {self._line(done.record_ids[0])}. The old memory is kept, "
            "marked superseded, and no longer recalled."
        )

    def _retract(self, args: dict[str, Any]) -> str:
        record_id, rationale = _target(args)
        op = self.memory.retract(record_id, _with_evidence(rationale, _evidence(args)), wait=self.wait)
        done = self._finished(op, "The retraction")
        if isinstance(done, str):
            return done
        return (
            f"Retracted [{record_id}]. It is no longer recalled and its fact is not learned again "
            "from later observations; it stays readable by id, with its history."
        )

    def _contest(self, args: dict[str, Any]) -> str:
        record_id, rationale = _target(args)
        op = self.memory.contest(
            record_id,
            _with_evidence(rationale, _evidence(args)),
            contesting_record_id=_record_id(_optional(args, "contesting_record_id"), "contesting_record_id"),
            wait=self.wait,
        )
        done = self._finished(op, "The contest")
        if isinstance(done, str):
            return done
        return (
            f"Marked [{record_id}] CONTESTED: it is flagged and ranked below active memories. "
            "Supersede or retract it once you know it is wrong."
        )

    # -- captures -------------------------------------------------------------------------------

    def _capture_reply(self, reply: str) -> UUID | None:
        if not reply.strip():
            return None
        return self._capture(
            {"source_kind": "event", "content": {"text": reply}, "metadata": {"role": "assistant"}}
        )

    def _capture(self, capture: dict[str, Any]) -> UUID | None:
        """Capture one episode in the scope; its record id, or None when Membrane refused it.

        A lost episode costs history, not the conversation: it is reported and the turn goes on.
        """
        try:
            op = self.memory.capture({**capture, "scope": self.scope}, wait=self.wait)
            op.raise_for_error()
        except MembraneError as exc:
            self.log(f"membrane: capture failed: {exc.code}: {exc.message}")
            return None
        return op.record_ids[0] if op.record_ids else op.record_id


# -- command line ------------------------------------------------------------------------------


def _parser() -> argparse.ArgumentParser:
    env = os.environ.get
    parser = argparse.ArgumentParser(
        prog="agent_loop.py",
        description="Chat with a model through any OpenAI-compatible chat completions endpoint, with "
        "Membrane as its long-term memory: memories retrieved before each turn, tool calls "
        "and answers captured, and tools to remember and to correct memories.",
    )
    parser.add_argument(
        "--base-url",
        default=env("OPENAI_BASE_URL"),
        help="base URL of the chat endpoint, e.g. http://127.0.0.1:8000/v1 (default: $OPENAI_BASE_URL)",
    )
    parser.add_argument("--model", default=env("OPENAI_MODEL"), help="model name (default: $OPENAI_MODEL)")
    parser.add_argument(
        "--api-key",
        default=env("OPENAI_API_KEY"),
        help="key of the chat endpoint (default: $OPENAI_API_KEY; none for most local "
        "servers). Prefer the variable: arguments are visible to other local users.",
    )
    parser.add_argument(
        "--membrane-url",
        default=env("MEMBRANE_URL") or DEFAULT_MEMBRANE_URL,
        help=f"base URL of the Membrane API (default: $MEMBRANE_URL or {DEFAULT_MEMBRANE_URL})",
    )
    parser.add_argument(
        "--membrane-key",
        default=env("MEMBRANE_API_KEY"),
        help="Membrane API key (default: $MEMBRANE_API_KEY); its policy bounds what the "
        "model may read and change",
    )
    parser.add_argument(
        "--scope",
        default=DEFAULT_SCOPE,
        help=f"Membrane scope memories are retrieved from and captured in (default {DEFAULT_SCOPE!r})",
    )
    parser.add_argument(
        "-m",
        "--message",
        action="append",
        default=[],
        help="a user message; repeat for several turns. Without it, messages are read "
        "from standard input, one a line, until end of file or /exit",
    )
    parser.add_argument(
        "--max-rounds",
        type=int,
        default=MAX_ROUNDS,
        help=f"completions per turn at most (default {MAX_ROUNDS})",
    )
    parser.add_argument(
        "--memories",
        type=int,
        default=MEMORIES,
        help=f"memories listed per turn at most (default {MEMORIES})",
    )
    parser.add_argument(
        "--wait",
        type=float,
        default=WAIT,
        help=f"seconds a Membrane write waits for its operation (default {WAIT:g})",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=120.0,
        help="HTTP timeout of a chat completion, seconds (default 120)",
    )
    parser.add_argument(
        "-v", "--verbose", action="store_true", help="also print each turn's system message to standard error"
    )
    return parser


def _messages(given: Sequence[str]) -> Any:
    """The user messages: those given, else lines of standard input (prompted on a terminal)."""
    yield from given
    if given:
        return
    prompt = "you> " if sys.stdin.isatty() else ""
    while True:
        try:
            line = input(prompt).strip()
        except EOFError:
            return
        if line == "/exit":
            return
        if line:
            yield line


def main(argv: Sequence[str] | None = None) -> int:
    """Run turns until the messages run out; ``--help`` lists the options."""
    parser = _parser()
    args = parser.parse_args(argv)
    if not args.base_url:
        parser.error("--base-url (or OPENAI_BASE_URL) is required")
    if not args.model:
        parser.error("--model (or OPENAI_MODEL) is required")
    if args.max_rounds < 1 or args.memories < 1:
        parser.error("--max-rounds and --memories must be at least 1")
    if not 0 < args.wait <= 30:
        parser.error("--wait must be in (0, 30]")
    status = 0
    with (
        ChatModel(args.base_url, args.model, api_key=args.api_key or None, timeout=args.timeout) as chat,
        Client(args.membrane_url, api_key=args.membrane_key or None) as memory,
    ):
        agent = Agent(
            chat, memory, args.scope, memories=args.memories, max_rounds=args.max_rounds, wait=args.wait
        )
        for message in _messages(args.message):
            try:
                turn = agent.turn(message)
            except ChatError as exc:
                # interactive: say so and let the user try again; scripted (-m): stop
                print(f"error: {exc}", file=sys.stderr, flush=True)
                status = 1
                if args.message:
                    break
                continue
            if args.verbose:
                print(f"--- system message\n{turn.system}\n---", file=sys.stderr, flush=True)
            print(turn.reply, flush=True)
    return status


if __name__ == "__main__":
    sys.exit(main())
