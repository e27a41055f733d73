"""A realistic agent trace fed through the HTTP API, then retrieval (RFC 13.1)."""

from __future__ import annotations

import math
import time
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from rich.console import Console
from rich.table import Table

from api.keyfile import configured_keys
from membrane_core import Settings

SCOPE = "demo-acme-api"


def first_key(settings: Settings) -> str | None:
    """A configured API key for the demo client, if keys are configured (RFC 10.3)."""
    return next(iter(configured_keys(settings)), None)


def trace(now: datetime | None = None) -> list[dict[str, Any]]:
    """An agent fixing a failing CI job in a small web service, as captures."""
    t0 = (now or datetime.now(UTC)) - timedelta(minutes=30)

    def at(minutes: int) -> str:
        return (t0 + timedelta(minutes=minutes)).isoformat()

    return [
        {
            "source_kind": "event",
            "scope": SCOPE,
            "occurred_at": at(0),
            "tags": ["ci", "user-request"],
            "summary": "User asks to fix the failing CI job on main",
            "content": {
                "text": "CI on main fails since this morning; please fix the test job.",
                "entities": ["acme-api", "GitHub Actions"],
            },
        },
        {
            "source_kind": "tool_output",
            "scope": SCOPE,
            "occurred_at": at(2),
            "tags": ["ci"],
            "summary": "pytest fails: ImportError for zoneinfo backport on Python 3.12",
            "content": {
                "text": "tests/test_billing.py: ImportError: No module named 'backports.zoneinfo'",
                "tool_calls": [
                    {"tool": "bash", "args": {"cmd": "pytest -x"}, "result": "1 failed, 211 passed"}
                ],
                "outcome": "failure",
                "entities": ["pytest", "backports.zoneinfo"],
            },
        },
        {
            "source_kind": "observation",
            "scope": SCOPE,
            "occurred_at": at(4),
            "summary": "acme-api runs on Python 3.12",
            "content": {"subject": "acme-api", "predicate": "runs_on", "object": "Python 3.12"},
        },
        {
            "source_kind": "observation",
            "scope": SCOPE,
            "occurred_at": at(5),
            "summary": "The CI runner image is ubuntu-24.04",
            "content": {"subject": "acme-api CI", "predicate": "uses_image", "object": "ubuntu-24.04"},
        },
        {
            "source_kind": "observation",
            "scope": SCOPE,
            "occurred_at": at(6),
            "sensitivity": "low",
            "summary": "The user prefers small, reviewable pull requests",
            "content": {"subject": "user", "predicate": "prefers", "object": "small pull requests"},
        },
        {
            "source_kind": "tool_output",
            "scope": SCOPE,
            "occurred_at": at(9),
            "tags": ["ci", "fix"],
            "summary": "Replaced backports.zoneinfo with the standard zoneinfo module",
            "content": {
                "text": "Edited billing/tz.py: use zoneinfo from the standard library.",
                "tool_calls": [
                    {"tool": "edit_file", "args": {"path": "billing/tz.py"}},
                    {"tool": "bash", "args": {"cmd": "pytest -x"}, "result": "212 passed"},
                ],
                "outcome": "success",
                "entities": ["zoneinfo", "billing/tz.py"],
            },
        },
        {
            "source_kind": "working_state",
            "scope": SCOPE,
            "occurred_at": at(10),
            "content": {
                "thread_id": "fix-ci-main",
                "task_state": "executing",
                "context_summary": "Tests pass locally; waiting for the CI run of the PR.",
                "next_actions": ["open PR", "watch CI"],
                "open_questions": [],
            },
        },
        {
            "source_kind": "outcome",
            "scope": SCOPE,
            "occurred_at": at(20),
            "tags": ["ci"],
            "summary": "CI green again after dropping backports.zoneinfo",
            "content": {
                "text": "PR #482 merged; CI on main is green.",
                "outcome": "success",
                "entities": ["acme-api", "PR #482"],
            },
        },
    ]


QUESTIONS = ("why did CI fail", "which Python version does acme-api run on", "what does the user prefer")


def _text(record: dict[str, Any]) -> str:
    p = record.get("payload") or {}
    if "subject" in p:
        return f"{p['subject']} {p.get('predicate', '')} {p.get('object', '')}"
    return str(record.get("summary") or p.get("text") or p.get("context_summary") or "")[:90]


