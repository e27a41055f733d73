"""Keyboard navigation and labelled controls, checked with axe-core (RFC 10.8).

axe-core (``tests/support/vendor/axe-core``) is injected into pages of a context that bypasses
the Content-Security-Policy, for this check only: the console itself runs no inline script.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from playwright.sync_api import Page, expect

from tests.console.conftest import AGENT_KEY, FULL_KEY, REVIEWER_KEY, Console, fact

AXE = Path(__file__).resolve().parents[1] / "support" / "vendor" / "axe-core" / "axe.min.js"
#: The rules axe found something to check on, over the pages of a test.
CHECKED: set[str] = set()


def violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's violations of WCAG 2 A and AA on the page as it is now."""
    page.add_script_tag(content=AXE.read_text())
    found: dict[str, Any] = page.evaluate(
        """async () => {
             const r = await axe.run(document, {runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa']}});
             return {passes: r.passes.map(p => p.id).concat(r.incomplete.map(p => 'incomplete:' + p.id)),
                     violations: r.violations.map(v => ({id: v.id, help: v.help,
                                                         nodes: v.nodes.map(n => n.target.join(' '))}))};
           }"""
    )
    # axe ran its rules: the contrast, the title and the language were checked, not skipped
    assert {"color-contrast", "document-title", "html-has-lang"} <= set(found["passes"]), found["passes"]
    CHECKED.update(found["passes"])
    violations: list[dict[str, Any]] = found["violations"]
    return violations


def test_every_page_has_labelled_controls_and_no_axe_violation(console: Console) -> None:
    _, rid = console.capture(fact("acme-api", "runs_on", "Python 3.11"))
    page = console.page(bypass_csp=True)
    page.goto("/console/signin")
    assert violations(page) == []
    console.sign_in(page, FULL_KEY)
    for path in ("/console/records", f"/console/records/{rid}", "/console/pipeline"):
        page.goto(path)
        assert violations(page) == [], path
    page.goto(f"/console/records/{rid}")
    page.get_by_text("Retract", exact=True).click()
    form = page.locator("form[action$='/retract']")
    form.get_by_label("Rationale (required)").fill("wrong")
    form.get_by_role("button", name="Review retract").click()
    expect(page.get_by_role("heading", name="Confirm retract")).to_be_visible()
    assert violations(page) == []
    assert {"label", "button-name", "link-name", "select-name", "bypass"} <= CHECKED


def test_the_review_pages_have_labelled_controls_and_no_axe_violation(console: Console) -> None:
    """RFC 5.7, 10.8: the queue (with a conflict's replace-or-keep choice), the confirmation and
    the outcome."""
    console.capture(fact("acme-api", "runs_on", "Python 3.11"))
    console.capture(fact("acme-api", "runs_on", "Python 2.7"), key=AGENT_KEY)
    page = console.page(bypass_csp=True)
    console.sign_in(page, REVIEWER_KEY)
    page.goto("/console/review")
    for decision in page.locator("details.decision").all():
        decision.evaluate("d => { d.open = true; }")  # every form's controls, not only summaries
    expect(page.get_by_role("radio", name="replace them with this one")).to_be_visible()
    assert violations(page) == []
    page.goto("/console/review")
    page.get_by_text("Approve", exact=True).click()
    page.get_by_role("radio", name="keep them beside it").check()
    page.get_by_role("button", name="Review approve").click()
    expect(page.get_by_role("heading", name="Confirm approve")).to_be_visible()
    assert violations(page) == []
    page.get_by_role("button", name="Confirm approve").click()
    expect(page.locator("#decision-outcome")).to_have_text("approved")
    assert violations(page) == []
    assert {"label", "button-name", "link-name", "select-name"} <= CHECKED


def test_the_console_works_from_the_keyboard(console: Console) -> None:
    _, rid = console.capture(fact("acme-api", "runs_on", "Python 3.11"))
    page = console.page()
    console.sign_in(page, FULL_KEY)

    # the first Tab reaches the skip link, which moves the focus into the page's content
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.textContent") == "Skip to content"
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "q"
    page.keyboard.type("acme-api")
    page.keyboard.press("Enter")
    # the page already lists the record: wait for the search's results to replace the list
    # (htmx pushes the URL after the swap), or the link focused below may be swapped away
    page.wait_for_url(re.compile(r"[?&]q=acme-api"))
    link = page.locator("#results a", has_text="Python 3.11").first
    expect(link).to_be_visible()
    link.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_contain_text("acme-api runs_on")

    # "/" jumps to the search from anywhere on the memories page
    page.goto("/console/records")
    page.keyboard.press("/")
    assert page.evaluate("() => document.activeElement.id") == "q"

    # a correction opens, fills and submits without a mouse
    page.goto(f"/console/records/{rid}")
    page.locator("#correct summary", has_text="Contest").focus()
    page.keyboard.press("Enter")
    page.keyboard.press("Tab")  # the optional contesting record
    page.keyboard.press("Tab")  # the rationale
    page.keyboard.type("two sources disagree")
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", name="Confirm contest")).to_be_visible()
    page.get_by_role("button", name="Confirm contest").focus()
    page.keyboard.press("Enter")
    expect(page.locator("#operation-status")).to_have_text("succeeded")
