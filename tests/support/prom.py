"""Prometheus text and PromQL for the tests: the samples of a scrape, the names it exports, the
metric names an expression reads (RFC 14.2)."""

from __future__ import annotations

import re
from collections.abc import Mapping

import httpx
from prometheus_client.parser import text_string_to_metric_families

#: A sample's name and its labels (sorted pairs).
Key = tuple[str, tuple[tuple[str, str], ...]]

#: What a family of each type exports besides its own name.
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_sum", "_count"), "summary": ("_sum", "_count")}

#: PromQL words that look like metric names and are not.
KEYWORDS = frozenset(
    {"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right"}
    | {"inf", "nan", "start", "end"}
)

_STRING = re.compile(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`')
_MATCHERS = re.compile(r"\{[^}]*\}")
_RANGE = re.compile(r"\[[^\]]*\]")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)")
_IDENT = re.compile(r"(?<![\w$.:])([A-Za-z_:][A-Za-z0-9_:]*)(?![\w:]|\s*\()")
_LABEL_VALUES = re.compile(r"^\s*label_values\(\s*(.*?)\s*,\s*\w+\s*\)\s*$", re.DOTALL)


def samples(text: str) -> dict[Key, float]:
    """Every sample of a scrape by name and labels."""
    out: dict[Key, float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def value(found: Mapping[Key, float], name: str, **labels: str) -> float | None:
    """The sample ``name`` with exactly ``labels``, or ``None``."""
    return found.get((name, tuple(sorted(labels.items()))))


def exported_names(text: str) -> set[str]:
    """The metric names a scrape exports: its samples' names, and for each family its name with
    the suffixes of its type (a labelled family without a sample yet still names them)."""
    names: set[str] = set()
    for family in text_string_to_metric_families(text):
        names.add(family.name)
        names.update(family.name + suffix for suffix in SUFFIXES.get(family.type, ()))
        names.update(s.name for s in family.samples)
    return names


def family_names(text: str) -> set[str]:
    """The metric families of a scrape (a counter's without ``_total``)."""
    return {family.name for family in text_string_to_metric_families(text)}


def metric_names(expr: str) -> set[str]:
    """The metric names a PromQL expression (or a Grafana ``label_values(...)`` query) reads."""
    query = _LABEL_VALUES.match(expr)
    text = query.group(1) if query else expr
    text = _STRING.sub('""', text)
    text = _MATCHERS.sub("", text)
    text = _RANGE.sub("", text)
    text = _GROUPING.sub("", text)
    return {m for m in _IDENT.findall(text) if m.lower() not in KEYWORDS}


def fresh_connections() -> httpx.Client:
    """A client that opens a connection per request, so that each lands on any process."""
    return httpx.Client(timeout=10, limits=httpx.Limits(max_keepalive_connections=0))


def scrape(client: httpx.Client, url: str, headers: Mapping[str, str] | None = None) -> str:
    """The text of ``GET url``; raises unless it answered 200."""
    resp = client.get(url, headers=dict(headers or {}))
    resp.raise_for_status()
    return resp.text
