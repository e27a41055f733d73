"""The pipeline page: buried work items requeued by an operator, then run (RFC 9.4, 10.7, 10.8)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.console.conftest import FULL_KEY, LOW_KEY, Console, event, shot
from tests.support.sql import row, scalar


def test_a_buried_item_is_requeued_and_then_succeeds(console: Console, database_url: str) -> None:
    (rid,) = console.capture(event("nightly backup finished"))
    # RFC 9.4: the record's decay item, buried after its last attempt, as a worker leaves it
    item = scalar(
        database_url,
        "UPDATE work_items SET dead = true, attempts = 5, last_error = 'provider timed out <b>x</b>' "
        "WHERE kind = 'decay' AND target_id = %s RETURNING id",
        rid,
    )
    failed = console.api.post(
        f"/v1/records/{rid}/retract", params={"wait": 10}, json={"rationale": "episode"}
    )
    assert failed.json()["status"] == "failed"  # RFC 5.2: an episode refuses retract

    page = console.page()
    console.sign_in(page, FULL_KEY)
    page.get_by_role("link", name="Pipeline").click()
    buried = page.locator("#buried")
    expect(buried).to_contain_text("provider timed out <b>x</b>")
    expect(page.locator("#operations")).to_contain_text("revision_refused")
    expect(page.locator("#operations")).to_contain_text(failed.json()["request_id"])
    expect(page.locator("table.jobs")).to_contain_text("decay")
    shot(page, "pipeline")

    page.get_by_label(f"Requeue item {item}").check()
    page.get_by_role("button", name="Requeue chosen items").click()
    expect(page.locator("#requeued")).to_have_text(f"Requeued 1 item(s): {item}.")
    expect(page.locator("#no-buried")).to_be_visible()
    dead, attempts = row(database_url, "SELECT dead, attempts FROM work_items WHERE id = %s", item)
    assert (dead, attempts) == (False, 0)

    run = console.api.post("/v1/maintenance/run", params={"wait": 10}, json={"jobs": ["decay"]})
    assert run.json()["status"] == "succeeded", run.text
    # the decay batch took it: the checkpoint is written and the next one is due later (RFC 6.1)
    later = scalar(
        database_url, "SELECT count(*) FROM work_items WHERE id = %s AND NOT dead AND due_at > now()", item
    )
    assert later == 1
    page.reload()
    expect(page.locator("#no-buried")).to_be_visible()
    page.goto(f"/console/records/{rid}")
    expect(page.locator("#audit")).to_contain_text("requeue")
    expect(page.locator("#audit")).to_contain_text("requeued from the console")


def test_the_work_queue_is_an_operators(console: Console) -> None:
    page = console.page()
    console.sign_in(page, LOW_KEY)
    page.goto("/console/pipeline")
    expect(page.locator("main")).to_contain_text("need an operator's key")
    expect(page.locator("#buried")).to_have_count(0)
    with console.api as api:
        resp = api.post("/console/pipeline/requeue")
    assert resp.status_code in (401, 403, 303)
