"""``membrane bench retrieve --proposed-share`` end to end at a tiny size (RFC 5.7, 14.1)."""

from __future__ import annotations

import re
from pathlib import Path

from typer.testing import CliRunner

from membrane_cli.bench import retrieve as bench
from membrane_cli.main import app


def test_bench_retrieve_measures_the_store_with_a_share_proposed(tmp_path: Path) -> None:
    """RFC 5.7, 14.1: in the same run, the hybrid retrieve on the store with none proposed and
    on its copy with 10 % of the records proposed, side by side with the ratio of their p99s,
    after a check that the copy hides its proposed records and shows them when asked."""
    doc = tmp_path / "benchmarks.md"
    argv = ["bench", "retrieve", "--size", "2000", "--queries", "10", "--warmup", "2", "--dim", "8"]
    out = CliRunner().invoke(
        app, [*argv, "--proposed-share", "0.1", "--markdown", str(doc)], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    assert "with 10% of the store proposed (RFC 5.7)" in out.output
    # 2,000 episodes and 200 x 20 entities; a tenth of them proposed, hidden, shown when asked
    assert "600 of its 6,000 records proposed" in out.output
    found = re.search(r"with include_proposed: true, (\d+) of (\d+) proposed", out.output)
    assert found and 0 < int(found[1]) <= int(found[2]), out.output
    block = doc.read_text()
    assert block.count(bench.MARK_START) == 1 and bench.MARK_END in block
    assert "--proposed-share 0.1" in block and "none proposed;" in block
    rows = {
        tuple(cell.strip() for cell in line.split("|")[1:3]): [c.strip() for c in line.split("|")[3:-1]]
        for line in block.splitlines()
        if line.startswith(("| none proposed |", "| 10% proposed |"))
    }
    assert set(rows) == {
        (store, label) for store in ("none proposed", "10% proposed") for _, label in bench.PROPOSED_VARIANTS
    }
    base = rows[("none proposed", "hybrid retrieve")]
    copy = rows[("10% proposed", "hybrid retrieve")]
    assert base[2:] == ["1.00x", "baseline"] and copy[3] == "≤ 1.1x"
    p99 = [float(r[1].removesuffix(" ms")) for r in (base, copy)]
    assert abs(float(copy[2].removesuffix("x")) - p99[1] / p99[0]) < 0.01  # the p99s as printed


def test_bench_retrieve_replica_measures_both_servers_under_load(tmp_path: Path) -> None:
    """RFC 13.2, 14.1: every query through a real streaming replica and through the primary,
    under a capture load, with the replica's lag; only replica-served answers count as such."""
    from membrane_cli.bench import replica

    doc = tmp_path / "benchmarks.md"
    argv = ["bench", "retrieve", "--replica", "--size", "2000", "--queries", "20", "--warmup", "2"]
    out = CliRunner().invoke(
        app, [*argv, "--dim", "8", "--load-rate", "300", "--markdown", str(doc)], env={"COLUMNS": "200"}
    )
    assert out.exit_code == 0, out.output
    block = doc.read_text()
    assert block.count(replica.MARK_START) == 1 and replica.MARK_END in block
    rows = {
        line.split("|")[1].strip(): line.split("|")[2:-1] for line in block.splitlines() if "| 20 |" in line
    }
    # the primary ran every measured query; the replica every one it did not hand back
    assert "primary" in rows, block
    fell_back = int(re.search(r"fell back to the primary: (\d+)", block)[1])  # type: ignore[index]
    served = int(rows["replica"][0]) if "replica" in rows else 0
    assert served + fell_back == 20 and served > 0, block
    assert re.search(r"load of [\d,]+ committed captures/s \(([\d,]+) in", block)
