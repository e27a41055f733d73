"""The MCP server (``membrane_client.mcp_server``) driven by the ``mcp`` package's own client.

The server runs as a subprocess over stdio, as an MCP host would start it, against the live
API on a real Postgres (``serve``: uvicorn in a thread, writes processed in-process).
"""

from __future__ import annotations

import re
import sys
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult, TextContent
from membrane_client.mcp_server import CORRECTION_TOOLS, READ_TOOLS, bounded

from tests.support.api import ServeFn

ALL_TOOLS = {"remember", "recall", "get_memory", "memory_history", *CORRECTION_TOOLS}
ID = r"\[([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})\]"
RATIONALE = "pyproject.toml was bumped to requires-python 3.13 in the release branch"

Scenario = Callable[[Client], Awaitable[None]]


def _url(serve: ServeFn, **kwargs: Any) -> str:
    """A live API (``serve(**kwargs)``) and its base URL."""
    return str(serve(**kwargs).base_url).rstrip("/")


def _run(
    url: str, tmp_path: Path, scenario: Scenario, *flags: str, env: dict[str, str] | None = None
) -> None:
    """Start ``membrane-mcp --url URL *flags`` over stdio and run ``scenario`` on a client of it."""
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "membrane_client.mcp_server", "--url", url, *flags],
        cwd=str(tmp_path),
        env=env,
    )
    errlog = tmp_path / f"mcp-server{'-'.join(('', *flags))}.stderr"

    async def main() -> None:
        with errlog.open("w", encoding="utf-8") as err, anyio.fail_after(45):
            async with Client(stdio_client(params, errlog=err), read_timeout_seconds=30) as client:
                await scenario(client)

    try:
        anyio.run(main)
    except BaseException:
        print(f"--- server stderr\n{errlog.read_text(encoding='utf-8') if errlog.exists() else ''}")
        raise


async def _call(client: Client, tool: str, *, error: bool = False, **arguments: Any) -> str:
    """The text of one tool call, asserting whether it was an error result."""
    result: CallToolResult = await client.call_tool(tool, arguments)
    text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
    assert result.is_error is error, f"{tool} -> is_error={result.is_error}: {text}"
    return text


def _id(pattern: str, text: str) -> str:
    found = re.search(pattern, text)
    assert found, f"no match for {pattern!r} in {text!r}"
    return found.group(1)


def test_remember_recall_supersede_over_stdio(serve: ServeFn, tmp_path: Path) -> None:
    async def scenario(client: Client) -> None:
        listed = await client.list_tools()
        assert {tool.name for tool in listed.tools} == ALL_TOOLS
        schemas = {tool.name: tool.input_schema for tool in listed.tools}
        assert set(schemas["supersede_memory"]["required"]) == {"record_id", "rationale", "evidence"}
        assert "scope" in schemas["remember"]["required"]  # no --scope default was given

        said = await _call(
            client,
            "remember",
            kind="fact",
            scope="acme",
            subject="acme-api",
            predicate="runs_on",
            object="Python 3.12",
        )
        old = _id(r"Remembered fact " + ID, said)
        first = await _call(client, "recall", query="acme-api runs_on Python", scopes=["acme"])
        # positive control for the absence below: before the correction the old value is recalled
        assert f"[{old}] (semantic, active" in first and "acme-api runs_on Python 3.12" in first

        fixed = await _call(
            client,
            "supersede_memory",
            record_id=old,
            object="Python 3.13",
            rationale=RATIONALE,
            evidence=["pyproject.toml:3"],
        )
        new = _id(r"with " + ID, fixed)
        assert new != old and "acme-api runs_on Python 3.13" in fixed

        after = await _call(client, "recall", query="acme-api runs_on Python", scopes=["acme"], expand=True)
        assert f"[{new}] (semantic, active" in after and "Python 3.13" in after
        assert "Python 3.12" not in after and old not in after
        # the raw observation is immutable history: shown only when asked for, as an observation
        raw = await _call(
            client, "recall", query="acme-api runs_on Python", scopes=["acme"], include_observations=True
        )
        assert "(episodic, active" in raw and "observation: acme-api runs_on Python 3.12" in raw

        shown = await _call(client, "get_memory", record_id=old)
        assert f"[{old}] (semantic, SUPERSEDED by [{new}]" in shown and "Python 3.12" in shown

        history = await _call(client, "memory_history", record_id=old)
        assert RATIONALE in history and "hash chain valid" in history
        assert re.search(r"revise by \S+: \"" + re.escape(RATIONALE), history)

        # a refusal is an error result the model can read, naming the current version; the
        # server stays up for the next call
        refused = await _call(
            client,
            "supersede_memory",
            error=True,
            record_id=old,
            object="Python 3.14",
            rationale="try again",
            evidence=["ci log"],
        )
        assert "revision_refused" in refused and new in refused
        missing = await _call(
            client,
            "retract_memory",
            error=True,
            record_id="00000000-0000-4000-8000-000000000000",
            rationale="gone",
        )
        assert "not_found" in missing
        assert "Python 3.13" in await _call(client, "get_memory", record_id=new)

        assert f"Reinforced [{new}]" in await _call(
            client, "reinforce_memory", record_id=new, rationale="the build used it", evidence=["ci run 41"]
        )
        await _call(client, "contest_memory", record_id=new, rationale="a teammate reports 3.12 in prod")
        flagged = await _call(client, "recall", query="acme-api runs_on Python", scopes=["acme"])
        assert f"[{new}] (semantic, CONTESTED" in flagged and "CONTESTED memories are disputed" in flagged
        trail = await _call(client, "memory_history", record_id=new)
        assert "the build used it (evidence: ci run 41)" in trail and "a teammate reports" in trail

    _run(_url(serve), tmp_path, scenario)


