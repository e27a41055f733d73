"""``deploy/prometheus/alerts.yml`` alerts on what the dashboard plots (RFC 12.4, 14.2)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import yaml  # type: ignore[import-untyped]

from tests.support import prom

ROOT = Path(__file__).resolve().parents[2]


def _exprs(node: Any) -> set[str]:
    if isinstance(node, dict):
        own = {node["expr"]} if isinstance(node.get("expr"), str) else set()
        return own.union(*(_exprs(v) for v in node.values()))
    if isinstance(node, list):
        return set().union(*(_exprs(v) for v in node))
    return set()


def test_every_rule_reads_a_metric_on_the_dashboard_and_the_embedding_lag_is_alerted() -> None:
    """The dashboard's metrics are checked against real scrapes (test_dashboard); a rule
    reading only those reads what the code exports."""
    rules = yaml.safe_load((ROOT / "deploy" / "prometheus" / "alerts.yml").read_text())
    plotted = set().union(
        *(
            prom.metric_names(e)
            for e in _exprs(json.loads((ROOT / "deploy" / "grafana" / "membrane.json").read_text()))
        )
    )
    alerted: set[str] = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            assert {"alert", "expr", "for", "labels", "annotations"} <= rule.keys(), rule
            names = prom.metric_names(rule["expr"])
            assert names and names <= plotted, (rule["alert"], names - plotted)
            alerted |= names
    assert "membrane_embedding_lag_seconds" in alerted
