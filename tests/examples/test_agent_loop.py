"""``examples/agent_loop.py`` end to end: a scripted chat model, the live API, a real Postgres.

The model is a script behind an OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1 that
reads what the loop sent it, as a model reads its context: the record id of a memory is taken
from the system message of the turn. Every request it received is asserted on afterwards.
"""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType
from typing import Any

from membrane_client import Client

from tests.support.scripted_model import ScriptedModel, Step, call, say

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "examples" / "agent_loop.py"
SCOPE = "acme"
WRONG, RIGHT = "acme-api runs_on Python 3.11", "acme-api runs_on Python 3.13"
RATIONALE = "the user said acme-api does not run on Python 3.11; that memory was wrong"
UUID_RE = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
CORRECTIONS = ("supersede_memory", "retract_memory", "contest_memory")

StartModel = Callable[[dict[int, Step]], ScriptedModel]


def _load() -> ModuleType:
    """The example as a module, from its file: ``examples`` is a directory, not a package."""
    spec = importlib.util.spec_from_file_location("agent_loop", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("agent_loop", module)  # dataclasses resolve their module while defined
    spec.loader.exec_module(module)
    return module


agent_loop = _load()


# -- what the scripted model says and reads --------------------------------------------------


def system(request: dict[str, Any]) -> str:
    """The system message of a request; the loop sends exactly one, first."""
    systems = [m for m in request["messages"] if m["role"] == "system"]
    assert len(systems) == 1 and request["messages"][0] is systems[0], request["messages"]
    return str(systems[0]["content"])


def memories(request: dict[str, Any]) -> str:
    """The retrieved memories of a request's system message (what follows the instructions)."""
    text = system(request)
    assert text.startswith(agent_loop.INSTRUCTIONS), text
    return text[len(agent_loop.INSTRUCTIONS) :]


def fact_id(request: dict[str, Any], fact: str) -> str:
    """The id of the active fact ``fact`` in the memories of ``request``."""
    found = re.search(
        rf"\[({UUID_RE})\] \(semantic, active, [^)]*\) {re.escape(fact)}$", memories(request), re.MULTILINE
    )
    assert found, f"no active fact {fact!r} in:\n{memories(request)}"
    return found.group(1)


def last_tool_result(request: dict[str, Any]) -> str:
    """The content of the last tool message: the outcome the loop sent back."""
    message = request["messages"][-1]
    assert message["role"] == "tool", message
    return str(message["content"])


def answer_from(request: dict[str, Any]) -> str:
    """What a model would answer from its memories: every version of the fact it was shown."""
    return f"acme-api runs on {' or '.join(re.findall(r'acme-api runs_on (.+)', memories(request)))}."


def fact_args(obj: str) -> dict[str, str]:
    return {"subject": "acme-api", "predicate": "runs_on", "object": obj}


SCRIPT_TURNS: dict[int, Step] = {
    # turn 1: the user states a wrong fact; the model remembers it
    1: lambda req, n: (
        call("remember", **fact_args("Python 3.11"))
        if n == 0
        else say("Noted.")
        if "Remembered fact" in last_tool_result(req)
        else say(f"unexpected: {last_tool_result(req)}")
    ),
    # turn 2: the user corrects it; the model retracts the fact whose id it reads in its memories,
    # then remembers the right value
    2: lambda req, n: [
        lambda: call("retract_memory", record_id=fact_id(req, WRONG), rationale=RATIONALE),
        lambda: call("remember", **fact_args("Python 3.13")),
        lambda: say("Thanks, my memory is corrected."),
    ][n](),
    # turns 3 and 4: the model answers from the fact it reads in its memories
    3: lambda req, n: say(answer_from(req)),
    4: lambda req, n: say(answer_from(req)),
}

USER = [
    "Remember this: acme-api runs on Python 3.11.",
    "That was wrong: acme-api does not run on Python 3.11, it runs on Python 3.13.",
    "Which Python version does acme-api run on?",
    "Does acme-api run on Python 3.11?",  # names the wrong value: retrieval would match it lexically
]


def test_a_correction_keeps_the_wrong_fact_out_of_later_turns(
    scripted_model: StartModel, sdk: Client, membrane_url: str
) -> None:
    model = scripted_model(SCRIPT_TURNS)
    logged: list[str] = []
    with (
        agent_loop.ChatModel(model.base_url, "scripted-1", api_key="chat-key") as chat,
        Client(membrane_url, timeout=30.0) as memory,
    ):
        agent = agent_loop.Agent(chat, memory, SCOPE, log=logged.append)
        turns = [agent.turn(text) for text in USER]
    assert not model.errors, model.errors
    assert [t.answered for t in turns] == [True] * 4
    assert [t.rounds for t in turns] == [2, 3, 1, 1]
    assert [len(model.turn_requests(n)) for n in (1, 2, 3, 4)] == [2, 3, 1, 1]

    # the requests: model, key, the four tools, each correction requiring a rationale
    for request, headers in zip(model.requests, model.headers, strict=True):
        assert request["model"] == "scripted-1" and request["tool_choice"] == "auto"
        assert headers["authorization"] == "Bearer chat-key"
        tools = {t["function"]["name"]: t["function"]["parameters"] for t in request["tools"]}
        assert set(tools) == {"remember", *CORRECTIONS}
        assert set(tools["remember"]["required"]) == {"subject", "predicate", "object"}
        assert all({"record_id", "rationale"} <= set(tools[name]["required"]) for name in CORRECTIONS)

    # turn 1: nothing remembered yet; the wrong fact is captured by remember
    first = model.turn_requests(1)
    assert "No memories match this message in scope acme." in memories(first[0])
    assert "Remembered fact [" in turns[0].tool_calls[0].result and WRONG in turns[0].tool_calls[0].result

    # turn 2 (positive control): the wrong fact IS in the memories, and its id is what was retracted
    second = model.turn_requests(2)
    wrong = fact_id(second[0], WRONG)
    assert all(system(r) == system(second[0]) for r in second)  # one system message per turn
    retract, remember = turns[1].tool_calls
    assert (retract.name, retract.args) == ("retract_memory", {"record_id": wrong, "rationale": RATIONALE})
    assert retract.ok and retract.result.startswith(f"Retracted [{wrong}]")
    assert last_tool_result(second[1]) == retract.result  # the outcome went back as the tool message
    assert remember.ok and RIGHT in remember.result
    right = re.search(rf"Remembered fact \[({UUID_RE})\]", remember.result)
    assert right is not None

    # turns 3 and 4: the wrong fact is never in the memories again; the right one is
    for n in (3, 4):
        (request,) = model.turn_requests(n)
        shown = memories(request)
        assert wrong not in shown and "3.11" not in shown, shown
        assert fact_id(request, RIGHT) == right.group(1)
    assert turns[2].reply == turns[3].reply == "acme-api runs on Python 3.13."
    # turn 4's query matches the raw observation of the wrong value: the loop leaves it out
    raw = sdk.retrieve(USER[3], scopes=[SCOPE], limit=20).records
    assert any("Python 3.11" in str((r.payload or {}).get("data")) for r in raw)
    # the earlier turns are sent as conversation, never their memories: one system message
    assert [m["content"] for m in model.turn_requests(4)[0]["messages"] if m["role"] == "user"] == USER

    # Membrane: the wrong fact is retracted, with the rationale in its audit; the chain holds
    assert sdk.get(wrong).status == "retracted"
    assert sdk.get(right.group(1)).status == "active"
    history = sdk.audit(wrong)
    assert history.chain_valid
    retractions = [e for e in history.entries if e.details.get("operation") == "retract"]
    assert [(e.action, e.rationale) for e in retractions] == [("revise", RATIONALE)], history.entries

    # every tool call is a tool_output episode (name, args, result); every answer an event
    calls = [c for t in turns for c in t.tool_calls]
    assert [c.name for c in calls] == ["remember", "retract_memory", "remember"]
    for c in calls:
        assert c.record_id is not None
        payload = sdk.get(c.record_id).payload or {}
        assert payload["source_kind"] == "tool_output" and payload["outcome"] == "success"
        assert payload["tool_calls"] == [{"tool": c.name, "args": c.args, "result": c.result}]
    for t in turns:
        assert t.reply_record_id is not None
        payload = sdk.get(t.reply_record_id).payload or {}
        assert (payload["source_kind"], payload["text"]) == ("event", t.reply)
    assert len(logged) == 3 and logged[1].startswith("tool retract_memory(")


def test_a_turn_stops_after_max_rounds_and_refusals_reach_the_model(
    scripted_model: StartModel, sdk: Client
) -> None:
    missing = "00000000-0000-4000-8000-000000000000"
    steps = [
        call("contest_memory", record_id="not-an-id", rationale="unsure"),
        call("retract_memory", record_id=missing, rationale="gone"),
        call("forget_everything"),
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [  # arguments that are not JSON
                {
                    "id": "call_bad",
                    "type": "function",
                    "function": {"name": "remember", "arguments": '{"subject": '},
                }
            ],
        },
        call("retract_memory", record_id=missing, rationale="again"),
    ]
    model = scripted_model({1: lambda req, n: steps[n]})
    with agent_loop.ChatModel(model.base_url, "scripted-1") as chat:
        agent = agent_loop.Agent(chat, sdk, SCOPE, max_rounds=4, log=lambda _: None)
        turn = agent.turn("clean up")
    assert not model.errors, model.errors
    assert (turn.answered, turn.rounds, len(model.requests)) == (False, 4, 4)
    assert "still calling tools after 4 rounds" in turn.reply and turn.reply_record_id is None
    results = [c.result for c in turn.tool_calls]
    assert results[0] == "error: record_id must be a memory id (a UUID, as shown in brackets)"
    assert results[1].startswith("refused: not_found")
    assert results[2].startswith("error: unknown tool 'forget_everything'")
    assert results[3].startswith("error: the arguments are not valid JSON")
    assert not any(c.ok for c in turn.tool_calls)
    # each refusal went back to the model as the answer to its call
    assert [last_tool_result(r) for r in model.requests[1:]] == results[:3]
    assert "authorization" not in model.headers[0]  # no key given: none sent
    # a failed call is captured too, as a failure
    for c in turn.tool_calls:
        assert c.record_id is not None
        assert (sdk.get(c.record_id).payload or {})["outcome"] == "failure"


