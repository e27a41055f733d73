"""``membrane export``, ``membrane import`` and ``membrane erase`` (RFC 15.1, 15.2, 15.4): a
scope moved between two stores with two commands, and erased with one, in-process."""

from __future__ import annotations

from pathlib import Path

import pytest
from typer.testing import CliRunner

from membrane_cli.main import app
from membrane_core import Membrane, Settings
from membrane_core.trust import DEVELOPMENT_POLICY, TrustPolicy
from tests.support import services
from tests.support.services import EMBEDDING_DIM

WRITER = TrustPolicy(actor="writer")
EVIDENCE = [{"kind": "observation", "ref": "user said so"}]


def env_of(url: str, folder: Path) -> dict[str, str]:
    return {
        "MEMBRANE_DATABASE_URL": url,
        "MEMBRANE_EMBEDDING_DIM": str(EMBEDDING_DIM),
        "MEMBRANE_DATA_DIR": str(folder),
        # a store on a fresh database waits for its first connection (RFC 10.5 allows 0.5 s)
        "MEMBRANE_REQUEST_POOL_TIMEOUT_SECONDS": "30",
        "COLUMNS": "250",
    }


def run(env: dict[str, str], *args: str, code: int = 0, input: str | None = None) -> str:
    out = CliRunner().invoke(app, list(args), env=env, input=input)
    assert out.exit_code == code, out.output
    return out.output


def test_two_commands_move_a_scope_and_lose_no_correction(
    database_url: str, pg_admin_url: str, tmp_path: Path
) -> None:
    source = Settings(
        database_url=database_url,
        data_dir=tmp_path / "a",
        embedding_dim=EMBEDDING_DIM,
        request_pool_timeout_seconds=30.0,
    )
    with Membrane(source) as m:
        tea = m.captures.capture_many(
            [
                {
                    "source_kind": "observation",
                    "scope": "proj",
                    "content": {"subject": "ann", "predicate": "likes", "object": "tea"},
                }
            ],
            WRITER,
        )[0].record_ids[1]
        coffee = m.revisions.supersede(
            tea, {"record": {"object": "coffee"}, "rationale": "changed", "evidence": EVIDENCE}, WRITER
        )
    bundle = tmp_path / "proj.tar"
    out = run(env_of(database_url, tmp_path / "a"), "export", str(bundle), "--scope", "proj")
    assert "wrote" in out and bundle.is_file()
    with services.fresh_database(pg_admin_url) as other:
        out = run(env_of(other, tmp_path / "b"), "import", str(bundle))
        assert "records written" in out
        with Membrane(
            Settings(
                database_url=other,
                data_dir=tmp_path / "b",
                embedding_dim=EMBEDDING_DIM,
                request_pool_timeout_seconds=30.0,
            )
        ) as t:
            assert t.get(coffee, DEVELOPMENT_POLICY).status.value == "active"
            assert t.get(tea, DEVELOPMENT_POLICY).status.value == "retracted"  # the correction moved
            found = {r.id for r in t.retrieve({"query": "ann likes tea coffee", "scopes": ["proj"]}).records}
            assert coffee in found and tea not in found

        run(
            env_of(other, tmp_path / "b"),
            "erase",
            "--scope",
            "proj",
            "--reason",
            "asked",
            input="n\n",
            code=1,
        )
        with Membrane(
            Settings(
                database_url=other,
                data_dir=tmp_path / "b",
                embedding_dim=EMBEDDING_DIM,
                request_pool_timeout_seconds=30.0,
            )
        ) as t:
            assert t.get(coffee, DEVELOPMENT_POLICY).id == coffee  # a no keeps everything
        out = run(env_of(other, tmp_path / "b"), "erase", "--scope", "proj", "--reason", "asked", "--yes")
        assert "memory_records" in out and "erased" in out
        with Membrane(
            Settings(
                database_url=other,
                data_dir=tmp_path / "b",
                embedding_dim=EMBEDDING_DIM,
                request_pool_timeout_seconds=30.0,
            )
        ) as t:
            assert t.listing.records({"scopes": ["proj"]}, DEVELOPMENT_POLICY).records == []
            assert t.audit(coffee, DEVELOPMENT_POLICY).entries[-1].action == "erase"


def test_a_refused_import_exits_with_its_reason(database_url: str, tmp_path: Path) -> None:
    (tmp_path / "empty").mkdir()
    out = run(env_of(database_url, tmp_path), "import", str(tmp_path / "empty"), code=1)
    assert "manifest.json" in out


@pytest.mark.parametrize("flag", ["--entity", "--record"])
def test_erase_names_a_bad_id(database_url: str, tmp_path: Path, flag: str) -> None:
    out = run(env_of(database_url, tmp_path), "erase", flag, "nope", "--reason", "x", code=1)
    assert "not a record id" in out
