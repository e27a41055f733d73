"""Adjacent episodes (RFC 8.2.1): the best episodes lift the episodes next to them in time,
only those the caller may see, never past their source or a fact; a hidden episode neither
enters nor takes a place."""

from __future__ import annotations

import uuid
from typing import Any

import psycopg
import pytest

from membrane_core import Membrane
from membrane_core.testing import FakeClock
from tests.support.records import CALLER


def episode(m: Membrane, clock: FakeClock, text: str, **fields: Any) -> uuid.UUID:
    """One event capture a minute after the previous one; its episode's id."""
    clock.advance(seconds=60)
    body = {"source_kind": "event", "scope": "a", "sensitivity": "low", "content": {"text": text}, **fields}
    return m.capture(body).record_ids[0]


def conversation(m: Membrane, clock: FakeClock, middle: dict[str, Any] | None = None) -> dict[str, uuid.UUID]:
    """Six turns in time order; only the third names the comet."""
    turns = {
        "far_before": episode(m, clock, "the kettle is broken again"),
        "before": episode(m, clock, "what did you see from the roof last night"),
        "hit": episode(m, clock, "the Hale-Bopp comet, bright over the harbour"),
    }
    turns["after"] = episode(m, clock, "it looked close enough to touch", **(middle or {}))
    turns["far_after"] = episode(m, clock, "we stayed up until three")
    turns["farther"] = episode(m, clock, "groceries on thursday")
    return turns


def ids(m: Membrane, query: dict[str, Any], policy: Any = CALLER) -> list[uuid.UUID]:
    got = m.retrieve({"scopes": ["a"], "memory_types": ["episodic"], **query}, policy)
    return [r.id for r in got.records]


def test_the_best_episode_brings_its_neighbours_in_time(membrane: Membrane, clock: FakeClock) -> None:
    t = conversation(membrane, clock)
    got = ids(membrane, {"query": "comet harbour", "limit": 5})
    assert got[0] == t["hit"]  # positive control: the match ranks first
    assert {t["before"], t["after"], t["far_before"], t["far_after"]} <= set(got)
    assert t["farther"] not in got  # three turns away: beyond the reach of two
    membrane.retriever.adjacent = False
    assert ids(membrane, {"query": "comet harbour", "limit": 5}) == [t["hit"]]


def test_a_lift_decays_with_distance(membrane: Membrane, clock: FakeClock) -> None:
    t = conversation(membrane, clock)
    got = ids(membrane, {"query": "comet harbour", "limit": 5})
    assert got.index(t["before"]) < got.index(t["far_before"])
    assert got.index(t["after"]) < got.index(t["far_after"])


def test_no_query_lifts_nothing(membrane: Membrane, clock: FakeClock) -> None:
    conversation(membrane, clock)
    query = {"scopes": ["a"], "limit": 4}
    listed = membrane.retrieve(query, CALLER).records
    membrane.retriever.adjacent = False
    alone = membrane.retrieve(query, CALLER).records
    assert len(listed) == 4  # control: the salience arm lists episodes
    assert [(r.id, r.score) for r in listed] == [(r.id, r.score) for r in alone]
    # with a query the same switch changes the answer (the first test shows how)
    membrane.retriever.adjacent = True
    assert len(ids(membrane, {"query": "comet harbour", "limit": 4})) > 1


def test_a_hidden_neighbour_neither_enters_nor_takes_a_place(membrane: Membrane, clock: FakeClock) -> None:
    # the turn after the match is two levels above the caller's maximum: invisible
    t = conversation(membrane, clock, middle={"sensitivity": "high"})
    got = ids(membrane, {"query": "comet harbour", "limit": 6})
    assert t["hit"] == got[0] and t["far_after"] in got  # control: the next visible turn enters
    assert t["after"] not in got
    # the hidden turn is skipped, not counted: the turn three captures on is two visible turns on
    assert t["farther"] in got


def test_a_retracted_neighbour_does_not_enter(
    membrane: Membrane, clock: FakeClock, database_url: str
) -> None:
    t = conversation(membrane, clock)
    # episodes are immutable to revisions (RFC 4.1): the status is set as a store would hold it
    with psycopg.connect(database_url) as conn:
        conn.execute(
            "UPDATE memory_records SET status = 'retracted', retracted_at = %s WHERE id = %s",
            (clock.now, t["before"]),
        )
    got = ids(membrane, {"query": "comet harbour", "limit": 6})
    assert t["hit"] == got[0] and t["after"] in got  # control
    assert t["before"] not in got
    assert t["far_before"] in got


