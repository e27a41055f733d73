"""Calendar dates named in a query, as windows of time (RFC 8.2.2).

A question such as "what did Paola cook on 21.01.2024?" or "what happened in July 2023?"
names the day or month its answer happened in. :func:`windows` finds such dates and returns
each as a half-open UTC window ``[start, end)``: a day for a full date, a month for a month
and year. Only dates with a year count, and only ones that say "at that time": a date after
"before", "after", "since", "until", "by" or "prior to" names a bound, not the time, and is
left out. Numeric dates read day first with dots (``21.01.2024``, as in most of Europe),
month first with slashes (``1/21/2024``) unless the first number cannot be a month, and
year first with dashes (``2024-01-21``).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

#: RFC 8.2.2: at most this many windows per query (the rest are ignored)
MAX_WINDOWS = 4

_MONTHS = {
    name: i + 1
    for i, names in enumerate(
        (
            ("january", "jan"),
            ("february", "feb"),
            ("march", "mar"),
            ("april", "apr"),
            ("may",),
            ("june", "jun"),
            ("july", "jul"),
            ("august", "aug"),
            ("september", "sep", "sept"),
            ("october", "oct"),
            ("november", "nov"),
            ("december", "dec"),
        )
    )
    for name in names
}
_MONTH = r"(?P<{g}>" + "|".join(sorted(_MONTHS, key=len, reverse=True)) + r")\.?"
_DAY = r"(?P<{g}>[0-3]?\d)(?:st|nd|rd|th)?"
_YEAR = r"(?P<{g}>(?:19|20)\d\d)"
_BOUND = r"(?P<bound>\b(?:before|after|since|until|till|by|prior\s+to)\s+(?:the\s+)?)?"


def _date(*parts: str) -> re.Pattern[str]:
    """A date pattern of ``parts`` in a row, as a whole word, after an optional bound word."""
    return re.compile(_BOUND + r"\b" + "".join(parts) + r"\b", re.IGNORECASE)


_PATTERNS = (
    # 21.01.2024 / 21.1.24: day first
    _date(r"(?P<d>[0-3]?\d)\.(?P<m>[01]?\d)\.(?P<y>(?:19|20)?\d\d)"),
    # 1/21/2024: month first unless the first number cannot be a month
    _date(r"(?P<a>[0-3]?\d)/(?P<b>[0-3]?\d)/(?P<y>(?:19|20)?\d\d)"),
    # 2024-01-21
    _date(r"(?P<y>(?:19|20)\d\d)-(?P<m>[01]\d)-(?P<d>[0-3]\d)"),
    # 3 Jan 2024, 3rd of January, 2024
    _date(_DAY.format(g="d"), r"\s+(?:of\s+)?", _MONTH.format(g="mon"), r",?\s+", _YEAR.format(g="y")),
    # January 6 2024, October 13th, 2023
    _date(_MONTH.format(g="mon"), r"\s+", _DAY.format(g="d"), r",?\s+", _YEAR.format(g="y")),
    # July 2023, in Oct 2023: the month
    _date(_MONTH.format(g="mon"), r",?\s+", _YEAR.format(g="y")),
)


def _year(text: str) -> int:
    y = int(text)
    return y + 2000 if y < 100 else y


def _day(y: int, m: int, d: int) -> tuple[datetime, datetime] | None:
    """The day's window; ``None`` when there is no such month or day."""
    try:
        start = datetime(y, m, d, tzinfo=UTC)
    except ValueError:
        return None
    return start, start + timedelta(days=1)


def _month(y: int, m: int) -> tuple[datetime, datetime]:
    start = datetime(y, m, 1, tzinfo=UTC)
    return start, datetime(y + (m == 12), m % 12 + 1, 1, tzinfo=UTC)


def windows(query: str | None) -> list[tuple[datetime, datetime]]:
    """RFC 8.2.2: the days and months ``query`` names as the time of what it asks about.

    Each is ``(start, end)``, UTC, end exclusive; in the order they appear, without repeats,
    at most :data:`MAX_WINDOWS`. A span of text is read by the first pattern that matches
    it (a full date before a month and year).
    """
    if not query:
        return []
    found: list[tuple[int, tuple[datetime, datetime]]] = []
    taken: list[tuple[int, int]] = []
    for pattern in _PATTERNS:
        for match in pattern.finditer(query):
            span = match.span()
            if any(span[0] < end and start < span[1] for start, end in taken):
                continue
            taken.append(span)
            if match.group("bound"):
                continue
            groups = match.groupdict()
            y = _year(groups["y"])
            window: tuple[datetime, datetime] | None
            if groups.get("a") is not None:
                a, b = int(groups["a"]), int(groups["b"])
                window = _day(y, b, a) if a > 12 else _day(y, a, b)
            elif groups.get("mon") is not None and groups.get("d") is None:
                window = _month(y, _MONTHS[groups["mon"].lower()])
            else:
                month = _MONTHS[groups["mon"].lower()] if groups.get("mon") else int(groups["m"])
                window = _day(y, month, int(groups["d"]))
            if window is not None:
                found.append((span[0], window))
    out: list[tuple[datetime, datetime]] = []
    for _, window in sorted(found, key=lambda f: f[0]):
        if window not in out:
            out.append(window)
    return out[:MAX_WINDOWS]
