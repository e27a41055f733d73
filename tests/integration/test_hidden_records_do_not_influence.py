"""Records a caller may not see must not change what it sees (RFC 8.1.3, 8.4).

``test_hidden_records_never_leak.py`` checks that hidden records never appear; these check
that they do not act at a distance either: crowd a visible neighbour out of a hop's window, or make an
entity look too common to rank. Each test first shows the visible record coming back
(a positive control), then plants hidden records and asks again.
"""

from __future__ import annotations

import uuid

import pytest

from membrane_core import Membrane
from membrane_core.storage import retrieval
from tests.support.records import CALLER, capture, link


def hyper_mentions(m: Membrane, name: str, n: int) -> None:
    """``n`` episodes two levels above the caller's maximum, each mentioning ``name``."""
    m.capture_many(
        [
            {
                "source_kind": "event",
                "scope": "a",
                "sensitivity": "hyper",
                "content": {"text": f"sealed memo {i}", "entities": [name]},
            }
            for i in range(n)
        ]
    )


def neighbour_ids(m: Membrane, query: dict[str, object]) -> list[uuid.UUID]:
    got = m.retrieve(query, CALLER)
    assert all(r.sensitivity.value in ("low", "medium") for r in [*got.records, *got.neighbors])
    return [r.id for r in got.neighbors]


def test_hidden_edges_do_not_crowd_out_a_visible_neighbour(
    membrane: Membrane,
    database_url: str,
) -> None:
    root = capture(membrane, "zebracorn root note")
    visible = capture(membrane, "plain neighbour note")
    link(database_url, (root, "zz", visible))
    query = {"query": "zebracorn", "limit": 1, "expand": {"hops": 1, "max_edges": 1}}
    assert neighbour_ids(membrane, query) == [visible]  # control
    # max_edges 1: three edges a node and direction are read; these sort first
    hidden = [capture(membrane, f"sealed {i}", sensitivity="high") for i in range(3)]
    elsewhere = [capture(membrane, f"elsewhere {i}", scope="b") for i in range(3)]
    link(database_url, *((root, "aa", h) for h in hidden + elsewhere))
    assert neighbour_ids(membrane, query) == [visible]


def test_hidden_mentions_do_not_crowd_out_a_visible_one(membrane: Membrane) -> None:
    first = capture(membrane, "kickoff with Zorblat", entities=["Zorblat"])
    hyper_mentions(membrane, "Zorblat", 201)  # the default expansion reads 201 a direction
    last = capture(membrane, "follow-up with Zorblat", entities=["Zorblat"])
    query = {"query": "Zorblat", "memory_types": ["entity"], "limit": 1, "expand": {"hops": 1}}
    got = neighbour_ids(membrane, query)
    assert first in got  # control: the entity was expanded
    assert last in got


def test_hidden_links_do_not_make_an_entity_too_common(
    membrane: Membrane,
    database_url: str,
) -> None:
    capture(membrane, "we met her yesterday at the harbour", entities=["Zorblat"])
    entity = next(
        r.id for r in membrane.retrieve({"query": "Zorblat", "memory_types": ["entity"]}, CALLER).records
    )
    note = capture(membrane, "minutes of the quarterly harbour review")  # reached by the link only
    link(database_url, (note, "mentions", entity))
    query = {"query": "Zorblat", "limit": 20}
    before = membrane.retrieve(query, CALLER)
    assert note in {r.id for r in before.records}  # control: the entity arm reaches it
    assert before.diagnostics.arms.entity >= 3
    hyper_mentions(membrane, "Zorblat", 25)  # 25 more links: over the fan-out cap if counted
    after = membrane.retrieve(query, CALLER)
    assert after.diagnostics.arms.entity == before.diagnostics.arms.entity
    assert note in {r.id for r in after.records}


def test_a_hub_is_too_common_for_every_caller(
    membrane: Membrane,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """RFC 8.1.3: past LINK_SCAN links in a direction an entity is a hub for everyone, so
    counting what a caller may see never reads every link of it."""
    monkeypatch.setattr(retrieval, "LINK_SCAN", 3)
    capture(membrane, "kickoff with Zorblat", entities=["Zorblat"])
    hyper_mentions(membrane, "Zorblat", 2)
    query = {"query": "Zorblat", "limit": 20}
    assert membrane.retrieve(query, CALLER).diagnostics.arms.entity == 2  # control: 3 links
    hyper_mentions(membrane, "Zorblat", 1)
    assert membrane.retrieve(query, CALLER).diagnostics.arms.entity == 0
