"""``membrane bench scale`` end to end at a tiny size (RFC 14.1)."""

from __future__ import annotations

from pathlib import Path

from typer.testing import CliRunner

from membrane_cli.bench import scale_report
from membrane_cli.main import app
from tests.support.sql import scalar


def test_bench_scale_prints_the_growth_of_every_figure(database_url: str, tmp_path: Path) -> None:
    """RFC 14.1: the run grows a store of its own, whatever MEMBRANE_DATABASE_URL names, through
    each size; the growth table has a row per figure with a cell per size and the ratio, and
    the docs block carries it with the disk by table and index, autovacuum and the projection."""
    doc = tmp_path / "benchmarks.md"
    doc.write_text("# Benchmarks\n\nkept\n")
    env = {"MEMBRANE_DATABASE_URL": database_url, "MEMBRANE_DATA_DIR": str(tmp_path), "COLUMNS": "240"}
    argv = ["bench", "scale", "--sizes", "2000,5000", "--scopes", "50", "--queries", "5", "--warmup", "1"]
    argv += ["--captures", "40", "--capture-batch", "20", "--rounds", "3", "--due", "10"]
    out = CliRunner().invoke(app, [*argv, "--markdown", str(doc)], env=env)
    assert out.exit_code == 0, out.output
    assert "membrane bench scale: growth" in out.output
    assert "vectors: " in out.output
    text = doc.read_text()
    assert text.startswith("# Benchmarks\n\nkept\n")
    block = text.split(scale_report.MARK_START, 1)[1].split(scale_report.MARK_END, 1)[0]
    rows = {
        line.split(" | ")[0].removeprefix("| "): line for line in block.splitlines() if line.startswith("| ")
    }
    assert rows["figure"].startswith("| figure | 2,000 | 5,000 | last / first | target |")
    for label, targeted in scale_report.LABELS.values():
        cells = rows[label][2:-2].split(" | ")
        assert len(cells) == 5, rows[label]
        assert cells[1] and cells[2], rows[label]
        if targeted:  # retrieval and the sweeps: the ratio, beside the target
            assert cells[3].endswith("x") and "≤ 1.5x" in cells[4], rows[label]
        else:
            assert "≤" not in cells[4], rows[label]
    assert "| memory_records |" in block and "| record_payloads |" in block
    assert "| memory_records_scoped_tsv | memory_records |" in block
    assert "| dead rows | autovacuums |" in block and "| memory_records |" in block.split("| dead rows")[1]
    assert "| 1,000,000,000 |" in block
    # the captures went through the real path and every one was committed
    assert rows[scale_report.LABELS["ingest"][0]].split(" | ")[1] != "0"
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 0
