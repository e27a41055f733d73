"""``membrane records`` and ``membrane work`` (RFC 10.7): the lists through the library, in-process."""

from __future__ import annotations

import json
import uuid
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from membrane_cli.main import app
from membrane_core import Membrane
from membrane_core.trust import DEVELOPMENT_POLICY
from tests.support.services import EMBEDDING_DIM
from tests.support.sql import scalar

SCOPE = "cli-lists"
FACT = {
    "source_kind": "observation",
    "scope": SCOPE,
    "content": {"subject": "user", "predicate": "prefers", "object": "dark mode"},
}


@pytest.fixture
def env(database_url: str, tmp_path: Path) -> dict[str, str]:
    return {
        "MEMBRANE_DATABASE_URL": database_url,
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_DATA_DIR": str(tmp_path),
        "COLUMNS": "200",
    }


def run(env: dict[str, str], *args: str, code: int = 0, stdin: str | None = None) -> str:
    out = CliRunner().invoke(app, list(args), env=env, input=stdin)
    assert out.exit_code == code, out.output
    return out.output


def capture(env: dict[str, str], items: list[dict[str, Any]]) -> None:
    run(env, "capture", "-", stdin=json.dumps(items))


def events(n: int) -> list[dict[str, Any]]:
    return [
        {"source_kind": "event", "scope": SCOPE, "content": {"text": f"opened page {i}"}} for i in range(n)
    ]


def test_records_by_page_every_page_and_filter(env: dict[str, str]) -> None:
    capture(env, [*events(3), FACT, {**events(1)[0], "scope": "elsewhere"}])

    page = json.loads(run(env, "records", "--scope", SCOPE, "--json"))
    assert len(page["records"]) == 5 and page["next_cursor"] is None
    assert {r["scope"] for r in page["records"]} == {SCOPE}
    assert page["diagnostics"]["returned"] == 5

    first = json.loads(run(env, "records", "-s", SCOPE, "--limit", "2", "--json"))
    assert len(first["records"]) == 2 and first["next_cursor"]
    second = json.loads(
        run(env, "records", "-s", SCOPE, "--limit", "2", "--cursor", first["next_cursor"], "--json")
    )
    assert {r["id"] for r in first["records"]}.isdisjoint(r["id"] for r in second["records"])

    # --all --json: one record a line, across pages
    lines = run(env, "records", "-s", SCOPE, "--limit", "2", "--all", "--json").splitlines()
    assert [json.loads(line)["id"] for line in lines] == [r["id"] for r in page["records"]]

    table = run(env, "records", "-s", SCOPE, "--type", "semantic")
    assert "user prefers dark mode" in table and "1 records" in table
    assert "opened page" not in table
    paged = run(env, "records", "-s", SCOPE, "--limit", "2")
    assert "2 records" in paged and f"--cursor {first['next_cursor']}" in paged
    every = run(env, "records", "-s", SCOPE, "--limit", "2", "--all")
    assert every.count("opened page") == 3 and "5 records" in every
    both = json.loads(run(env, "records", "-s", SCOPE, "-s", "elsewhere", "--json"))
    assert len(both["records"]) == 6


def test_records_refusals_name_the_field(env: dict[str, str]) -> None:
    out = run(env, "records", "--type", "gossip", code=1)
    assert "invalid_input" in out and "types" in out
    out = run(env, "records", "--created-after", "2026-01-01T00:00:00", code=1)
    assert "created_after" in out  # a time without its zone
    out = run(env, "records", "--created-after", "2026-01-01T00:00:00Z", "--json")
    assert json.loads(out)["records"] == []  # control: with its zone it is a filter


def test_records_lineage(env: dict[str, str], api_membrane: Membrane) -> None:
    old = api_membrane.capture(FACT).record_ids[1]
    new = api_membrane.revisions.supersede(
        old,
        {
            "record": {"object": "light mode"},
            "rationale": "asked for light mode",
            "evidence": [{"kind": "observation", "ref": "settings page"}],
        },
        DEVELOPMENT_POLICY,
    )
    chain = json.loads(run(env, "records", "lineage", str(old), "--json"))
    assert [(e["kind"], e["source_id"], e["target_id"]) for e in chain["edges"]] == [
        ("supersedes", str(new), str(old))
    ]
    table = run(env, "records", "lineage", str(new))
    assert "supersedes" in table and "asked for light mode" in table
    assert "user prefers light mode" in table and "user prefers dark mode" in table

    before = json.loads(
        run(env, "records", "lineage", str(old), "--as-of", "2000-01-01T00:00:00+00:00", "--json")
    )
    assert before["edges"] == []
    out = run(env, "records", "lineage", str(old), "--as-of", "2000-01-01", code=2)
    assert "time zone" in out
    out = run(env, "records", "lineage", str(uuid.uuid4()), code=1)
    assert "not_found" in out


def bury(url: str, kind: str, target: uuid.UUID, error: str) -> int:
    return scalar(
        url,
        "INSERT INTO work_items (kind, target_id, attempts, last_error, dead) VALUES (%s, %s, 5, %s, true) "
        "ON CONFLICT (kind, target_id) DO UPDATE SET attempts = 5, last_error = EXCLUDED.last_error, "
        "dead = true RETURNING id",
        kind,
        target,
        error,
    )


def test_work_shows_the_buried_items_and_requeues_them(
    env: dict[str, str], api_membrane: Membrane, database_url: str
) -> None:
    assert "no buried items" in run(env, "work")
    records = [api_membrane.capture(e).record_ids[0] for e in events(2)]
    embed = bury(database_url, "embed", records[0], "provider timed out")
    extract = bury(database_url, "extract", records[1], "no model configured")

    table = run(env, "work")
    assert "provider timed out" in table and "no model configured" in table
    assert str(records[0]) in table and "membrane work requeue" in table
    overview = json.loads(run(env, "work", "--kind", "extract", "--json"))
    assert [b["id"] for b in overview["buried"]] == [extract]
    assert {j["kind"]: j["buried"] for j in overview["jobs"]}["embed"] == 1

    out = run(env, "work", "requeue", str(embed), "999999999", "--rationale", "the provider is back")
    assert f"requeued: {embed}" in out and "unchanged (not buried, or gone): 999999999" in out
    again = json.loads(run(env, "work", "requeue", str(embed), "--json"))
    assert again == {"requeued": [], "unchanged": [embed]}
    assert [b["id"] for b in json.loads(run(env, "work", "--json"))["buried"]] == [extract]
    assert scalar(database_url, "SELECT count(*) FROM work_items WHERE dead") == 1
    assert any(e.rationale == "the provider is back" for e in api_membrane.audit(records[0]).entries)
    run(env, "work", "requeue", code=2)  # no ids: a usage error


def test_the_groups_are_listed() -> None:
    out = CliRunner().invoke(app, ["--help"], env={"COLUMNS": "200"})
    assert out.exit_code == 0 and "records" in out.output and "work" in out.output
    out = CliRunner().invoke(app, ["records", "--help"], env={"COLUMNS": "200"})
    assert "lineage" in out.output and "--all" in out.output
