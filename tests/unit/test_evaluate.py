"""The evaluation's pure parts: both loaders, capture bodies, subsets, scoring (synthetic data only)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest
import typer

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


CHAT = {
    "name": {"speaker_1": "Ann", "speaker_2": "Bo"},
    "session_1_date_time": "29.12.2023, 22:42:04",
    "session_1": [
        {
            "clean_text": "Off to the lake.",
            "speaker": "Ann",
            "date_time": "29.12.2023, 22:42:04",
            "dia_id": "D1:1",
        },
        {
            "clean_text": "Look!",
            "speaker": "Bo",
            "date_time": "29.12.2023, 22:45:10",
            "dia_id": "D1:2",
            "img_file": ["x.jpg"],
            "blip_caption": "a frozen lake",
        },
    ],
    "session_2_date_time": "30.12.2023, 09:00:00",
    "session_2": [{"clean_text": "Back home.", "speaker": "Ann", "dia_id": "D1:3"}],
    "events_session_1": {},
    "qa": [
        {"question": "Where did Ann go?", "answer": "a lake", "evidence": ["D1:1-D1:2"], "category": 1},
        {"question": "When was she back?", "answer": "x", "evidence": ["D1:3.", "D4"], "category": 2},
        {"question": "Unknown category?", "answer": "x", "evidence": ["D1:1"], "category": 7},
    ],
}


def test_realtalk_loads_into_the_same_model(tmp_path: Path) -> None:
    (tmp_path / "Chat_10_C_D.json").write_text(json.dumps({**CHAT, "qa": []}))
    (tmp_path / "Chat_2_A_B.json").write_text(json.dumps(CHAT))
    second, tenth = evaluate.load_realtalk(tmp_path)  # in the order of the chat's number
    assert (second.sample_id, tenth.sample_id) == ("Chat_2_A_B", "Chat_10_C_D")
    assert [t.dia_id for t in second.turns] == ["D1:1", "D1:2", "D1:3"]  # as given, not by session
    assert [t.session for t in second.turns] == [1, 1, 2]
    assert second.turns[1].at == datetime(2023, 12, 29, 22, 45, 10, tzinfo=UTC)  # the turn's own time
    assert second.turns[2].at == second.turns[2].session_time == datetime(2023, 12, 30, 9, tzinfo=UTC)
    assert second.turns[1].text == "Look! [shares a photo: a frozen lake]"
    assert [(q.category, q.evidence) for q in second.questions] == [
        (1, ("D1:1", "D1:2")),
        (2, ("D1:3",)),
    ]
    dataset = evaluate.load_dataset("realtalk", tmp_path)
    assert dataset.categories == {1: "category 1", 2: "category 2", 3: "category 3"}


def test_evidence_forms() -> None:
    assert evaluate.evidence_ids(["D6:2-D6:4", "D7:1. D8:3", "D1:5;D1:6", "D9", "D:5"]) == (
        "D6:2",
        "D6:3",
        "D6:4",
        "D7:1",
        "D8:3",
        "D1:5",
        "D1:6",
    )
    assert evaluate.evidence_ids(["D5:8-D6:1", "D5:8"]) == ("D5:8", "D6:1")  # across sessions: the ends


def test_subset_keeps_questions_whose_evidence_lies_in_the_first_sessions(tmp_path: Path) -> None:
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(SAMPLE))
    dataset = evaluate.load_dataset("locomo", path)
    (conv,) = dataset.subset(conversations=1, sessions=1).convs
    assert [t.dia_id for t in conv.turns] == ["D1:1", "D1:2"]
    assert [q.question for q in conv.questions] == ["What is the puppy called?"]  # the other cites D2:1
    assert dataset.subset(sessions=2).convs == dataset.convs


def test_run_reports_every_ranking_per_category(tmp_path: Path) -> None:
    path = tmp_path / "sample.json"
    path.write_text(json.dumps(SAMPLE))
    run = evaluate.Run.of(evaluate.load_dataset("locomo", path), "t")
    assert run.scopes == {"conv-x": "locomo-conv-x-t"}
    run.ask("first", lambda scope, conv, q: ["D1:1", "D2:1"])
    run.ask("okapi", evaluate.okapi_search())
    figures = run.as_json()
    assert list(figures["rankings"]) == ["first", "okapi"]
    assert figures["rankings"]["first"]["4"] == {"recall@5": 1.0, "recall@10": 1.0, "mrr": 1.0, "n": 1}
    assert figures["rankings"]["first"]["overall"]["n"] == 2 and figures["questions"] == 2
    assert figures["rankings"]["okapi"]["4"]["mrr"] == 1.0  # "puppy" is in D1:1 only
    table = run.table()
    assert [c.header for c in table.columns][2:] == [
        "1 multi-hop\nn=1",
        "2 temporal\nn=0",
        "3 open-domain\nn=0",
        "4 single-hop\nn=1",
        "overall 1-4\nn=2",
    ]
    assert table.row_count == 2 * 3  # rankings x metrics


def test_realtalk_defaults_to_the_folder_beside_the_locomo_file(tmp_path: Path) -> None:
    locomo = tmp_path / "locomo-dev.json"
    locomo.write_text("[]")
    assert evaluate._sources(locomo, None, None) == {"locomo": locomo}  # no folder: LoCoMo only
    with pytest.raises(typer.BadParameter):
        evaluate._sources(locomo, None, "locomo,realtalk")  # asked for, not found
    (tmp_path / "realtalk").mkdir()
    assert evaluate._sources(locomo, None, None) == {"locomo": locomo, "realtalk": tmp_path / "realtalk"}
    assert evaluate._sources(None, tmp_path / "realtalk", "realtalk") == {"realtalk": tmp_path / "realtalk"}
    with pytest.raises(typer.BadParameter):
        evaluate._sources(locomo, None, "locomo,other")
