"""Deciding proposed memories on the console's review page (RFC 5.7, 10.8).

A key with ``"review": "required"`` (:data:`AGENT_KEY`) writes proposals; a reviewer key
decides them on ``/console/review``, from the keyboard or the forms, each decision confirmed
on a page of its own. The last test takes a model's ``remember`` through the MCP server (a
subprocess over stdio, with the agent's key) to its approval on the page and back to ``recall``.
"""

from __future__ import annotations

import re
import sys
import threading
from pathlib import Path
from typing import Any

import anyio
from mcp import Client, StdioServerParameters
from mcp.client.stdio import stdio_client
from mcp_types import CallToolResult, TextContent
from playwright.sync_api import Page, expect

from tests.console.conftest import (
    AGENT_KEY,
    FULL_KEY,
    REVIEWER_KEY,
    SELF_KEY,
    Console,
    event,
    fact,
    shot,
)

SCRIPT = "<script>window.__pwned = 'script'; alert('script')</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'; alert('img')\">"


def _status(console: Console, record_id: str) -> str:
    resp = console.api.get(f"/v1/records/{record_id}")
    assert resp.status_code == 200, resp.text
    return str(resp.json()["status"])


def _queue(console: Console, reviewer: str) -> Page:
    """A page of ``reviewer`` signed in and on the review page, reached from the nav."""
    page = console.page()
    console.sign_in(page, reviewer)
    page.locator("#nav-review").click()
    expect(page.get_by_role("heading", name="Review", exact=True)).to_be_visible()
    return page


def _entry(page: Page, title: str) -> Any:
    return page.locator("article.proposal", has=page.get_by_role("heading", name=title, exact=True))


def test_a_reviewer_approves_a_proposal_from_the_keyboard(console: Console) -> None:
    older = console.capture(event("deploy note from the agent"), key=AGENT_KEY)
    episode, fact_id = console.capture(fact("acme-api", "runs_on", "Python 3.13"), key=AGENT_KEY)
    assert _status(console, fact_id) == "proposed" and _status(console, episode) == "proposed"

    # RFC 10.8: a record page shows the proposed status, and offers no correction
    page = _queue(console, REVIEWER_KEY)
    page.goto(f"/console/records/{fact_id}")
    expect(page.locator("#record-status")).to_have_text("proposed")
    expect(page.locator("#read-only-reason")).to_contain_text("This record is proposed")
    assert page.locator("#correct form").count() == 0
    shot(page, "record-proposed")

    page.goto("/console/review")
    entries = page.locator("article.proposal")
    expect(entries).to_have_count(2)
    entry = _entry(page, "acme-api runs_on Python 3.13")
    expect(entry.locator(".proposed-by")).to_have_text("agent")
    expect(entry.locator(".corroborations")).to_have_text("0")
    expect(entry).to_contain_text("capture")
    expect(entry).to_contain_text("Expires")
    expect(entry.locator("dl.triple").first).to_contain_text("Python 3.13")
    # its records (the observation and its fact), and the observation again as the fact's source
    records = entry.locator("ul.proposal-records").first
    expect(records.locator("li")).to_have_count(2)
    expect(records).to_contain_text("episodic")
    expect(records).to_contain_text("semantic")
    expect(entry.locator("ul.proposal-records").nth(1).locator("li")).to_have_count(1)
    shot(page, "review-queue")

    # oldest first: "j" selects the event's proposal, a second "j" the fact's, "k" goes back up
    page.keyboard.press("j")
    expect(entries.nth(0)).to_have_attribute("aria-current", "true")
    page.keyboard.press("j")
    expect(entry).to_have_attribute("aria-current", "true")
    expect(entries.nth(0)).not_to_have_attribute("aria-current", "true")
    page.keyboard.press("k")
    page.keyboard.press("j")
    expect(entry).to_have_class(re.compile(r"\bselected\b"))
    page.keyboard.press("a")
    rationale = entry.locator("form[action$='/approve']").get_by_label("Rationale (optional)")
    expect(rationale).to_be_focused()
    # keys typed into a field are text, not shortcuts
    page.keyboard.type("the lockfile says 3.13; jk")
    expect(entry).to_have_attribute("aria-current", "true")
    expect(rationale).to_have_value("the lockfile says 3.13; jk")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Confirm approve")).to_be_visible()
    expect(page.locator("#decision-body")).to_contain_text('"decision": "approve"')
    expect(page.locator("#decision-records")).to_contain_text("acme-api runs_on Python 3.13")
    shot(page, "review-confirm")
    expect(page.get_by_role("button", name="Confirm approve")).to_be_focused()
    page.keyboard.press("Enter")
    expect(page.locator("#decision-outcome")).to_have_text("approved")
    expect(page.locator("#decided-records")).to_contain_text("active")
    shot(page, "review-approved")

    assert _status(console, fact_id) == "active" and _status(console, episode) == "active"
    page.goto(f"/console/records/{fact_id}")
    expect(page.locator("#record-status")).to_have_text("active")
    expect(page.locator("#audit")).to_contain_text("the lockfile says 3.13")
    # positive control: the other proposal is still pending, and still in the queue
    assert _status(console, older[0]) == "proposed"
    page.goto("/console/review")
    expect(page.locator("article.proposal")).to_have_count(1)
    assert not [m for m in console.console_messages if m.startswith("pageerror")], console.console_messages


