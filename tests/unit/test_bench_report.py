"""The retrieve benchmark's report states both ratios to the bare query (RFC 14.1)."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from membrane_cli.bench import retrieve as bench


def test_report_gives_p50_and_p99_ratios() -> None:
    f = bench.Figures(
        bare=[1.0] * 98 + [2.0] * 2,
        hybrid=[4.0] * 98 + [5.0] * 2,
        expand=[6.0] * 98 + [9.0] * 2,
        overlap=[0.5],
        neighbours=[3],
    )
    block = bench.report(f, 100_000, "membrane bench retrieve", "test host")
    rows = {
        line.split(" | ")[0].lstrip("| "): line
        for line in block.splitlines()
        if line.startswith("| ") and "---" not in line
    }
    assert "p50 / bare p50 | p99 / bare p99" in rows["variant"]
    # p50 4.0 / 1.0 and p99 5.0 / 2.0; with expansion 6.0 / 1.0 and 9.0 / 2.0
    hybrid = rows["hybrid retrieve (vector + BM25 + entity, fused, hydrated)"]
    assert "| 4.00 ms | 5.00 ms | 4.0 | 2.5 |" in hybrid
    assert "| 6.00 ms | 9.00 ms | 6.0 | 4.5 |" in rows["hybrid retrieve + one-hop expansion"]
    assert block.startswith(bench.MARK_START) and block.endswith(bench.MARK_END)


def test_synthetic_records_carry_what_a_capture_writes() -> None:
    """Every synthetic episode has the provenance source a capture gives it, and most carry
    a tag or two, counted in its projected bytes and indexed text as a capture counts them
    (RFC 3.3, 8.3): hydration in the benchmark reads what it reads in production."""
    corpus = bench.Corpus(dim=8, clusters=3, scopes=2, seed=1)
    chunk = next(bench._chunks(corpus, 300, 300, datetime(2026, 1, 1, tzinfo=UTC)))
    episodes = [r for r in chunk["records"] if r[1] == "episodic"]
    assert len(episodes) == 300
    sources: dict[Any, int] = {}
    for rid, kind, ref, *_ in chunk["provenance"]:
        assert kind == "event" and ref == f"capture:{rid}"
        sources[rid] = sources.get(rid, 0) + 1
    assert sources == {r[0]: 1 for r in episodes}
    tags: dict[Any, list[str]] = {}
    for rid, tag in chunk["tags"]:
        tags.setdefault(rid, []).append(tag)
    assert 150 < len(tags) < 250 and all(len(t) <= 2 for t in tags.values())
    bodies = {rid: body for rid, _, body, *_ in chunk["payloads"]}
    for r in episodes:
        mine = tags.get(r[0], [])
        assert r[15] == len(bodies[r[0]]) + sum(len(t) + 4 for t in mine) + 512
        assert all(t in r[16].split() for t in mine)
