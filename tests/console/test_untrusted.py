"""Memory content is untrusted: captured HTML and script are shown as text and never run
(RFC 10.8)."""

from __future__ import annotations

from playwright.sync_api import expect

from tests.console.conftest import FULL_KEY, Console, event, shot

SCRIPT = "<script>window.__pwned = 'script'; alert('script')</script>"
IMG = "<img src=x onerror=\"window.__pwned = 'img'; alert('img')\">"


def test_captured_script_and_img_onerror_are_text_and_nothing_runs(console: Console) -> None:
    (rid,) = console.capture(
        event(
            f"scraped page: {SCRIPT} and {IMG}",
            summary=f"summary {IMG}",
            tags=["<b>bold</b>"],
            metadata={"html": SCRIPT, IMG: "key"},
        )
    )
    page = console.page()
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    console.sign_in(page, FULL_KEY)

    link = page.locator("#results a", has_text="scraped page")
    expect(link).to_contain_text(SCRIPT)  # the text itself, shown as text
    link.click()
    expect(page.locator("#payload")).to_contain_text(SCRIPT)
    expect(page.locator("#payload")).to_contain_text("<img src=x onerror=")  # JSON escapes its quotes
    expect(page.locator("main")).to_contain_text("<b>bold</b>")
    shot(page, "untrusted")
    # no element came out of the content: only the console's own two scripts, no image
    assert page.locator("script").count() == 2
    assert page.locator("main img").count() == 0 and page.locator("main b").count() == 0
    assert page.evaluate("() => window.__pwned === undefined")
    page.goto(f"/console/records/{rid}")
    assert page.evaluate("() => window.__pwned === undefined")
    assert dialogs == []
    assert not [m for m in console.console_messages if "Content Security Policy" in m], (
        console.console_messages
    )


def test_the_csp_blocks_inline_script_even_if_markup_got_through(console: Console) -> None:
    """The second wall: a page of the console's origin runs no inline script."""
    page = console.page()
    console.sign_in(page, FULL_KEY)
    page.evaluate(
        """() => { const s = document.createElement('div');
                   s.innerHTML = '<img src=x onerror="window.__pwned = 1">';
                   document.body.appendChild(s); }"""
    )
    page.wait_for_timeout(300)
    assert page.evaluate("() => window.__pwned === undefined")
    assert any("Content Security Policy" in m for m in console.console_messages), console.console_messages