def test_reject_and_amend_from_the_page(console: Console) -> None:
    (note,) = console.capture(event("the staging cluster was wiped"), key=AGENT_KEY)
    _, active = console.capture(fact("acme-api", "runs_on", "Python 3.11"))
    _, wrong = console.capture(fact("acme-api", "runs_on", "Python 2.7"), key=AGENT_KEY)
    page = _queue(console, REVIEWER_KEY)

    # an event's proposal has nothing to amend; a fact's shows the active fact it conflicts with
    rejecting = _entry(page, "the staging cluster was wiped")
    expect(rejecting.locator("pre.episode")).to_have_text("the staging cluster was wiped")
    assert rejecting.locator("details[data-decision='amend']").count() == 0
    amending = _entry(page, "acme-api runs_on Python 2.7")
    expect(amending.locator("ul.conflicts")).to_contain_text("Python 3.11")
    expect(
        amending.get_by_role("radio", name="replace them with this one", include_hidden=True)
    ).to_have_count(1)

    rejecting.locator("summary", has_text="Reject").click()
    rejecting.locator("form[action$='/reject']").get_by_label("Rationale (optional)").fill("no such wipe")
    rejecting.get_by_role("button", name="Review reject").click()
    expect(page.get_by_role("heading", name="Confirm reject")).to_be_visible()
    page.get_by_role("button", name="Confirm reject").click()
    expect(page.locator("#decision-outcome")).to_have_text("rejected")
    assert _status(console, note) == "retracted"

    # amend from the keyboard: "e" opens the form with the focus on the subject
    page.goto("/console/review")
    amending = _entry(page, "acme-api runs_on Python 2.7")
    amending.focus()
    page.keyboard.press("e")
    expect(amending.get_by_label("Subject")).to_be_focused()
    amending.get_by_label("Object").fill("Python 3.12")
    amending.get_by_role("button", name="Review amend").click()
    expect(page.locator("#decision-body")).to_contain_text('"object": "Python 3.12"')
    page.get_by_role("button", name="Confirm amend").click()
    expect(page.locator("#decision-outcome")).to_have_text("amended")
    decided = page.locator("#decided-records")
    expect(decided.get_by_role("link", name="acme-api runs_on Python 3.12")).to_be_visible()
    shot(page, "review-amended")
    assert _status(console, wrong) == "retracted"
    assert _status(console, active) == "active"  # amend replaces the proposed fact, not the active one
    page.goto("/console/review")
    expect(page.locator("#queue-empty")).to_be_visible()


