"""Finding, reading and correcting memories from the console (RFC 5, 7.3, 10.8)."""

from __future__ import annotations

import re
import time
from datetime import UTC, datetime

from playwright.sync_api import expect

from tests.console.conftest import FULL_KEY, LOW_KEY, Console, event, fact, shot


def _utc_input(moment: datetime) -> str:
    """A time as the as-of control takes it (UTC, milliseconds)."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3]


def test_find_supersede_and_see_the_chain_the_audit_and_the_past(console: Console) -> None:
    _, old_id = console.capture(fact("acme-api", "runs_on", "Python 3.11"))[:2]
    time.sleep(0.2)
    before = datetime.now(UTC)
    time.sleep(0.2)
    page = console.page()
    console.sign_in(page, FULL_KEY)

    page.get_by_label("Search").fill("acme-api runs_on")
    page.get_by_role("checkbox", name="semantic").check()
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"q=acme-api"))  # htmx swapped the results in
    results = page.locator("#results")
    expect(results.get_by_role("link", name="acme-api runs_on Python 3.11")).to_be_visible()
    shot(page, "records-search")
    results.get_by_role("link", name="acme-api runs_on Python 3.11").click()
    expect(page.locator("#record-status")).to_have_text("active")

    page.get_by_text("Supersede", exact=True).click()
    page.get_by_label("Object").fill("Python 3.12")
    page.get_by_label("Evidence reference (optional)").fill("ci-log-42")
    form = page.locator("form[action$='/supersede']")
    form.get_by_label("Rationale (required)").fill("the runtime was upgraded")
    form.get_by_role("button", name="Review supersede").click()
    expect(page.get_by_role("heading", name="Confirm supersede")).to_be_visible()
    expect(page.locator("#operation-body")).to_contain_text('"object": "Python 3.12"')
    shot(page, "correct-confirm")
    page.get_by_role("button", name="Confirm supersede").click()
    expect(page.locator("#operation-status")).to_have_text("succeeded")
    shot(page, "correct-operation")

    page.locator("#result-record").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("acme-api runs_on Python 3.12")
    chain = page.locator("#chain")
    expect(chain.get_by_role("link", name="acme-api runs_on Python 3.11")).to_be_visible()
    expect(chain).to_contain_text("the runtime was upgraded")
    expect(page.locator("#chain-valid")).to_have_text("valid")
    shot(page, "record")
    new_url = page.url

    page.goto(f"/console/records/{old_id}")
    expect(page.locator("#record-status")).to_have_text("retracted")
    audit = page.locator("#audit")
    expect(audit).to_contain_text("revise")
    expect(audit).to_contain_text("the runtime was upgraded")
    expect(audit).to_contain_text("console-admin")
    expect(page.locator("#chain-valid")).to_have_text("valid")

    # RFC 5.6: as of a moment before the supersede the old fact was believed, after it the new one
    page.get_by_label("What was believed at (UTC)").fill(_utc_input(before))
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#then-status")).to_have_text("active")
    believed = page.locator("ul.believed")
    expect(believed).to_contain_text("Python 3.11")
    expect(believed).not_to_contain_text("Python 3.12")
    shot(page, "record-as-of-before")
    time.sleep(0.05)
    page.get_by_label("What was believed at (UTC)").fill(_utc_input(datetime.now(UTC)))
    page.get_by_role("button", name="Show").click()
    expect(page.locator("#then-status")).to_have_text("retracted")
    expect(page.locator("ul.believed")).to_contain_text("Python 3.12")
    expect(page.locator("ul.believed")).not_to_contain_text("Python 3.11")

    page.goto(new_url)
    expect(page.locator("#decay")).to_contain_text("30 d")  # the semantic half-life (RFC 3.2)
    expect(page.locator("#prune-at")).to_contain_text("never")
    assert not console.console_messages, console.console_messages


def test_a_low_key_sees_a_medium_record_redacted_and_another_scope_not_at_all(console: Console) -> None:
    (medium,) = console.capture(event("payroll export for team-a", sensitivity="medium"))
    (other,) = console.capture(event("team-b roadmap", scope="team-b"))

    low = console.page()
    console.sign_in(low, LOW_KEY)
    rows = low.locator("table.records tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("redacted")
    expect(low.locator("#results")).not_to_contain_text("payroll")
    expect(low.locator("#results")).not_to_contain_text("team-b")
    shot(low, "records-low-key")
    rows.first.get_by_role("link").click()
    expect(low.locator("#redacted-note")).to_be_visible()
    expect(low.locator("main")).not_to_contain_text("payroll")
    expect(low.locator("#correct")).to_contain_text("redacted")
    assert low.goto(f"/console/records/{other}").status == 404  # hidden: the same as missing
    assert low.goto("/console/records/00000000-0000-0000-0000-000000000001").status == 404

    # the positive control: the same page with a full key shows both, in full
    full = console.page()
    console.sign_in(full, FULL_KEY)
    expect(full.locator("table.records tbody tr")).to_have_count(2)
    expect(full.locator("#results")).to_contain_text("payroll export for team-a")
    expect(full.locator("#results")).to_contain_text("team-b roadmap")
    shot(full, "records")
    assert full.goto(f"/console/records/{medium}").status == 200
    expect(full.locator("#payload")).to_contain_text("payroll export")


def test_filters_narrow_the_list(console: Console) -> None:
    console.capture(event("alpha deploy", tags=["deploy"]))
    console.capture(event("beta outage", scope="team-b"))
    page = console.page()
    console.sign_in(page, FULL_KEY)
    page.get_by_label("Scope").fill("team-b")
    page.get_by_role("button", name="Search").click()
    expect(page).to_have_url(re.compile(r"scope=team-b"))
    rows = page.locator("table.records tbody tr")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("beta outage")
    page.goto("/console/records?tag=deploy")
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("alpha deploy")
    page.goto("/console/records?type=semantic")
    expect(page.locator("#results")).to_contain_text("No memory matches.")
