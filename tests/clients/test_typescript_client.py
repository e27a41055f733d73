"""The TypeScript client (clients/typescript): its node tests against the live API, its schema current.

The node suite (``npm test``) builds the client, type-checks it and runs node's test runner:
retries against a scripted server, list pages on a scripted fetch, then capture, retrieve,
supersede, idempotent replays, typed errors and the list calls (RFC 10.7) against the server
started here (``MEMBRANE_URL``), and review (RFC 5.7) against a second one with a model's,
a writer's and a reviewer's keys (``MEMBRANE_REVIEW_URL``).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from api.app import create_app
from tests.support.api import ServeFn

CLIENT = Path(__file__).resolve().parents[2] / "clients" / "typescript"
NODE_MAJOR = 20
#: The tools the suite needs, installed by ``npm ci`` from the committed lockfile.
TOOLS = ("tsc", "openapi-typescript")


def _run(args: list[str], timeout: float, **env: str) -> subprocess.CompletedProcess[str]:
    quiet = {
        "npm_config_update_notifier": "false",
        "npm_config_fund": "false",
        "npm_config_audit": "false",
        "NO_COLOR": "1",
    }
    return subprocess.run(
        args,
        cwd=CLIENT,
        capture_output=True,
        text=True,
        timeout=timeout,
        env={**os.environ, **quiet, **env},
        check=False,
    )


def _output(result: subprocess.CompletedProcess[str]) -> str:
    return f"exit {result.returncode}\n--- stdout\n{result.stdout}\n--- stderr\n{result.stderr}"


def _needs_install() -> bool:
    """node_modules is missing a tool, or older than the lockfile (npm ci writes its own copy)."""
    installed = CLIENT / "node_modules" / ".package-lock.json"
    if not installed.exists() or not all((CLIENT / "node_modules" / ".bin" / t).exists() for t in TOOLS):
        return True
    return (CLIENT / "package-lock.json").stat().st_mtime > installed.stat().st_mtime


@pytest.fixture(scope="module")
def npm() -> str:
    """npm, with the client's node_modules installed from the lockfile."""
    node, npm = shutil.which("node"), shutil.which("npm")
    if node is None or npm is None:
        pytest.fail(
            f"node and npm are needed for {CLIENT.name} client tests: install Node.js "
            f"{NODE_MAJOR} or newer (Debian: apt-get install -y nodejs npm)",
            pytrace=False,
        )
    version = _run([node, "--version"], 10).stdout.strip()
    major = re.match(r"v(\d+)\.", version)
    if major is None or int(major.group(1)) < NODE_MAJOR:
        pytest.fail(f"Node.js {NODE_MAJOR} or newer is needed, found {version!r}", pytrace=False)
    if _needs_install():
        installed = _run([npm, "ci"], 300)
        assert installed.returncode == 0, f"npm ci failed in {CLIENT}\n{_output(installed)}"
    return npm


def _summary(output: str) -> dict[str, int]:
    """Counts from node's test runner summary: tap (``# pass 3``) or spec (an info sign, ``pass 3``)."""
    found = re.findall(r"^(?:#|\u2139) (tests|pass|fail|cancelled|skipped|todo) (\d+)$", output, re.M)
    return {name: int(count) for name, count in found}


def _openapi(path: Path, document: dict[str, Any]) -> Path:
    path.write_text(json.dumps(document), encoding="utf-8")
    return path


def _passed(output: str, name: str) -> bool:
    """Whether the test ``name`` passed (tap ``ok 3 - name``, spec check mark), not skipped."""
    line = re.search(rf"^\s*(?:ok \d+ - |\u2714 ){re.escape(name)}(.*)$", output, re.M)
    return line is not None and "SKIP" not in line.group(1) and "skipped" not in line.group(1)


MUST_PASS = (
    "capture, retrieve, supersede: only the replacement comes back",
    "a write retried after a lost answer returns the same operation",
    "a 422 is an InvalidInputError naming the field; a 404 a NotFoundError",
    "a 503 is retried after its Retry-After, with the same Idempotency-Key",
    "records: a page, every page, filters and a superseded fact's lineage",
    "operations, scopes and the work queue",
    "iterRecords follows next_cursor with the same filters, a page at a time",
    "the review queue's query, its pages and the decisions' bodies (RFC 5.7)",
    "a reviewed capture is retrievable only once a reviewer approves it",
    "reject, amend, a batch of decisions and the queue over two pages",
    "export a scope as a tar, import it back, and erase it after a dry run (RFC 15)",
)

#: The keys of the review server (test/review.test.mjs): a model's, whose writes are
#: proposed, a trusted writer's and a reviewer's (RFC 5.7, 10.3).
_ACCESS = {"read_scopes": ["ts-review"], "write_scopes": ["ts-review"], "max_sensitivity": "low"}
REVIEW_KEYS = {
    "ts-model-key": {**_ACCESS, "actor": "ts-model", "review": "required"},
    "ts-writer-key": {**_ACCESS, "actor": "ts-writer"},
    "ts-reviewer-key": {**_ACCESS, "actor": "ts-reviewer", "reviewer": True},
}


def test_node_suite_passes_against_the_live_api(npm: str, serve: ServeFn) -> None:
    client = serve()
    url = str(client.base_url).rstrip("/")
    assert client.get("/healthz").status_code == 200
    review_url = str(serve(keys=REVIEW_KEYS).base_url).rstrip("/")
    result = _run([npm, "test"], 180, MEMBRANE_URL=url, MEMBRANE_REVIEW_URL=review_url)
    assert result.returncode == 0, _output(result)
    counts = _summary(result.stdout)
    # a run that skipped the live tests also exits 0: every test must have passed
    assert counts.get("tests", 0) >= 15 and counts.get("pass") == counts["tests"], _output(result)
    assert counts.get("fail") == counts.get("skipped") == counts.get("cancelled") == 0, _output(result)
    assert all(_passed(result.stdout, name) for name in MUST_PASS), _output(result)

    # control: without the server's URL the live tests report as skipped, and are not counted as passed
    alone = _run(
        ["node", "--test", "test/live.test.mjs", "test/review.test.mjs"],
        60,
        MEMBRANE_URL="",
        MEMBRANE_REVIEW_URL="",
    )
    assert alone.returncode == 0, _output(alone)
    assert _summary(alone.stdout)["skipped"] >= 7, _output(alone)
    assert not _passed(alone.stdout, MUST_PASS[0]), _output(alone)


def test_committed_schema_is_what_the_server_openapi_generates(npm: str, tmp_path: Path) -> None:
    document = create_app().openapi()
    current = _run([npm, "run", "check-schema", "--", str(_openapi(tmp_path / "openapi.json", document))], 60)
    assert current.returncode == 0, (
        "clients/typescript/src/schema.ts is stale: regenerate it (clients/typescript/README.md)\n"
        + _output(current)
    )

    # control: a server whose OpenAPI moved on is caught
    drifted = json.loads(json.dumps(document))
    drifted["components"]["schemas"]["RecordView"]["properties"]["drift"] = {"type": "string"}
    stale = _run([npm, "run", "check-schema", "--", str(_openapi(tmp_path / "drifted.json", drifted))], 60)
    assert stale.returncode == 1, _output(stale)
    assert "src/schema.ts is not what the server's OpenAPI generates" in stale.stderr