def test_a_key_that_is_not_a_reviewer_gets_no_link_and_a_403(console: Console) -> None:
    console.capture(fact("acme-api", "runs_on", "Python 3.13"), key=AGENT_KEY)
    page = console.page()
    console.sign_in(page, FULL_KEY)  # an operator, yet no reviewer
    expect(page.get_by_role("link", name="Pipeline")).to_be_visible()
    expect(page.locator("#nav-review")).to_have_count(0)
    resp = page.goto("/console/review")
    assert resp is not None and resp.status == 403
    expect(page.get_by_role("alert")).to_contain_text("the review queue is for reviewer keys")
    shot(page, "review-forbidden")
    # a decision posted by hand is refused as well
    page.goto("/console/records")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    resp_post = page.request.post(
        "/console/review/00000000-0000-4000-8000-000000000000/reject",
        form={"csrf": csrf or "", "step": "confirm"},
        headers={"Origin": console.url},
    )
    assert resp_post.status == 403
    # positive control: a reviewer's nav has the link
    reviewer = _queue(console, REVIEWER_KEY)
    expect(reviewer.locator("article.proposal")).to_have_count(1)


def test_a_proposals_author_has_nothing_to_decide(console: Console) -> None:
    _, theirs = console.capture(fact("acme-api", "runs_on", "Python 3.13"), key=AGENT_KEY)
    console.capture(fact("acme-api", "runs_on", "Python 3.13"), key=SELF_KEY)  # corroborates it
    _, own = console.capture(fact("acme-api", "runs_on", "Python 3.14"), key=SELF_KEY)
    assert _status(console, own) == "proposed" and _status(console, theirs) == "proposed"
    page = _queue(console, SELF_KEY)  # a reviewer too: the link is there
    expect(page.locator("#queue-empty")).to_be_visible()
    expect(page.locator("article.proposal")).to_have_count(0)
    shot(page, "review-own")

    # positive control: another reviewer sees both, with who proposed and corroborated them
    reviewer = _queue(console, REVIEWER_KEY)
    expect(reviewer.locator("article.proposal")).to_have_count(2)
    corroborated = _entry(reviewer, "acme-api runs_on Python 3.13")
    expect(corroborated.locator(".proposed-by")).to_have_text("agent")
    expect(corroborated.locator(".corroborations")).to_have_text("1, by self-reviewer")
    entry = _entry(reviewer, "acme-api runs_on Python 3.14")
    expect(entry.locator(".proposed-by")).to_have_text("self-reviewer")

    # a decision the author's browser posts anyway is refused by the server, and says why
    proposal = entry.get_attribute("data-proposal")
    csrf = page.locator("input[name=csrf]").first.get_attribute("value")
    page.evaluate(
        """([action, csrf]) => {
             const form = document.createElement('form');
             form.method = 'post';
             form.action = action;
             for (const [name, value] of [['csrf', csrf], ['step', 'confirm'], ['rationale', 'mine']]) {
               const input = document.createElement('input');
               input.type = 'hidden';
               input.name = name;
               input.value = value;
               form.appendChild(input);
             }
             document.body.appendChild(form);
             form.submit();
           }""",
        [f"/console/review/{proposal}/approve", csrf],
    )
    expect(page.locator("#decision-outcome")).to_have_text("refused")
    expect(page.locator("#decision-error")).to_contain_text("proposed or corroborated by the caller")
    shot(page, "review-own-refused")
    assert _status(console, own) == "proposed"


def test_a_proposals_script_shows_as_text(console: Console) -> None:
    console.capture(event(f"scraped page: {SCRIPT} and {IMG}"), key=AGENT_KEY)
    console.capture(fact("acme-api", "says", SCRIPT), key=AGENT_KEY)
    page = console.page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    console.sign_in(page, REVIEWER_KEY)
    page.goto("/console/review")
    expect(page.locator("article.proposal")).to_have_count(2)
    expect(page.locator("pre.episode").first).to_contain_text(SCRIPT)
    expect(_entry(page, f"acme-api says {SCRIPT}").locator("dl.triple").first).to_contain_text(SCRIPT)
    expect(page.get_by_label("Object").first).to_have_value(SCRIPT)
    shot(page, "review-untrusted")
    assert page.locator("script").count() == 2  # the console's own
    assert page.locator("main img").count() == 0
    assert page.evaluate("() => window.__pwned === undefined")
    assert dialogs == []


