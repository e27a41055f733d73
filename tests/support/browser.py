"""Headless Chromium for the tests: a page's DOM after its scripts ran, and what it fetched.

Chromium (Debian's ``chromium`` package) loads the page with no network: every host but
loopback resolves to nothing and every request to one goes to a proxy that is not there
(Chromium never sends loopback through a proxy). ``--dump-dom`` prints the DOM once the
virtual-time budget has run out, and Chromium's net log names every request, so a test
sees what the page asked of any host, not only what its HTML names.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from tests.support import services

#: Chromium's switches besides the budget, the profile and the net log: no sandbox (the
#: tests run as root), no GPU, and none of its own background traffic.
SWITCHES = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--host-resolver-rules=MAP * ~NOTFOUND, EXCLUDE 127.0.0.1",
)


@dataclass(frozen=True)
class Page:
    """A page as Chromium rendered it."""

    dom: str
    #: Every URL the page asked for (its scripts, styles, images, fetches), in order.
    requests: tuple[str, ...]


def chromium() -> str:
    """The Chromium binary; the tests need it (``scripts/test.sh`` installs it)."""
    exe = shutil.which("chromium")
    if exe is None:
        raise RuntimeError(
            "chromium is not on PATH; install it (apt-get install -y chromium chromium-driver) "
            "or run the tests through scripts/test.sh, which does"
        )
    return exe


def load(url: str, workdir: Path, *, budget_ms: int = 5000) -> Page:
    """Load ``url`` in a fresh profile under ``workdir`` and return its DOM and requests."""
    workdir.mkdir(parents=True, exist_ok=True)
    netlog = workdir / "netlog.json"
    argv = [
        chromium(),
        *SWITCHES,
        f"--proxy-server=http://127.0.0.1:{services.free_port()}",
        f"--user-data-dir={workdir / 'profile'}",
        f"--virtual-time-budget={budget_ms}",
        f"--log-net-log={netlog}",
        "--dump-dom",
        url,
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=120, check=False)
    if proc.returncode != 0:
        raise RuntimeError(f"chromium exited {proc.returncode}: {proc.stderr[-2000:]}")
    parts = urlsplit(url)
    return Page(dom=proc.stdout, requests=page_requests(netlog, f"{parts.scheme}://{parts.netloc}"))


def page_requests(netlog: Path, origin: str) -> tuple[str, ...]:
    """The URLs of the net log's requests that a page of ``origin`` started.

    Chromium's own requests (its updater, account checks, autofill) start from no origin.
    """
    text = netlog.read_text(encoding="utf-8")
    try:
        log = json.loads(text)
    except json.JSONDecodeError:  # a log cut short lacks its closing brackets
        log = json.loads(text.rstrip().rstrip(",") + "]}")
    start = log["constants"]["logEventTypes"]["URL_REQUEST_START_JOB"]
    return tuple(
        params["url"]
        for event in log["events"]
        if event["type"] == start
        and (params := event.get("params") or {}).get("initiator") == origin
        and "url" in params
    )
