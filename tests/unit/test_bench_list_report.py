"""The list benchmark's report: each page against the bare read of its content (and of its
columns and payload), the console against JSON (RFC 14.1)."""

from __future__ import annotations

from membrane_cli.bench import listing_report as report


def test_ratios_are_p99_to_the_bare_reads_of_the_same_page_and_p50_to_json() -> None:
    f = report.Figures(records=1000, scopes=20, rounds=100, warmup=0, deep=100, console=True)
    for page, scale in ((1, 1.0), (100, 2.0)):
        f.times[("ids", page)] = [0.5 * scale] * 100
        f.times[("rows", page)] = [1.0 * scale] * 98 + [2.0 * scale] * 2
        f.times[("content", page)] = [1.5 * scale] * 98 + [2.5 * scale] * 2
        f.times[("list", page)] = [3.0 * scale] * 98 + [5.0 * scale] * 2
        f.times[("http", page)] = [4.0 * scale] * 100
    f.times[("get", None)] = [2.0] * 100
    f.times[("console", None)] = [5.0] * 100
    lists, pages = report.rows(f)
    by = {(r.case, r.page): r for r in lists}
    # p99 5.0 / 2.5 (content) and 5.0 / 2.0 (columns and payload) on both pages: each page
    # against its own baselines
    for page in ("1", "100"):
        assert by[(report.LABELS["list"], page)].ratio == "2.0x"
        assert by[(report.LABELS["list"], page)].ratio_rows == "2.5x"
    assert by[(report.LABELS["content"], "100")].target == "baseline"
    assert by[(report.LABELS["rows"], "100")].target == ""
    assert [r.ratio for r in pages] == ["1.0x", "2.5x"]
    block = report.report(f, "membrane bench list")
    assert block.startswith(report.MARK_START) and block.endswith(report.MARK_END)
    assert "| GET /console/records/{id} | 5.00 ms | 5.00 ms | 2.5x | p50 ≤ 3x JSON |" in block