def relevance(score: float) -> float:
    """A fused score (RFC 8.2, unbounded, 0 for an average candidate) on a 0-1 scale.

    The logistic function keeps the order: 0.5 is an average candidate of the pool,
    values near 1 stand out on every arm that scored them.
    """
    return 1.0 / (1.0 + math.exp(-max(-50.0, min(50.0, score))))


def print_records(console: Console, records: list[dict[str, Any]], *, title: str) -> None:
    """A table of retrieved records: type, status, relevance and what they say."""
    t = Table(title=title, title_justify="left")
    for col in ("type", "status", "relevance", "salience", "memory"):
        t.add_column(col)
    for r in records:
        score = r.get("score")
        t.add_row(
            str(r["type"]),
            str(r["status"]),
            f"{relevance(score):.2f}" if isinstance(score, float) else "",
            f"{r['salience']:.2f}",
            _text(r),
        )
    console.print(t)


def wait_for_embeddings(client: httpx.Client, *, timeout: float = 30.0) -> bool:
    """Poll ``GET /v1/metrics`` until no ``embed`` work is pending (RFC 12.1, 14.2).

    Embedding runs on its own pool after the capture commits; the demo's questions rank
    by meaning only once the vectors are written. False when the wait timed out or the
    backlog is not visible to this key.
    """
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        resp = client.get("/v1/metrics")
        if resp.status_code != 200:
            return False
        backlog = resp.json().get("work_backlog")
        if backlog is None:
            return False
        if not (backlog.get("embed") or {}).get("pending"):
            return True
        time.sleep(0.25)
    return False


def run_demo(base_url: str, *, console: Console, api_key: str | None = None) -> list[dict[str, Any]]:
    """Capture the trace (one batch, waited), correct one fact, retrieve; returns the operations.

    An HTTP failure is printed with the API's error body instead of a traceback.
    """
    try:
        return _demo(base_url, console, api_key)
    except httpx.HTTPStatusError as exc:
        console.print(
            f"[red]demo stopped:[/red] {exc.request.method} {exc.request.url.path} → "
            f"HTTP {exc.response.status_code} {exc.response.text[:500]}"
        )
    except httpx.HTTPError as exc:
        console.print(f"[red]demo stopped:[/red] cannot reach {base_url}: {exc}")
    return []


def _demo(base_url: str, console: Console, api_key: str | None) -> list[dict[str, Any]]:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    with httpx.Client(base_url=base_url, headers=headers, timeout=40) as client:
        resp = client.post("/v1/captures:batch", params={"wait": 20}, json={"captures": trace()})
        resp.raise_for_status()
        ops = resp.json()["operations"]
        done = sum(op["status"] == "succeeded" for op in ops)
        console.print(
            f"[bold]captured[/bold] {len(ops)} agent events through POST /v1/captures:batch "
            f"({done} committed, HTTP {resp.status_code})"
        )
        fact_id = next((op["record_ids"][1] for op in ops if len(op.get("record_ids") or []) > 1), None)
        if fact_id:
            fix = client.post(
                f"/v1/records/{fact_id}/supersede",
                params={"wait": 10},
                json={
                    "record": {"subject": "acme-api", "predicate": "runs_on", "object": "Python 3.13"},
                    "rationale": "the Dockerfile was bumped to python:3.13-slim",
                    "evidence": [{"kind": "artifact", "ref": "Dockerfile@4f2c1e9"}],
                },
            )
            op = fix.json()
            if op.get("status") == "succeeded":
                console.print(
                    f"[bold]superseded[/bold] 'acme-api runs_on Python 3.12' → 3.13 "
                    f"(POST /v1/records/{{id}}/supersede, HTTP {fix.status_code})"
                )
            else:
                console.print(
                    f"[red]supersede did not succeed[/red] (HTTP {fix.status_code}): {op.get('error') or op}"
                )
        wait_for_embeddings(client)
        for question in QUESTIONS:
            r = client.post("/v1/retrieve", json={"query": question, "scopes": [SCOPE], "limit": 4})
            r.raise_for_status()
            print_records(console, r.json()["records"], title=f"retrieve: {question!r}")
    return list(ops)
