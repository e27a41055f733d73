"""``membrane bench list`` end to end at a tiny size (RFC 10.7, 14.1)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from membrane_cli.bench import listing_report
from membrane_cli.main import app
from tests.support.sql import scalar


def test_bench_list_prints_each_page_beside_the_bare_rows(database_url: str, tmp_path: Path) -> None:
    """RFC 14.1: the run builds its own store, whatever MEMBRANE_DATABASE_URL names, and prints
    the list, the API and the bare reads of the first and the deep page, with the docs block."""
    doc = tmp_path / "benchmarks.md"
    env = {"MEMBRANE_DATABASE_URL": database_url, "MEMBRANE_DATA_DIR": str(tmp_path), "COLUMNS": "200"}
    argv = ["bench", "list", "--records", "2000", "--rounds", "10", "--warmup", "1", "--page", "3"]
    out = CliRunner().invoke(app, [*argv, "--markdown", str(doc)], env=env)
    assert out.exit_code == 0, out.output
    for label in listing_report.LABELS.values():
        if "console" not in label and "{id}" not in label:
            assert label in out.output
    assert "first page and page 3" in out.output
    block = doc.read_text()
    assert listing_report.MARK_START in block and listing_report.MARK_END in block
    pages = {line.split(" | ")[1] for line in block.splitlines() if line.startswith("| bare SELECT")}
    assert pages == {"1", "3"}
    # measured where the API serves the console (RFC 10.8), else said why not
    assert "| GET /console/records/{id} |" in block or "Console: `GET /console/records/{id}`" in block
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 0
