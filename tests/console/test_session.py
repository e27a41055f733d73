"""Sign-in, the session cookie, CSRF and the console's headers (RFC 10.8)."""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import httpx
from playwright.sync_api import Browser, expect

from tests.console.conftest import FULL_KEY, KEYS, Console, shot
from tests.support.api import ServeFn

CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "object-src 'none'; base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)


def test_sign_in_sets_a_strict_http_only_cookie_and_never_exposes_the_key(console: Console) -> None:
    page = console.page()
    requests: list[str] = []
    page.on("request", lambda r: requests.append(r.url))
    page.goto("/console/records")
    expect(page).to_have_url(re.compile(r"/console/signin\?next="))
    page.get_by_label("API key").fill("not-a-key")
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("alert")).to_have_text("unknown API key")
    shot(page, "signin")

    console.sign_in(page, FULL_KEY)
    expect(page.get_by_text("Signed in as console-admin")).to_be_visible()
    (cookie,) = [c for c in page.context.cookies() if c["name"] == "membrane_console"]
    assert cookie["httpOnly"] and cookie["sameSite"] == "Strict" and cookie["path"] == "/console"
    assert FULL_KEY not in cookie["value"]
    # the key is in no URL, no storage, no script-visible cookie
    assert not any(FULL_KEY in url for url in requests)
    assert page.evaluate("() => JSON.stringify(Object.entries(localStorage))") == "[]"
    # htmx keeps only the current path there (its history cache is off: historyCacheSize 0)
    assert FULL_KEY not in page.evaluate("() => JSON.stringify(Object.entries(sessionStorage))")
    assert page.evaluate("() => document.cookie") == ""

    page.get_by_role("button", name="Sign out").click()
    expect(page).to_have_url(re.compile(r"/console/signin$"))
    page.goto("/console/records")
    expect(page).to_have_url(re.compile(r"/console/signin"))


def test_every_answer_carries_the_csp_and_pages_are_not_stored(console: Console) -> None:
    for path in ("/console/signin", "/console/static/console.css", "/console/records"):
        resp = console.api.get(path)
        assert resp.headers["content-security-policy"] == CSP, path
        assert resp.headers["x-content-type-options"] == "nosniff"
        assert resp.headers["referrer-policy"] == "same-origin"
    assert console.api.get("/console/signin").headers["cache-control"] == "no-store"
    assert "/console" not in str(console.api.get("/openapi.json").json()["paths"])


def _signed_in(console: Console) -> tuple[httpx.Client, str]:
    """A plain HTTP client signed in, and its CSRF token (closed with the API's client)."""
    client = httpx.Client(base_url=console.url, follow_redirects=False)
    console.clients.append(client)
    page = client.get("/console/signin")
    csrf = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert csrf is not None
    resp = client.post(
        "/console/signin",
        data={"csrf": csrf.group(1), "key": FULL_KEY, "next": "/console/records"},
        headers={"Origin": console.url},
    )
    assert resp.status_code == 303, resp.text
    records = client.get("/console/records")
    assert records.status_code == 200
    token = re.search(r'name="csrf" value="([^"]+)"', records.text)
    assert token is not None and token.group(1) != csrf.group(1)  # a new token at sign-in
    return client, token.group(1)


def test_changes_need_the_csrf_token_and_the_same_origin(console: Console) -> None:
    (rid, *_) = console.capture({"source_kind": "event", "scope": "team-a", "content": {"text": "deploy"}})
    client, csrf = _signed_in(console)
    form = {"step": "confirm", "rationale": "matters"}
    url = f"/console/records/{rid}/reinforce"
    missing = client.post(url, data=form, headers={"Origin": console.url})
    assert missing.status_code == 403 and "CSRF" in missing.text
    wrong = client.post(url, data={**form, "csrf": "forged"}, headers={"Origin": console.url})
    assert wrong.status_code == 403
    elsewhere = client.post(url, data={**form, "csrf": csrf}, headers={"Origin": "http://evil.example"})
    assert elsewhere.status_code == 403 and "Origin" in elsewhere.text
    nowhere = client.post(url, data={**form, "csrf": csrf})
    assert nowhere.status_code == 403
    ok = client.post(url, data={**form, "csrf": csrf}, headers={"Origin": console.url})
    assert ok.status_code == 200 and "succeeded" in ok.text
    audit = console.api.get(f"/v1/records/{rid}/audit").json()["entries"]
    assert [e["action"] for e in audit] == ["create", "reinforce"]


def test_a_removed_key_ends_its_session_at_once(serve: ServeFn, browser: Browser, tmp_path: Path) -> None:
    keys_file = tmp_path / "keys.json"
    keys_file.write_text(json.dumps(KEYS))
    api = serve(keys_file=keys_file)
    live = Console(api=api, url=str(api.base_url).rstrip("/"), browser=browser)
    client, _ = _signed_in(live)
    try:
        _ends(client, keys_file, tmp_path)
    finally:
        client.close()


def _ends(client: httpx.Client, keys_file: Path, tmp_path: Path) -> None:
    # RFC 10.3: the ring follows the file (checked at most once a second); replaced atomically
    fresh = tmp_path / "keys.new"
    fresh.write_text(json.dumps({k: v for k, v in KEYS.items() if k != FULL_KEY}))
    fresh.replace(keys_file)
    deadline = time.monotonic() + 10
    while (resp := client.get("/console/records")).status_code == 200 and time.monotonic() < deadline:
        time.sleep(0.2)
    assert resp.status_code == 303 and resp.headers["location"].startswith("/console/signin")
    assert 'membrane_console=""' in resp.headers.get("set-cookie", "")


def test_without_keys_the_console_is_open_on_loopback_and_still_csrf_protected(open_console: Console) -> None:
    page = open_console.page()
    page.goto("/console")
    expect(page.get_by_role("heading", name="Memories", exact=True)).to_be_visible()
    expect(page.get_by_text("Signed in as development (operator)")).to_be_visible()
    assert [c["name"] for c in page.context.cookies()] == ["membrane_console"]
    client = httpx.Client(base_url=open_console.url)
    open_console.clients.append(client)
    (rid, *_) = open_console.capture({"source_kind": "event", "scope": "a", "content": {"text": "x"}})
    refused = client.post(
        f"/console/records/{rid}/reinforce",
        data={"step": "confirm", "rationale": "r"},
        headers={"Origin": open_console.url},
    )
    assert refused.status_code == 403
