"""The LoCoMo evaluation's pure parts: loading, capture bodies, scoring (synthetic data only)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from membrane_cli import evaluate

SAMPLE = [
    {
        "sample_id": "conv-x",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            "session_1_date_time": "1:56 pm on 8 May, 2023",
            "session_1": [
                {"speaker": "Ann", "dia_id": "D1:1", "text": "I adopted a puppy called Rex."},
                {"speaker": "Bo", "dia_id": "D1:2", "text": "Lovely!", "blip_caption": "a small dog"},
            ],
            "session_2_date_time": "10:02 am on 9 June, 2023",
            "session_2": [{"speaker": "Ann", "dia_id": "D2:1", "text": "Rex chewed my shoes."}],
        },
        "qa": [
            {"question": "What is the puppy called?", "answer": "Rex", "evidence": ["D1:1"], "category": 4},
            {"question": "What did Rex do?", "answer": "x", "evidence": ["D2:1; D1:1"], "category": 1},
            {"question": "Adversarial?", "adversarial_answer": "y", "evidence": ["D1:2"], "category": 5},
        ],
    }
]


def test_load_keeps_turn_identity_time_and_drops_category_5(tmp_path: Path) -> None:
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(SAMPLE))
    (conv,) = evaluate.load_locomo(path)
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2", "D2:1"]
    assert conv.turns[0].session_time == datetime(2023, 5, 8, 13, 56, tzinfo=UTC)
    assert conv.turns[1].at > conv.turns[0].at  # turn order survives as occurred_at
    assert conv.turns[1].text.endswith("[shares a photo: a small dog]")
    assert [q.category for q in conv.questions] == [4, 1]
    assert conv.questions[1].evidence == ("D2:1", "D1:1")
    body = evaluate.capture_body(conv.turns[2], "scope-1", conv.sample_id)
    assert body["content"]["text"] == "Ann: Rex chewed my shoes."
    assert body["metadata"]["dia_id"] == "D2:1" and body["metadata"]["speaker"] == "Ann"
    assert body["occurred_at"].startswith("2023-06-09T10:02")
    assert body["scope"] == "scope-1"


def test_session_time_formats() -> None:
    assert evaluate.parse_session_time("7:05 PM on 20 October, 2023") == datetime(
        2023, 10, 20, 19, 5, tzinfo=UTC
    )
    with pytest.raises(ValueError):
        evaluate.parse_session_time("yesterday")


def test_tally_recall_and_mrr() -> None:
    t = evaluate.Tally()
    t.add(4, ["D9", "D1", "D2"], ["D1", "D2"])  # both in top 5, first hit at rank 2
    t.add(4, ["D9"] * 5 + ["D3"], ["D3"])  # found at rank 6: recall@10 only
    t.add(1, [], ["D1"])  # nothing found
    r5, r10, mrr = t.row((4,))
    assert (r5, r10) == (0.5, 1.0) and mrr == pytest.approx((1 / 2 + 1 / 6) / 2)
    assert t.row((1, 4))[1] == pytest.approx(2 / 3)


def test_okapi_ranks_the_rare_term_first() -> None:
    turns = [
        evaluate.Turn(
            f"D1:{i}", "Ann", text, 1, datetime(2023, 1, 1, tzinfo=UTC), datetime(2023, 1, 1, tzinfo=UTC)
        )
        for i, text in enumerate(["the weather is nice", "my puppy Rex", "nice nice weather"])
    ]
    assert evaluate.Okapi(turns).search("what is the puppy called", 2) == ["D1:1"]