def test_neighbours_stay_in_the_scope(membrane: Membrane, clock: FakeClock) -> None:
    t = conversation(membrane, clock)
    clock.advance(seconds=1)
    other = episode(membrane, clock, "a note in another scope", scope="b")
    wide = CALLER.__class__(
        read_scopes=frozenset({"a", "b"}), max_sensitivity=CALLER.max_sensitivity, actor="caller"
    )
    got = ids(membrane, {"query": "comet harbour", "limit": 10, "scopes": ["a", "b"]}, wide)
    assert t["hit"] == got[0] and t["after"] in got  # control
    assert other not in got


def scores(m: Membrane, query: dict[str, Any], types: list[str] | None = None) -> dict[uuid.UUID, float]:
    body = {"scopes": ["a"], **query, **({"memory_types": types} if types else {})}
    return {r.id: r.score or 0.0 for r in m.retrieve(body, CALLER).records}


def scene(m: Membrane, clock: FakeClock, near_text: str) -> tuple[uuid.UUID, uuid.UUID, uuid.UUID]:
    """Weak matches far away, then a strong match, its neighbour ``near_text`` and a turn no
    arm finds: (source, near, entered)."""
    for i in range(4):  # weaker matches, far from the pair: the pool's mean falls below it
        episode(m, clock, f"harbour fees rose, notice {i}")
    for text in ("the kettle is broken again", "the bus was late", "lunch at noon"):
        episode(m, clock, text)
    source = episode(m, clock, "the comet over the harbour")
    near = episode(m, clock, near_text)
    return source, near, episode(m, clock, "groceries on thursday")


QUERY = {"query": "comet harbour", "limit": 10}


def test_a_lifted_episode_never_passes_its_source(membrane: Membrane, clock: FakeClock) -> None:
    source, near, entered = scene(membrane, clock, "a comet, over the harbour at night")
    membrane.retriever.adjacent = False
    alone = scores(membrane, QUERY, ["episodic"])
    assert entered not in alone  # the arms find the pair, not the turn after it
    # the premise: the neighbour's own score plus its share would pass the source's
    assert 0 < alone[near] <= alone[source] < alone[near] + 0.5 * alone[source]
    membrane.retriever.adjacent = True
    lifted = scores(membrane, QUERY, ["episodic"])
    assert lifted[near] == pytest.approx(alone[source])  # lifted up to its source, no further
    order = list(lifted)
    assert order.index(source) < order.index(near)  # and after it on the tie
    # the turn after the pair enters at the best share of its sources (one turn from one, two
    # from the other)
    assert lifted[entered] == pytest.approx(max(0.5 * alone[near], 0.25 * alone[source]))


def test_a_lifted_episode_never_passes_a_fact_above_it(membrane: Membrane, clock: FakeClock) -> None:
    source, near, _ = scene(membrane, clock, "a boat in the harbour at night")
    fact = membrane.capture(
        {
            "source_kind": "observation",
            "scope": "a",
            "sensitivity": "low",
            "content": {"subject": "ferry", "predicate": "docks_at", "object": "harbour"},
        }
    ).record_ids[-1]
    membrane.retriever.adjacent = False
    plain = scores(membrane, QUERY)
    assert fact in plain  # control: the fact is found
    # the premise: the fact ranks between the neighbour and the source, and the neighbour's
    # share would carry it past the fact
    assert plain[near] < plain[fact] < min(plain[source], plain[near] + 0.5 * plain[source])
    membrane.retriever.adjacent = True
    mixed = scores(membrane, QUERY)
    assert mixed[near] == pytest.approx(plain[fact])  # lifted up to the fact, no further
    order = list(mixed)
    assert order.index(fact) < order.index(near)  # and after it on the tie
    assert mixed[fact] == plain[fact]


def test_nothing_is_followed_from_or_to_a_redacted_episode(membrane: Membrane, clock: FakeClock) -> None:
    # one level above the caller's maximum: shown redacted, like a redacted root (RFC 8.4)
    t = conversation(membrane, clock, middle={"sensitivity": "medium"})
    got = membrane.retrieve({"scopes": ["a"], "query": "comet harbour", "limit": 6}, CALLER)
    found = [r.id for r in got.records]
    assert t["hit"] == found[0] and t["before"] in found  # control: the lift runs
    assert t["after"] not in found  # a redacted neighbour is skipped ...
    assert t["farther"] in found  # ... and takes no place
    # a redacted source lifts nothing
    clock.advance(hours=1)
    episode(membrane, clock, "a quiet evening")
    source = episode(membrane, clock, "zodiacal light over the bay", sensitivity="medium")
    after = episode(membrane, clock, "we watched until dawn")
    got = membrane.retrieve({"scopes": ["a"], "query": "zodiacal light", "limit": 6}, CALLER)
    assert [r.id for r in got.records] == [source] and got.records[0].redacted
    assert after not in [r.id for r in got.records]
    wide = membrane.retrieve({"scopes": ["a"], "query": "zodiacal light", "limit": 6})
    assert after in [r.id for r in wide.records]  # control: the caller who sees it in full