def test_flags_narrow_the_advertised_tools(serve: ServeFn, tmp_path: Path) -> None:
    async def read_only(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert names == set(READ_TOOLS)
        # what is not advertised cannot be called either
        assert "remember" in await _call(client, "remember", error=True, kind="event", scope="s", text="x")
        # positive control: the read tools answer from the live API
        assert "No memories match" in await _call(client, "recall", query="anything", scopes=["s"])

    async def no_revision(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        assert "remember" in names and names == {"remember", *READ_TOOLS}
        assert not names & set(CORRECTION_TOOLS)
        said = await _call(client, "remember", kind="event", text="deployed acme-api to staging")
        assert re.search(r"Remembered event " + ID + " in scope team", said)

    url = _url(serve)
    _run(url, tmp_path, read_only, "--read-only")
    _run(url, tmp_path, no_revision, "--no-revision", "--scope", "team")


def test_the_key_decides_what_the_model_may_change(serve: ServeFn, tmp_path: Path) -> None:
    """All tools are listed, yet a key that may only read gets every write refused by the API."""
    reader = {"read_scopes": ["*"], "write_scopes": [], "max_sensitivity": "hyper"}

    async def scenario(client: Client) -> None:
        assert {tool.name for tool in (await client.list_tools()).tools} == ALL_TOOLS
        refused = await _call(client, "remember", error=True, kind="event", scope="acme", text="deployed")
        assert "forbidden" in refused
        # positive control: the same key reads (the key came from MEMBRANE_API_KEY)
        assert "No memories match" in await _call(client, "recall", query="deployed", scopes=["acme"])

    _run(_url(serve, keys={"reader-key": reader}), tmp_path, scenario, env={"MEMBRANE_API_KEY": "reader-key"})


def test_answers_are_byte_bounded_and_say_so() -> None:
    lines = [f"[{i}] (semantic, active) ü" * 6 for i in range(100)]
    text = bounded(lines, 600, "lower limit")
    assert len(text.encode()) <= 600 and "truncated at 600 bytes" in text and "lower limit" in text
    assert text.splitlines()[0] == lines[0]
    # positive control: what fits is returned whole, without a note
    assert bounded(lines[:2], 600) == "\n".join(lines[:2])
    # a single line over the budget is cut, not dropped
    assert bounded(["x" * 5000], 600).startswith("x" * 100)


def test_a_reviewed_keys_memory_is_proposed_and_no_tool_decides(serve: ServeFn, tmp_path: Path) -> None:
    """RFC 5.7: under a key whose writes are reviewed, ``remember`` says its memory waits for a
    reviewer and ``recall`` leaves it out; the server offers the model no way to decide it."""
    agent = {"read_scopes": ["acme"], "write_scopes": ["acme"], "review": "required", "actor": "agent"}
    writer = {"read_scopes": ["*"], "write_scopes": ["*"], "actor": "writer"}
    http = serve(
        keys={"agent-key": agent, "writer-key": writer}, headers={"Authorization": "Bearer writer-key"}
    )
    trusted = http.post(
        "/v1/captures",
        params={"wait": 10},
        json={
            "source_kind": "observation",
            "scope": "acme",
            "content": {"subject": "acme-api", "predicate": "owned_by", "object": "platform-team"},
        },
    )
    assert trusted.status_code == 200 and trusted.json()["status"] == "succeeded", trusted.text

    async def scenario(client: Client) -> None:
        names = {tool.name for tool in (await client.list_tools()).tools}
        # positive control: the listing is the real one
        assert {"remember", "recall"} <= names and names == ALL_TOOLS
        deciding = [n for n in names if re.search(r"review|decide|approve|reject|amend|propos", n)]
        assert deciding == []

        said = await _call(
            client,
            "remember",
            kind="fact",
            scope="acme",
            subject="acme-api",
            predicate="runs_on",
            object="Python 3.13",
        )
        fact = _id(r"Remembered fact " + ID, said)
        assert f"[{fact}] (semantic, PROPOSED" in said and "proposed: a reviewer will decide" in said
        event = await _call(
            client, "remember", kind="event", scope="acme", text="acme-api deployed to staging"
        )
        assert "Remembered event" in event and "proposed: a reviewer will decide" in event
        found = await _call(client, "recall", query="acme-api", scopes=["acme"])
        assert "platform-team" in found  # positive control: a trusted memory is recalled
        assert fact not in found and "Python 3.13" not in found and "staging" not in found

    async def trusted_writer(client: Client) -> None:
        said = await _call(client, "remember", kind="event", scope="acme", text="acme-api deployed to prod")
        assert "Remembered event" in said and "proposed" not in said  # positive control

    url = str(http.base_url).rstrip("/")
    _run(url, tmp_path, scenario, env={"MEMBRANE_API_KEY": "agent-key"})
    _run(url, tmp_path, trusted_writer, env={"MEMBRANE_API_KEY": "writer-key"})