# -- a model's memory through MCP, decided on the page ------------------------------------


async def _tool(client: Client, tool: str, **arguments: Any) -> str:
    result: CallToolResult = await client.call_tool(tool, arguments)
    text = "\n".join(block.text for block in result.content if isinstance(block, TextContent))
    assert not result.is_error, f"{tool}: {text}"
    return text


def test_a_models_memory_is_recalled_only_after_a_reviewer_approves_it(
    console: Console, tmp_path: Path
) -> None:
    """RFC 5.7: with review on, ``remember`` through MCP proposes; ``recall`` leaves the fact out
    until a reviewer approves it on the review page, then finds it."""
    console.capture(fact("acme-api", "owned_by", "platform-team"))  # a trusted memory
    params = StdioServerParameters(
        command=sys.executable,
        args=["-m", "membrane_client.mcp_server", "--url", console.url, "--scope", "team-a"],
        cwd=str(tmp_path),
        env={"MEMBRANE_API_KEY": AGENT_KEY},
    )
    said: dict[str, str] = {}
    remembered, approved = threading.Event(), threading.Event()
    failed: list[BaseException] = []
    query = {"query": "acme-api", "scopes": ["team-a"]}

    async def model() -> None:
        with (tmp_path / "mcp.stderr").open("w") as err, anyio.fail_after(150):
            async with Client(stdio_client(params, errlog=err), read_timeout_seconds=30) as client:
                names = {t.name for t in (await client.list_tools()).tools}
                assert {"remember", "recall"} <= names
                said["remember"] = await _tool(
                    client,
                    "remember",
                    kind="fact",
                    subject="acme-api",
                    predicate="runs_on",
                    object="Python 3.13",
                )
                said["before"] = await _tool(client, "recall", **query)
                remembered.set()
                assert await anyio.to_thread.run_sync(approved.wait, 120), "no approval came"
                said["after"] = await _tool(client, "recall", **query)

    def run() -> None:
        try:
            anyio.run(model)
        except BaseException as exc:  # re-raised on the test's thread
            failed.append(exc)
        finally:
            remembered.set()

    thread = threading.Thread(target=run, name="mcp-model")
    thread.start()
    try:
        assert remembered.wait(90)
        assert not failed, failed
        fact_id = re.search(r"Remembered fact \[([0-9a-f-]{36})\]", said["remember"])
        assert fact_id, said["remember"]
        assert "proposed: a reviewer will decide" in said["remember"]
        assert "PROPOSED" in said["remember"]
        # positive control: the same recall finds the trusted memory; the proposal stays out
        assert "platform-team" in said["before"], said["before"]
        assert fact_id.group(1) not in said["before"] and "Python 3.13" not in said["before"]

        page = _queue(console, REVIEWER_KEY)
        entry = _entry(page, "acme-api runs_on Python 3.13")
        expect(entry.locator(".proposed-by")).to_have_text("agent")
        page.keyboard.press("j")
        expect(entry).to_have_attribute("aria-current", "true")
        page.keyboard.press("a")
        page.keyboard.press("Enter")
        expect(page.get_by_role("heading", name="Confirm approve")).to_be_visible()
        # the page focuses its button once loaded; Enter before that submits nothing
        expect(page.get_by_role("button", name="Confirm approve")).to_be_focused()
        page.keyboard.press("Enter")
        expect(page.locator("#decision-outcome")).to_have_text("approved")
        shot(page, "review-mcp-approved")
    finally:
        approved.set()
        thread.join(60)
    assert not failed, failed
    assert f"[{fact_id.group(1)}] (semantic, active" in said["after"], said["after"]
    assert "acme-api runs_on Python 3.13" in said["after"]
