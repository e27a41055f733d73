"""The console's browser tests: headless Chromium from the system packages, driven by Playwright,
against a live API (RFC 10.8).

One browser per session and a new context (cookies, storage) per test. Playwright is told to
use ``/usr/bin/chromium``: nothing here downloads a browser (never ``playwright install``).
Screenshots go to ``MEMBRANE_TEST_ARTIFACTS`` (default ``.artifacts/console/``).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from playwright.sync_api import Browser, BrowserContext, Page, Playwright, expect, sync_playwright

from tests.support.api import ServeFn
from tests.support.processes import ROOT

CHROMIUM = "/usr/bin/chromium"
#: RFC 10.3, 5.7: the keys of the signed-in tests: an operator who reads and writes everything up
#: to high, and a reader of one scope up to low; a reviewer of every scope up to high, an agent
#: whose captures are proposed, and a key that is both (it never decides its own proposals).
FULL_KEY = "console-full-key-0123456789"
LOW_KEY = "console-low-key-0123456789"
REVIEWER_KEY = "console-reviewer-key-0123456789"
AGENT_KEY = "console-agent-key-0123456789"
SELF_KEY = "console-self-review-key-0123456789"
KEYS: dict[str, dict[str, Any]] = {
    FULL_KEY: {
        "read_scopes": ["*"],
        "write_scopes": ["*"],
        "max_sensitivity": "high",
        "operator": True,
        "actor": "console-admin",
    },
    LOW_KEY: {"read_scopes": ["team-a"], "write_scopes": [], "max_sensitivity": "low", "actor": "reader"},
    REVIEWER_KEY: {
        "read_scopes": ["*"],
        "write_scopes": ["*"],
        "max_sensitivity": "high",
        "reviewer": True,
        "actor": "reviewer",
    },
    AGENT_KEY: {
        "read_scopes": ["team-a"],
        "write_scopes": ["team-a"],
        "max_sensitivity": "medium",
        "review": "required",
        "actor": "agent",
    },
    SELF_KEY: {
        "read_scopes": ["team-a"],
        "write_scopes": ["team-a"],
        "max_sensitivity": "medium",
        "review": "required",
        "reviewer": True,
        "actor": "self-reviewer",
    },
}
#: How long a page may take to show what a test waits for.
TIMEOUT_MS = 15_000


def artifacts_dir() -> Path:
    """Where screenshots go (``MEMBRANE_TEST_ARTIFACTS``, else ``.artifacts/console/``)."""
    folder = Path(os.environ.get("MEMBRANE_TEST_ARTIFACTS") or ROOT / ".artifacts" / "console")
    folder.mkdir(parents=True, exist_ok=True)
    return folder


def shot(page: Page, name: str) -> Path:
    """A full-page screenshot of ``page`` as a test artifact."""
    path = artifacts_dir() / f"{re.sub(r'[^a-z0-9_-]+', '-', name.lower())}.png"
    page.screenshot(path=str(path), full_page=True)
    return path


# Package scope: Playwright's sync API runs an event loop on the test thread while it is open,
# so it is closed once the console's tests are done and async tests after them can run.
@pytest.fixture(scope="package")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as pw:
        yield pw


@pytest.fixture(scope="package")
def browser(playwright: Playwright) -> Iterator[Browser]:
    """The system's Chromium, headless (no sandbox: the tests may run as root)."""
    if not Path(CHROMIUM).exists():
        pytest.fail(f"{CHROMIUM} is missing: apt-get install -y chromium (scripts/test.sh does)")
    found = playwright.chromium.launch(
        executable_path=CHROMIUM, headless=True, args=["--no-sandbox", "--disable-gpu"]
    )
    yield found
    found.close()


@dataclass
class Console:
    """A live API, an API client (a full key's, or none without keys) and a browser context."""

    api: httpx.Client
    url: str
    browser: Browser
    contexts: list[BrowserContext] = field(default_factory=list)
    #: HTTP clients a test opened besides ``api``, closed at the end
    clients: list[httpx.Client] = field(default_factory=list)
    #: every message the pages logged, and every page error (a script that ran would log one)
    console_messages: list[str] = field(default_factory=list)

    def page(self, **options: Any) -> Page:
        """A page in a fresh context (its own cookies and storage)."""
        context = self.browser.new_context(
            base_url=self.url, viewport={"width": 1280, "height": 900}, **options
        )
        context.set_default_timeout(TIMEOUT_MS)
        self.contexts.append(context)
        page = context.new_page()
        page.on("console", lambda m: self.console_messages.append(f"{m.type}: {m.text}"))
        page.on("pageerror", lambda e: self.console_messages.append(f"pageerror: {e}"))
        return page

    def sign_in(self, page: Page, key: str) -> None:
        """Sign in through the form, as a person does."""
        page.goto("/console/signin")
        page.get_by_label("API key").fill(key)
        page.get_by_role("button", name="Sign in").click()
        expect(page.get_by_role("heading", name="Memories", exact=True)).to_be_visible()

    def capture(self, body: dict[str, Any], key: str | None = None) -> list[str]:
        """Capture through the API and wait for it; the written record ids, primary first."""
        headers = {"Authorization": f"Bearer {key}"} if key else {}
        resp = self.api.post("/v1/captures", params={"wait": 10}, json=body, headers=headers)
        assert resp.status_code == 200, resp.text
        assert resp.json()["status"] == "succeeded", resp.text
        return [str(i) for i in resp.json()["record_ids"]]


def fact(subject: str, predicate: str, obj: str, *, scope: str = "team-a", **extra: Any) -> dict[str, Any]:
    """An observation, which writes an episode and its fact (RFC 3.4)."""
    return {
        "source_kind": "observation",
        "scope": scope,
        "content": {"subject": subject, "predicate": predicate, "object": obj},
        **extra,
    }


def event(text: str, *, scope: str = "team-a", **extra: Any) -> dict[str, Any]:
    """An event, which writes one episode."""
    return {"source_kind": "event", "scope": scope, "content": {"text": text}, **extra}


def _console(serve: ServeFn, browser: Browser, keys: dict[str, Any] | None) -> Iterator[Console]:
    headers = {"Authorization": f"Bearer {FULL_KEY}"} if keys else None
    api = serve(keys=keys, headers=headers)
    found = Console(api=api, url=str(api.base_url).rstrip("/"), browser=browser)
    yield found
    for context in found.contexts:
        context.close()
    for client in found.clients:
        client.close()


@pytest.fixture
def console(serve: ServeFn, browser: Browser) -> Iterator[Console]:
    """The console of an API with keys (:data:`KEYS`)."""
    yield from _console(serve, browser, KEYS)


@pytest.fixture
def open_console(serve: ServeFn, browser: Browser) -> Iterator[Console]:
    """The console of an API without keys, on loopback (RFC 7.5): open, as the API is."""
    yield from _console(serve, browser, None)
