"""``membrane_client.agents.MembraneSession`` under the OpenAI Agents SDK's ``Runner``.

The model is the scripted OpenAI-compatible endpoint of ``tests/support/scripted_model.py``
(as ``examples/agent_loop.py`` is tested), reached through the SDK's chat completions model;
the session keeps the conversation in Membrane, on the live API and a real Postgres
(RFC 10.9.3).
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest
from agents import Agent, OpenAIChatCompletionsModel, RunConfig, Runner, function_tool
from agents.memory import Session
from membrane_client import AsyncClient, Client, NotFound
from membrane_client.agents import ITEM_TAG, MembraneSession, item_text
from openai import AsyncOpenAI

from tests.support.api import ServeFn
from tests.support.scripted_model import ScriptedModel, Step, call, say

SCOPE = "agents-session:chat-1"
KEYS = {
    "eraser-key": {"read_scopes": [SCOPE], "write_scopes": [SCOPE], "actor": "dpo", "erase": True},
    "agent-key": {"read_scopes": [SCOPE], "write_scopes": [SCOPE], "actor": "agent"},
}


def contents(request: dict[str, Any], role: str) -> list[str]:
    return [str(m["content"]) for m in request["messages"] if m["role"] == role and m.get("content")]


SCRIPT: dict[int, Step] = {
    1: lambda req, n: say("Hello Ada."),
    # the name comes from the history the session gave back; the tool call is kept too
    2: lambda req, n: (
        call("shift_of", person="Ada")
        if n == 0
        else say(
            f"{contents(req, 'user')[0].removeprefix('My name is ').rstrip('.')} "
            f"works {contents(req, 'tool')[-1]}."
        )
    ),
    3: lambda req, n: say(f"I have seen {len(req['messages'])} messages."),
}


@function_tool
def shift_of(person: str) -> str:
    """The shift a person works."""
    return "nights" if person == "Ada" else "days"


async def run(agent: Agent[Any], text: str, session: MembraneSession) -> str:
    result = await Runner.run(agent, text, session=session, run_config=RunConfig(tracing_disabled=True))
    return str(result.final_output)


def make_agent(scripted: ScriptedModel) -> Agent[Any]:
    chat = OpenAIChatCompletionsModel(
        model="scripted",
        openai_client=AsyncOpenAI(base_url=scripted.base_url, api_key="unused", max_retries=0),
    )
    return Agent(name="assistant", instructions="Be brief.", model=chat, tools=[shift_of])


def records(url: str, status: list[str]) -> list[Any]:
    with Client(url, api_key="eraser-key") as sdk:
        return sdk.list_records(scope=SCOPE, tag=ITEM_TAG, status=status, limit=200).records  # type: ignore[arg-type]


def test_the_runner_keeps_its_conversation_in_membrane(
    serve: ServeFn, scripted_model: Callable[[dict[int, Step]], ScriptedModel]
) -> None:
    url = str(serve(keys=KEYS).base_url).rstrip("/")
    scripted = scripted_model(SCRIPT)
    agent = make_agent(scripted)
    session = MembraneSession("chat-1", url=url, api_key="agent-key")
    assert isinstance(session, Session) and session.scope == SCOPE

    async def conversation() -> tuple[list[Any], Any, list[Any]]:
        assert await run(agent, "My name is Ada.", session) == "Hello Ada."
        assert await run(agent, "Which shift do I work?", session) == "Ada works nights."
        items = await session.get_items()
        assert await session.get_items(limit=2) == items[-2:]
        assert await session.get_items(limit=0) == []
        # the third turn replays the tool call and its output from the stored items
        assert await run(agent, "How many messages?", session) == "I have seen 8 messages."
        assert len(await session.get_items()) == 8
        popped = await session.pop_item()
        left = await session.get_items()
        await session.close()
        return items, popped, left

    items, popped, left = asyncio.run(conversation())
    second = scripted.turn_requests(2)
    assert contents(second[0], "user") == ["My name is Ada.", "Which shift do I work?"]
    assert contents(second[0], "assistant") == ["Hello Ada."]  # the history came from the session
    kinds = [i.get("role") or i.get("type") for i in items]
    assert kinds == ["user", "assistant", "user", "function_call", "function_call_output", "assistant"]

    assert popped is not None and popped.get("role") == "assistant"
    assert len(left) == 7 and left[-1] == {"content": "How many messages?", "role": "user"}
    gone = [r for r in records(url, ["retracted"]) if r.metadata["agents"]["item"] == popped]
    assert len(gone) == 1  # retracted, so the history keeps it
    with Client(url, api_key="agent-key") as sdk:
        entry = sdk.audit(gone[0].id).entries[-1]
    assert entry.rationale == "agents session pop_item of session 'chat-1'" and entry.actor == "agent"

    async def clear() -> tuple[list[Any], Any]:
        session = MembraneSession("chat-1", url=url, api_key="agent-key")  # a client on this loop
        await session.clear_session()  # this key may not erase: clearing retracts every item
        after = await session.get_items(), await session.pop_item()
        await session.close()
        return after

    assert asyncio.run(clear()) == ([], None)
    assert len(records(url, ["retracted"])) == 8 and records(url, ["active"]) == []


def test_clear_session_erases_where_the_key_may(serve: ServeFn) -> None:
    url = str(serve(keys=KEYS).base_url).rstrip("/")

    async def scenario() -> list[str]:
        async with AsyncClient(url, api_key="eraser-key") as aclient:
            session = MembraneSession("chat-1", client=aclient)
            other = MembraneSession("chat-2", client=aclient, scope=SCOPE)  # a second session, same scope
            await session.add_items(
                [{"role": "user", "content": "erase me"}, {"role": "assistant", "content": "ok"}]
            )
            await other.add_items([{"role": "user", "content": "another session"}])
            assert [i["content"] for i in await session.get_items()] == ["erase me", "ok"]  # type: ignore[typeddict-item]
            assert len(await other.get_items()) == 1  # sessions sharing a scope stay apart
            popped = await session.pop_item()
            assert popped == {"role": "assistant", "content": "ok"}
            await session.add_items([{"role": "assistant", "content": "again"}])
            mine = [
                r
                for r in records(url, ["active", "retracted"])
                if r.metadata["agents"]["session_id"] == "chat-1"
            ]
            await session.clear_session()
            assert await session.get_items() == []
            assert [i["content"] for i in await other.get_items()] == ["another session"]  # type: ignore[typeddict-item]
            return [str(r.id) for r in mine]

    ids = asyncio.run(scenario())
    assert len(ids) == 3  # two items and the popped one
    with Client(url, api_key="eraser-key") as sdk:
        for record_id in ids:
            with pytest.raises(NotFound):
                sdk.get(record_id)
            assert sdk.audit(record_id).entries[-1].action == "erase"
    left = records(url, ["active", "retracted"])
    assert [r.metadata["agents"]["session_id"] for r in left] == ["chat-2"]  # control: the other session


def test_item_text_is_what_retrieval_indexes() -> None:
    assert item_text({"role": "user", "content": "hi"}) == "user: hi"
    assert (
        item_text({"role": "assistant", "content": [{"type": "output_text", "text": "yes"}]})
        == "assistant: yes"
    )
    assert item_text({"type": "function_call", "name": "f", "arguments": "{}"}) == "call f({})"
    assert item_text({"type": "function_call_output", "output": "42"}) == "output: 42"
    assert len(item_text({"role": "user", "content": "x" * 10_000})) == 4096
