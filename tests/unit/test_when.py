"""Calendar dates in a query as windows of time (RFC 8.2.2)."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from membrane_core.retrieval.when import MAX_WINDOWS, windows


def _days(query: str) -> list[tuple[str, str]]:
    return [(a.date().isoformat(), b.date().isoformat()) for a, b in windows(query)]


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("what did she cook on 21.01.2024?", [("2024-01-21", "2024-01-22")]),
        ("and on 9.1.24", [("2024-01-09", "2024-01-10")]),
        ("on 1/21/2024", [("2024-01-21", "2024-01-22")]),
        ("on 21/1/2024, when the first number cannot be a month", [("2024-01-21", "2024-01-22")]),
        ("on 2/3/2024, month first", [("2024-02-03", "2024-02-04")]),
        ("the log of 2024-01-21", [("2024-01-21", "2024-01-22")]),
        ("calls on 3 Jan 2024", [("2024-01-03", "2024-01-04")]),
        ("the 3rd of March, 2024", [("2024-03-03", "2024-03-04")]),
        ("naps on January 6 2024", [("2024-01-06", "2024-01-07")]),
        ("shown on October 13th, 2023", [("2023-10-13", "2023-10-14")]),
        ("what was painted in July 2023", [("2023-07-01", "2023-08-01")]),
        ("plans for Dec. 2023", [("2023-12-01", "2024-01-01")]),
    ],
)
def test_dates_become_windows(query: str, expected: list[tuple[str, str]]) -> None:
    assert _days(query) == expected


def test_windows_are_utc_and_end_exclusive() -> None:
    ((start, end),) = windows("on 29 Feb 2024")
    assert start == datetime(2024, 2, 29, tzinfo=UTC)
    assert end == datetime(2024, 3, 1, tzinfo=UTC)


def test_a_bound_is_not_the_time_asked_about() -> None:
    # the date after "before" is left out; the one the question is about, in the same
    # query, is kept
    assert _days("before December 23rd, 2023, what did she do on 2 Jan 2024?") == [
        ("2024-01-02", "2024-01-03")
    ]
    assert _days("after 1.1.2024") == []
    assert _days("Before 1/2/2024, or By 2024-01-05?") == []
    assert _days("since March 2023") == []
    assert _days("prior to 2024-01-05") == []


@pytest.mark.parametrize(
    "query",
    [
        None,
        "",
        "what happened in 2023",  # a year alone is no window
        "on 3 Jan",  # a date without a year is ambiguous
        "on 31.02.2024",  # no such day
        "on 13/13/2024",  # no such month either way
        "version 1.2.3 of the API",
    ],
)
def test_no_window(query: str | None) -> None:
    assert windows(query) == []


def test_repeats_are_dropped_and_the_count_bounded() -> None:
    assert _days("in May 2023 and again in may 2023") == [("2023-05-01", "2023-06-01")]
    many = " ".join(f"on {d} Jan 2024" for d in range(1, 10))
    assert len(windows(many)) == MAX_WINDOWS
    assert _days(many)[0] == ("2024-01-01", "2024-01-02")
