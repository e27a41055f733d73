"""The retrieve benchmark's report states both ratios to the bare query (RFC 14.1)."""

from __future__ import annotations

from membrane_cli.bench import retrieve as bench


def test_report_gives_p50_and_p99_ratios() -> None:
    f = bench.Figures(bare=[1.0] * 98 + [2.0] * 2, hybrid=[4.0] * 98 + [5.0] * 2,
                      expand=[6.0] * 98 + [9.0] * 2, overlap=[0.5], neighbours=[3])
    block = bench.report(f, 100_000, "membrane bench retrieve", "test host")
    rows = {line.split(" | ")[0].lstrip("| "): line for line in block.splitlines()
            if line.startswith("| ") and "---" not in line}
    assert "p50 / bare p50 | p99 / bare p99" in rows["variant"]
    # p50 4.0 / 1.0 and p99 5.0 / 2.0; with expansion 6.0 / 1.0 and 9.0 / 2.0
    hybrid = rows["hybrid retrieve (vector + BM25 + entity, fused, hydrated)"]
    assert "| 4.00 ms | 5.00 ms | 4.0 | 2.5 |" in hybrid
    assert "| 6.00 ms | 9.00 ms | 6.0 | 4.5 |" in rows["hybrid retrieve + one-hop expansion"]
    assert block.startswith(bench.MARK_START) and block.endswith(bench.MARK_END)
