"""Dates in the query (RFC 8.2.2): a question naming a day or a month prefers what happened
then; a date that bounds, or none, leaves the ranking as it was; a window brings in nothing."""

from __future__ import annotations

import uuid

import pytest

from membrane_core import Membrane
from membrane_core.retrieval import fusion
from membrane_core.testing import FakeClock
from tests.support.records import CALLER


def episode(m: Membrane, text: str, at: str) -> uuid.UUID:
    body = {
        "source_kind": "event",
        "scope": "a",
        "sensitivity": "low",
        "occurred_at": at,
        "content": {"text": text},
    }
    return m.capture(body).record_ids[0]


def ranked(m: Membrane, query: str) -> list[uuid.UUID]:
    got = m.retrieve({"scopes": ["a"], "memory_types": ["episodic"], "query": query}, CALLER)
    return [r.id for r in got.records]


def diary(m: Membrane) -> dict[str, uuid.UUID]:
    """The same call on two days, a weaker one on a third, and a pool of other days."""
    for i in range(15):
        episode(m, f"walked the dog around the lake, lap {i}", f"2024-03-{i + 1:02d}T08:00:00+00:00")
    return {
        "jan3": episode(m, "called my sister to apologise", "2024-01-03T18:00:00+00:00"),
        "feb": episode(m, "called my sister to apologise", "2024-02-11T12:00:00+00:00"),
        "jan5": episode(m, "phoned my sister", "2024-01-05T09:30:00+00:00"),
        "bread": episode(m, "bought bread and coffee", "2024-01-05T10:00:00+00:00"),
    }


def test_a_named_day_raises_what_happened_on_it(membrane: Membrane, clock: FakeClock) -> None:
    d = diary(membrane)
    question = "did I call my sister to apologise"
    # positive control: without a date, the two equal matches lead
    assert set(ranked(membrane, question)[:2]) == {d["jan3"], d["feb"]}
    # each way: the day named decides between them
    assert ranked(membrane, f"{question} on 3 Jan 2024")[0] == d["jan3"]
    assert ranked(membrane, f"{question} on 2024-02-11")[0] == d["feb"]
    # the windows read are reported (RFC 8.6)
    got = membrane.retrieve({"scopes": ["a"], "query": f"{question} on 3 Jan 2024"}, CALLER)
    assert [w.model_dump() for w in got.diagnostics.dates] == [
        {"start": "2024-01-03T00:00:00+00:00", "end": "2024-01-04T00:00:00+00:00"}
    ]
    assert membrane.retrieve({"scopes": ["a"], "query": question}, CALLER).diagnostics.dates == []
    # a weaker match on the day named rises
    plain = ranked(membrane, f"{question} on a day")
    dated = ranked(membrane, f"{question} on 05.01.2024")
    assert dated.index(d["jan5"]) < plain.index(d["jan5"])


def test_a_named_month_raises_its_days(membrane: Membrane, clock: FakeClock) -> None:
    d = diary(membrane)
    assert ranked(membrane, "calls to my sister to apologise in January 2024")[0] == d["jan3"]
    got = ranked(membrane, "calls to my sister to apologise in February 2024")
    assert got[0] == d["feb"]
    assert d["jan3"] in got  # the other day is still found, below it


def test_a_bound_leaves_the_ranking_alone(
    membrane: Membrane, clock: FakeClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    d = diary(membrane)
    bound = "did I call my sister to apologise before 2024-02-11"
    named = "did I call my sister to apologise on 2024-02-11"
    with_prior = ranked(membrane, bound), ranked(membrane, named)
    monkeypatch.setattr(fusion, "WHEN_PRIOR", 0.0)
    without_prior = ranked(membrane, bound), ranked(membrane, named)
    assert d["feb"] in with_prior[0]  # the bound question finds the calls ...
    assert with_prior[0] == without_prior[0]  # ... ranked as without the prior: no window
    assert with_prior[1][0] == d["feb"]  # positive control: the day named is raised ...
    assert set(without_prior[1][:2]) == {d["jan3"], d["feb"]}  # ... from a tie without the prior


def test_a_window_adds_no_candidates(membrane: Membrane, clock: FakeClock) -> None:
    d = diary(membrane)
    # the bread shares jan5's day but no word with the question; with the adjacent lift
    # (RFC 8.2.1) off, only the arms bring candidates
    membrane.retriever.adjacent = False
    got = ranked(membrane, "phoned my sister on 5 Jan 2024")
    assert got[0] == d["jan5"]  # positive control: the day's match is found and leads
    assert d["bread"] not in got
