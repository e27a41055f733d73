"""LangMem's memory tools on ``MembraneStore``, inside a small LangGraph ``StateGraph`` agent.

The chat model is the scripted OpenAI-compatible endpoint of ``tests/support/scripted_model.py``
behind ``langchain_openai.ChatOpenAI``: it reads the tool results it is sent, as a model reads
its context, and creates, updates and deletes a memory through LangMem's ``manage_memory``
after finding it with ``search_memory``. The memory's history is then read the way the MCP
server's ``memory_history`` tool reads it (RFC 10.9.2).
"""

from __future__ import annotations

import json
import uuid
import warnings
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from langchain_openai import ChatOpenAI
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.prebuilt import ToolNode, tools_condition
from langgraph.store.base import SearchItem
from langgraph.warnings import LangGraphDeprecatedSinceV10
from membrane_client import Client
from membrane_client.langgraph import MembraneStore
from membrane_client.mcp_server import MemoryTools

from tests.support.api import ServeFn
from tests.support.scripted_model import ScriptedModel, Step, call, say

with warnings.catch_warnings():
    # langmem 0.0.30 imports Send from langgraph.constants, deprecated since LangGraph 1.0
    warnings.simplefilter("ignore", LangGraphDeprecatedSinceV10)
    from langmem import create_manage_memory_tool, create_search_memory_tool

NAMESPACE = ("memories", "{langgraph_user_id}")
ALICE = ("memories", "alice")
DARK, LIGHT = "Alice prefers dark mode", "Alice prefers light mode"


@pytest.fixture
def url(serve: ServeFn) -> str:
    return str(serve().base_url).rstrip("/")


@pytest.fixture
def store(url: str) -> Iterator[MembraneStore]:
    with MembraneStore(url) as s:
        yield s


def tool_result(request: dict[str, Any]) -> str:
    message = request["messages"][-1]
    assert message["role"] == "tool", message
    return str(message["content"])


def found_key(request: dict[str, Any], content: str) -> str:
    """The key of the memory ``content`` in the last search_memory result."""
    hits = json.loads(tool_result(request))
    keys = [h["key"] for h in hits if h["value"]["content"] == content]
    assert len(keys) == 1, hits
    return str(keys[0])


def user_text(request: dict[str, Any]) -> str:
    return str([m for m in request["messages"] if m["role"] == "user"][-1]["content"])


def script(request: dict[str, Any], step: int) -> dict[str, Any]:
    """Each invocation is one user message; what it asks picks the plan."""
    asked = user_text(request)
    if asked.startswith("remember"):
        return [call("manage_memory", content=DARK, action="create"), say("Noted.")][step]
    if asked.startswith("update"):
        if step == 0:
            return call("search_memory", query="dark mode")
        if step == 1:
            return call("manage_memory", content=LIGHT, action="update", id=found_key(request, DARK))
        return say("Updated.")
    if asked.startswith("forget"):
        if step == 0:
            return call("search_memory", query="light mode")
        if step == 1:
            return call("manage_memory", action="delete", id=found_key(request, LIGHT))
        return say("Forgotten.")
    raise AssertionError(f"unscripted request: {asked!r}")


def agent_graph(store: MembraneStore, scripted: ScriptedModel) -> Any:
    """A StateGraph agent: the model node, LangMem's tools, and back until it answers."""
    tools = [create_manage_memory_tool(namespace=NAMESPACE), create_search_memory_tool(namespace=NAMESPACE)]
    chat = ChatOpenAI(
        model="scripted", base_url=scripted.base_url, api_key="unused", max_retries=0
    ).bind_tools(tools)

    def agent(state: MessagesState) -> dict[str, Any]:
        return {"messages": [chat.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("agent", agent)
    graph.add_node("tools", ToolNode(tools))
    graph.add_edge(START, "agent")
    graph.add_conditional_edges("agent", tools_condition)
    graph.add_edge("tools", "agent")
    return graph.compile(store=store)


def ask(app: Any, text: str) -> str:
    config = {"configurable": {"langgraph_user_id": "alice"}}
    state = app.invoke({"messages": [{"role": "user", "content": text}]}, config)
    return str(state["messages"][-1].content)


def test_a_langmem_agent_creates_updates_and_deletes_memories(
    store: MembraneStore, url: str, scripted_model: Callable[[dict[int, Step]], ScriptedModel]
) -> None:
    scripted = scripted_model({1: script})
    app = agent_graph(store, scripted)

    assert ask(app, "remember: I like dark mode") == "Noted."
    (created,) = store.search(ALICE)
    assert created.value == {"content": DARK}
    uuid.UUID(created.key)  # LangMem's own key

    assert ask(app, "update: I switched to light mode") == "Updated."
    assert [i.value for i in store.search(ALICE)] == [{"content": LIGHT}]
    dark_hits = store.search(ALICE, query="dark mode")
    assert all(i.value != {"content": DARK} for i in dark_hits)  # the old value is not current
    assert [i.value for i in store.search(ALICE, query="light mode")] == [{"content": LIGHT}]  # control

    with Client(url) as sdk:
        versions = sdk.list_records(scope="memories.alice", status=["active", "retracted"]).records
        old = next(r for r in versions if r.metadata["langgraph"]["value"] == {"content": DARK})
        new = next(r for r in versions if r.metadata["langgraph"]["value"] == {"content": LIGHT})
        assert (old.status, new.status) == ("retracted", "active")
        history = MemoryTools(sdk).memory_history(old.id)
        rationale = f"langgraph store put of key {created.key!r} in namespace {ALICE!r}"
        assert f'"{rationale}"' in history and " revise by " in history, history
        assert sdk.lineage(new.id).edges[0].target_id == old.id

        assert ask(app, "forget: the display preference") == "Forgotten."
        assert store.search(ALICE) == []
        assert store.get(ALICE, created.key) is None
        trail = MemoryTools(sdk).memory_history(new.id)
        assert f'"langgraph store delete of key {created.key!r} in namespace {ALICE!r}"' in trail, trail

    assert not scripted.errors
    # the model saw the memory through search_memory before it changed it
    update_requests = [r for r in scripted.requests if user_text(r).startswith("update")]
    assert DARK in tool_result(update_requests[1])


def test_the_search_tool_returns_items_as_langmem_shows_them(store: MembraneStore) -> None:
    k1, k2 = str(uuid.uuid4()), str(uuid.uuid4())
    store.put(ALICE, k1, {"content": "Alice works on the billing service"})
    store.put(ALICE, k2, {"content": "Alice drinks tea"})
    search = create_search_memory_tool(namespace=ALICE, store=store, response_format="content_and_artifact")
    message = search.invoke(
        {"name": "search_memory", "args": {"query": "billing"}, "id": "c1", "type": "tool_call"}
    )
    assert [i.key for i in message.artifact] == [k1] and all(
        isinstance(i, SearchItem) for i in message.artifact
    )
    assert "billing" in message.content and "tea" not in message.content
    manage = create_manage_memory_tool(namespace=ALICE, store=store)
    assert (
        manage.invoke({"content": "Alice drinks coffee", "action": "update", "id": k2})
        == f"updated memory {k2}"
    )
    got = store.get(ALICE, k2)
    assert got is not None and got.value == {"content": "Alice drinks coffee"}
