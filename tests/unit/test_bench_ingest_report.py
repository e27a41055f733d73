"""The ingest benchmark's report: CPU per committed capture by process beside RSS (RFC 14.1)."""

from __future__ import annotations

from membrane_cli.bench import ingest


def test_report_gives_each_process_cpu_per_committed_capture_and_their_sum() -> None:
    res = ingest.Result(count=1000, accepted_s=0.1, committed_s=0.5, succeeded=1000, copy_s=0.01)
    res.rss_start = {"api": 100 * 1024, "worker-ingest": 90 * 1024}
    res.rss_end = {"api": 110 * 1024, "worker-ingest": 95 * 1024}
    res.cpu_us = {"api": 48.0, "worker-ingest": 171.4, "postgres": 150.0}
    block = ingest.report(res, "membrane bench ingest --count 1000", "test host")
    assert "| api | 100 MB | 110 MB | 48 µs |" in block
    assert "| worker-ingest | 90 MB | 95 MB | 171 µs |" in block
    assert "| postgres |  |  | 150 µs |" in block  # no RSS figure: the server is measured apart
    assert "| all | | | 369 µs |" in block
    # without CPU figures (a run against --url) the column stays empty
    res.cpu_us = {}
    block = ingest.report(res, "membrane bench ingest", "test host")
    assert "| api | 100 MB | 110 MB |  |" in block and "| all |" not in block