def test_the_script_reads_its_settings_from_the_environment(
    scripted_model: StartModel, membrane_url: str, sdk: Client
) -> None:
    model = scripted_model(
        {1: lambda req, n: say(f"hello from {req['model']}"), 2: lambda req, n: say("bye")}
    )
    env = {
        **os.environ,
        "OPENAI_BASE_URL": model.base_url,
        "OPENAI_MODEL": "env-model",
        "OPENAI_API_KEY": "env-key",
        "MEMBRANE_URL": membrane_url,
    }
    env.pop("MEMBRANE_API_KEY", None)
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--scope", "cli"],
        input="hi\n\nhow are you\n",
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.splitlines() == ["hello from env-model", "bye"]
    assert [h["authorization"] for h in model.headers] == ["Bearer env-key"] * 2
    # the answers were captured in the scope given
    texts = {(r.payload or {}).get("text") for r in sdk.retrieve("hello bye", scopes=["cli"]).records}
    assert {"hello from env-model", "bye"} <= texts


def test_help_and_missing_settings() -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("OPENAI_")}
    shown = subprocess.run(
        [sys.executable, str(SCRIPT), "--help"], env=env, capture_output=True, text=True, timeout=60, cwd=ROOT
    )
    assert shown.returncode == 0, shown.stderr
    for option in ("--base-url", "--model", "--api-key", "--membrane-url", "--membrane-key", "--scope"):
        assert option in shown.stdout
    refused = subprocess.run(
        [sys.executable, str(SCRIPT), "-m", "hi"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
    )
    assert refused.returncode == 2 and "--base-url (or OPENAI_BASE_URL) is required" in refused.stderr
