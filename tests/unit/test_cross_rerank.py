"""The cross-encoder's re-ranking of a pool (RFC 8.2.4), on hand-made rows: what the model
reads, where active, contested and unfitting rows end up, and that a failing model leaves
the order as it was."""

from __future__ import annotations

import math
import uuid
from collections.abc import Sequence
from datetime import UTC, datetime

import pytest

from membrane_core.retrieval.retriever import Retriever
from membrane_core.storage.retrieval import Ranked, Stored

NOW = datetime(2026, 1, 1, tzinfo=UTC)


class Scripted:
    """A reranker that scores each text by a table and records what it was given."""

    name = "scripted"

    def __init__(self, table: dict[str, float] | None = None, fail: Exception | None = None) -> None:
        self.table = table or {}
        self.fail = fail
        self.seen: list[list[str]] = []

    def score(self, query: str, texts: Sequence[str]) -> list[float]:
        self.seen.append(list(texts))
        if self.fail is not None:
            raise self.fail
        return [self.table.get(t, 0.0) for t in texts]


def row(
    text: str, score: float, *, status: str = "active", fits: bool = True, sealed: bool = False
) -> Ranked:
    rid = uuid.uuid4()
    payload = {"kind": "episodic", "source_kind": "event", "text": text}
    record = Stored(
        rid,
        "episodic",
        "s",
        "low",
        status,
        NOW,
        None,
        None,
        None,
        {
            "payload": None if sealed else payload,
            "sealed": b"x" if sealed else None,
            "summary": None,
            "tags": [],
        },
    )
    return Ranked(0, score, status, None, None, None, 1.0, 10, 10, fits, record if fits else None)


def pool() -> list[Ranked]:
    # the fused order (active above contested, as the statement orders them): a, b, d
    # (sealed), c (contested), e (past the byte budget), f (past the pool)
    return [
        row("a", 5.0),
        row("b", 4.0),
        row("d", 3.5, sealed=True),
        row("c", 3.0, status="contested"),
        row("e", 2.0, fits=False),
        row("f", 1.0),
    ]


def texts(ranked: list[Ranked]) -> list[str | None]:
    out = []
    for r in ranked:
        payload = r.record.row["payload"] if r.record else None
        out.append(payload["text"] if payload else ("sealed" if r.record else None))
    return out


def retriever(reranker: Scripted, pool_size: int = 5) -> Retriever:
    return Retriever(None, clock=lambda: NOW, reranker=reranker, rerank_pool=pool_size, rerank_weight=100.0)  # type: ignore[arg-type]


def test_it_reads_the_readable_rows_of_the_pool_only() -> None:
    model = Scripted({"b": 9.0})
    got, state = retriever(model)._cross(model, pool(), "q", limit=10)
    assert state == "used"
    # a sealed row (d), a row past the budget (e) and one past the pool (f) are not read
    assert [sorted(s) for s in model.seen] == [["a", "b", "c"]]
    # control: the model's best leads; the sealed row counts as the read rows' average, so it
    # stays above those the model scored below it
    assert texts(got) == ["b", "sealed", "a", "c", None, "f"]


def test_contested_stays_below_active_and_the_rest_keeps_its_order() -> None:
    model = Scripted({"c": 50.0, "a": -1.0, "b": 0.0})  # the contested row scores best by far
    got, _ = retriever(model)._cross(model, pool(), "q", limit=10)
    assert texts(got) == ["sealed", "b", "a", "c", None, "f"]
    assert [r.ord for r in got] == [1, 2, 3, 4, 5, 6]
    active = [r.score for r in got[:3]]
    assert active == sorted(active, reverse=True)  # the returned scores order the active rows


def test_the_cut_keeps_the_limit() -> None:
    model = Scripted({"b": 9.0})
    got, _ = retriever(model)._cross(model, pool(), "q", limit=2)
    assert texts(got) == ["b", "sealed"]
    assert [r.ord for r in got] == [1, 2]


@pytest.mark.parametrize(
    "model",
    [
        Scripted(fail=RuntimeError("boom")),
        Scripted({"a": math.nan, "b": 1.0}),
        Scripted({"a": math.inf}),
    ],
    ids=["raises", "nan", "inf"],
)
def test_a_failing_model_leaves_the_order(model: Scripted) -> None:
    before = pool()
    got, state = retriever(model)._cross(model, before, "q", limit=10)
    assert state == "provider_error"
    assert model.seen, "the model was asked"
    assert texts(got) == ["a", "b", "sealed", "c", None, "f"]
    assert [r.score for r in got] == [r.score for r in before]


def test_a_wrong_number_of_scores_leaves_the_order() -> None:
    class Short(Scripted):
        def score(self, query: str, texts: Sequence[str]) -> list[float]:
            return [1.0]

    model = Short()
    got, state = retriever(model)._cross(model, pool(), "q", limit=10)
    assert state == "provider_error"
    assert texts(got)[:3] == ["a", "b", "sealed"]


def test_a_pool_it_cannot_read_says_so() -> None:
    model = Scripted()
    sealed = [row("x", 2.0, sealed=True), row("y", 1.0, sealed=True)]
    got, state = retriever(model)._cross(model, sealed, "q", limit=10)
    assert state == "no_text"
    assert model.seen == []
    assert len(got) == 2
