"""``membrane review`` (RFC 5.7): the queue and the decisions through the library, in-process,
under the development policy (a reviewer)."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from membrane_cli.main import app
from membrane_core import Membrane
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy
from tests.support.services import EMBEDDING_DIM

SCOPE = "cli-review"
#: a model's key: its writes are proposed
MODEL = TrustPolicy(actor="model", review_required=True)
WRITER = TrustPolicy(actor="writer")


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "MEMBRANE_DATABASE_URL": database_url,
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_DATA_DIR": str(tmp_path),
        "COLUMNS": "250",
    }


def run(env: dict[str, str], *args: str, code: int = 0) -> str:
    out = CliRunner().invoke(app, list(args), env=env)
    assert out.exit_code == code, out.output
    return out.output


def observe(m: Membrane, s: str, p: str, o: str, trust: TrustPolicy) -> Any:
    capture = {
        "source_kind": "observation",
        "scope": SCOPE,
        "content": {"subject": s, "predicate": p, "object": o},
    }
    return m.captures.capture_many([capture], trust)[0]


def status(m: Membrane, record_id: uuid.UUID) -> str:
    return m.get(record_id, DEVELOPMENT_POLICY).status.value


def test_the_queue_and_an_approval(env: dict[str, str], api_membrane: Membrane) -> None:
    assert "no proposals await a decision" in run(env, "review")
    old = observe(api_membrane, "user", "prefers", "dark mode", WRITER).record_ids[1]
    conflicting = observe(api_membrane, "user", "prefers", "light mode", MODEL)
    episode = api_membrane.captures.capture_many(
        [{"source_kind": "event", "scope": SCOPE, "content": {"text": "opened the settings page"}}], MODEL
    )[0]
    observe(api_membrane, "user", "prefers", "light mode", WRITER)  # corroborates it

    table = run(env, "review")
    for shown in (str(conflicting.proposal_id), str(episode.proposal_id), "user prefers light mode", "model"):
        assert shown in table
    assert "opened the settings page" in table and "2 proposals" in table
    row = next(line for line in table.splitlines() if str(conflicting.proposal_id) in line)
    assert "capture" in row and " 1 " in row  # one corroboration, one conflict
    ranked = json.loads(run(env, "review", "--order", "corroboration", "--json"))
    assert [e["proposal_id"] for e in ranked["entries"]] == [
        str(conflicting.proposal_id),
        str(episode.proposal_id),
    ]
    assert [c["id"] for c in ranked["entries"][0]["conflicts"]] == [str(old)]
    first = json.loads(run(env, "review", "--limit", "1", "--json"))
    assert len(first["entries"]) == 1 and first["next_cursor"]
    lines = run(env, "review", "--limit", "1", "--all", "--json").splitlines()
    assert len(lines) == 2 and {json.loads(line)["proposal_id"] for line in lines} == {
        str(conflicting.proposal_id),
        str(episode.proposal_id),
    }
    assert run(env, "review", "--scope", "elsewhere").strip() == "no proposals await a decision"

    # beside a conflicting active fact, an approval needs its mode: refused, nothing changed
    out = run(env, "review", "approve", str(conflicting.proposal_id), code=1)
    assert "invalid_input" in out and "mode" in out
    assert status(api_membrane, conflicting.record_ids[1]) == "proposed"
    out = run(
        env, "review", "approve", str(conflicting.proposal_id), "--mode", "replace", "--rationale", "asked"
    )
    assert f"approved proposal {conflicting.proposal_id}" in out
    assert status(api_membrane, conflicting.record_ids[1]) == "active"
    assert status(api_membrane, old) == "retracted"
    audit = api_membrane.audit(conflicting.record_ids[1]).entries[-1]
    assert (audit.action, audit.actor, audit.rationale) == ("review", "development", "asked")

    # decided once: a second decision is refused with its code and exit status 1
    out = run(env, "review", "reject", str(conflicting.proposal_id), code=1)
    assert "revision_refused" in out and "already approved" in out
    assert status(api_membrane, conflicting.record_ids[1]) == "active"
    run(env, "review", "approve", str(conflicting.proposal_id), "--mode", "sideways", code=2)


def test_reject_and_amend(env: dict[str, str], api_membrane: Membrane) -> None:
    wrong = observe(api_membrane, "acme-api", "runs_on", "Perl 5", MODEL)
    typo = observe(api_membrane, "acme-api", "owned_by", "team-paymnets", MODEL)

    out = run(env, "review", "reject", str(wrong.proposal_id), "--rationale", "a poisoned page")
    assert f"rejected proposal {wrong.proposal_id}" in out
    assert status(api_membrane, wrong.record_ids[1]) == "retracted"
    again = observe(api_membrane, "acme-api", "runs_on", "Perl 5", MODEL)
    assert again.fact == "tombstoned" and len(again.record_ids) == 1  # only its episode, proposed

    run(env, "review", "amend", str(typo.proposal_id), code=2)  # nothing to amend with
    result = json.loads(
        run(env, "review", "amend", str(typo.proposal_id), "--object", "team-payments", "--json")
    )
    assert result["outcome"] == "amended" and result["error"] is None
    new = uuid.UUID(result["record_ids"][-1])
    assert api_membrane.get(new, DEVELOPMENT_POLICY).payload["object"] == "team-payments"
    assert status(api_membrane, typo.record_ids[1]) == "retracted"
    assert status(api_membrane, typo.record_ids[0]) == "active"  # the episode, approved

    out = run(env, "review", "approve", str(uuid.uuid4()), code=1)
    assert "not_found" in out
    out = run(env, "review", "reject", "not-an-id", code=1)
    assert "invalid_input" in out
    refused = json.loads(run(env, "review", "approve", str(wrong.proposal_id), "--json", code=1))
    assert refused["error"]["code"] == "revision_refused"
    left = json.loads(run(env, "review", "--json"))["entries"]
    assert [e["proposal_id"] for e in left] == [str(again.proposal_id)]
    assert left[0]["fact"] is None and left[0]["records"][0]["id"] == str(again.record_ids[0])


def test_the_group_is_listed() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "review" in out.output
    out = CliRunner().invoke(app, ["review", "--help"], env={"COLUMNS": "200"})
    assert all(command in out.output for command in ("approve", "reject", "amend", "--order"))
