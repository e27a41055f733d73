"""``deploy/grafana/membrane.json`` reads only metrics the code exports: every PromQL expression's
metric names are in a real scrape of the API's ``/metrics`` and of a worker pool's (RFC 14.2)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from membrane_core import Settings
from tests.support import prom
from tests.support.api import ServeFn
from tests.support.pools import Pool, pool_env
from tests.support.processes import ROOT, wait_until
from workers.app import make_app

pytestmark = [pytest.mark.queue, pytest.mark.slow]

DASHBOARD = ROOT / "deploy" / "grafana" / "membrane.json"


def expressions(node: Any) -> Iterator[str]:
    """Every PromQL expression of a dashboard: panel targets (rows' panels too) and the queries
    of its template variables."""
    if isinstance(node, dict):
        if isinstance(node.get("expr"), str):
            yield node["expr"]
        if node.get("type") == "query" and "query" in node:
            query = node["query"]
            yield query["query"] if isinstance(query, dict) else query
        for key, value in node.items():
            if key != "query":
                yield from expressions(value)
    elif isinstance(node, list):
        for item in node:
            yield from expressions(item)


def unexported(exprs: list[str], exported: set[str]) -> dict[str, set[str]]:
    """The expressions naming a metric outside ``exported``, with those names."""
    return {e: prom.metric_names(e) - exported for e in exprs if prom.metric_names(e) - exported}


def test_every_expression_names_a_metric_the_api_or_a_pool_exports(
    serve: ServeFn, database_url: str, redis_url: str, tmp_path: Path
) -> None:
    api_text = serve().get("/metrics").text
    api_names = prom.exported_names(api_text)
    pool = Pool(pool_env(database_url, redis_url, tmp_path), tmp_path / "pool.log").wait_ready()
    celery = make_app(Settings(redis_url=redis_url))
    try:
        # a failure's series exists once one happened (its exception is a label)
        celery.send_task("membrane.maintenance_job", args=["no-such-job"])
        wait_until(lambda: "membrane_worker_task_failures_total" in pool.text(), what="a failure")
        pool_text = pool.text()
        pool_names = prom.exported_names(pool_text)
    finally:
        celery.close()
        pool.stop()

    exprs = list(expressions(json.loads(DASHBOARD.read_text())))
    assert len(exprs) >= 15
    assert all(prom.metric_names(e) for e in exprs), "an expression names no metric"
    exported = api_names | pool_names
    assert unexported(exprs, exported) == {}
    # and every family of ours is on a panel
    used = set().union(*(prom.metric_names(e) for e in exprs))
    families = prom.family_names(api_text) | prom.family_names(pool_text)
    assert len(families) >= 12
    assert {f for f in families if not any(u.startswith(f) for u in used)} == set()

    # positive control: the check sees a name nothing exports, and the pool's panels without its scrape
    assert unexported(["sum(rate(membrane_no_such_metric_total[5m]))"], exported) == {
        "sum(rate(membrane_no_such_metric_total[5m]))": {"membrane_no_such_metric_total"}
    }
    missing = set().union(*unexported(exprs, api_names).values())
    assert {"membrane_worker_tasks_total", "membrane_worker_task_duration_seconds_bucket"} <= missing


def test_the_promql_reader_takes_names_not_functions_labels_or_ranges() -> None:
    expr = (
        'histogram_quantile(0.99, sum by (le, route) (rate(membrane_x_bucket{route=~"/v1/.*",'
        'job="$job"}[$__rate_interval]))) / ignoring(route) group_left membrane_y offset 5m > 1e3'
    )
    assert prom.metric_names(expr) == {"membrane_x_bucket", "membrane_y"}
    assert prom.metric_names("label_values(membrane_z_total, queue)") == {"membrane_z_total"}
