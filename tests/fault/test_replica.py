"""A real streaming replica two seconds behind, read through the API (RFC 13.2).

The primary is an embedded Postgres of the test's own; the standby is made from it with
``pg_basebackup`` through a replication slot and replays with ``recovery_min_apply_delay``
of 2 s, so every write stays invisible on it for two seconds. A write's answer carries its
consistency token; a read given it never returns what the write corrected, and the same
read without it, inside the delay, does: the lag is real.
"""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from api.app import create_app
from membrane_core import Membrane, Settings
from membrane_core.inbox.submit import InlineDispatcher
from membrane_core.storage import standby
from tests.support.api import Server
from tests.support.services import EMBEDDING_DIM, PrivatePostgres

pytestmark = pytest.mark.slow

DELAY_MS = 2000
HEADER = "Membrane-Consistency"


@dataclass
class Stack:
    client: httpx.Client
    membrane: Membrane
    standby: standby.Standby


@pytest.fixture
def stack(private_postgres: PrivatePostgres, tmp_path: Path) -> Iterator[Stack]:
    Membrane(
        Settings(database_url=private_postgres.dsn, data_dir=tmp_path, embedding_dim=EMBEDDING_DIM)
    ).close()
    replica = standby.make(private_postgres.data_dir, tmp_path / "standby", apply_delay_ms=DELAY_MS)
    settings = Settings(
        database_url=private_postgres.dsn,
        read_database_url=replica.dsn,
        data_dir=tmp_path,
        embedding_dim=EMBEDDING_DIM,
        request_pool_timeout_seconds=5,
    )
    membrane = Membrane(settings)
    app = create_app(settings, membrane=membrane, dispatcher=InlineDispatcher(membrane.inbox_worker))
    try:
        with Server(app) as server, httpx.Client(base_url=server.url, timeout=10) as client:
            yield Stack(client, membrane, replica)
    finally:
        membrane.close()
        standby.drop(private_postgres.data_dir, replica)


def capture(stack: Stack, subject: str, obj: str) -> tuple[str, str]:
    """A fact, finished; its record id and the answer's token."""
    resp = stack.client.post(
        "/v1/captures?wait=10",
        json={
            "source_kind": "observation",
            "scope": "s",
            "content": {"subject": subject, "predicate": "lives in", "object": obj},
        },
    )
    assert resp.status_code == 200, resp.text
    return resp.json()["record_ids"][1], resp.headers[HEADER]


def replayed(stack: Stack, token: str, timeout: float = 10.0) -> None:
    """Until the standby has replayed ``token``."""
    deadline = time.monotonic() + timeout
    with psycopg.connect(stack.standby.dsn, autocommit=True) as conn:
        while time.monotonic() < deadline:
            row = conn.execute("SELECT pg_last_wal_replay_lsn() >= %s::pg_lsn", (token,)).fetchone()
            if row and row[0]:
                return
            time.sleep(0.05)
    raise AssertionError(f"the standby did not replay {token}")


def retrieve(stack: Stack, query: str, token: str | None = None) -> dict[str, Any]:
    resp = stack.client.post(
        "/v1/retrieve",
        json={"query": query, "scopes": ["s"], "memory_types": ["semantic"]},
        headers={HEADER: token} if token else {},
    )
    assert resp.status_code == 200, resp.text
    body: dict[str, Any] = resp.json()
    return body


def ids(body: dict[str, Any]) -> set[str]:
    return {r["id"] for r in body["records"]}


def test_a_retract_read_with_its_token_never_returns_the_fact(stack: Stack) -> None:
    fact, made = capture(stack, "ann", "paris")
    replayed(stack, made)
    assert fact in ids(retrieve(stack, "ann paris"))  # the replica has the fact

    resp = stack.client.post(
        f"/v1/records/{fact}/retract?wait=10", json={"rationale": "she never lived there"}
    )
    assert resp.status_code == 200, resp.text
    token = resp.headers[HEADER]

    stale = retrieve(stack, "ann paris")  # inside the delay, without the token
    fresh = retrieve(stack, "ann paris", token)
    listed = stack.client.get(
        "/v1/records", params={"scope": "s", "type": "semantic", "min_lsn": token}
    ).json()

    # positive control: the replica still shows the fact, so the lag was real
    assert stale["diagnostics"]["served_by"] == "replica" and fact in ids(stale)
    assert fresh["diagnostics"]["served_by"] == "primary" and fact not in ids(fresh)
    assert listed["diagnostics"]["served_by"] == "primary" and fact not in ids(listed)

    replayed(stack, token)
    caught_up = retrieve(stack, "ann paris", token)
    assert caught_up["diagnostics"]["served_by"] == "replica" and fact not in ids(caught_up)


def test_a_supersede_read_with_its_token_returns_the_new_value(stack: Stack) -> None:
    old, made = capture(stack, "bob", "rome")
    replayed(stack, made)
    resp = stack.client.post(
        f"/v1/records/{old}/supersede?wait=10",
        json={
            "record": {"object": "oslo"},
            "rationale": "he moved",
            "evidence": [{"kind": "observation", "ref": "letter"}],
        },
    )
    assert resp.status_code == 200, resp.text
    token, new = resp.headers[HEADER], resp.json()["record_ids"][0]

    stale = retrieve(stack, "bob")
    fresh = retrieve(stack, "bob", token)
    assert stale["diagnostics"]["served_by"] == "replica" and old in ids(stale) and new not in ids(stale)
    assert fresh["diagnostics"]["served_by"] == "primary" and new in ids(fresh) and old not in ids(fresh)


def test_a_stopped_standby_gives_primary_answers_at_once(stack: Stack) -> None:
    fact, made = capture(stack, "cem", "lima")
    replayed(stack, made)
    assert retrieve(stack, "cem lima")["diagnostics"]["served_by"] == "replica"  # positive control
    before = stack.client.get("/readyz").json()["replica"]
    assert before["replayed"] is not None and before["lag_seconds"] is not None, before

    stack.standby.stop("immediate")
    times = []
    for _ in range(5):
        t = time.monotonic()
        body = retrieve(stack, "cem lima")
        times.append(time.monotonic() - t)
        assert body["diagnostics"]["served_by"] == "primary" and fact in ids(body)
    assert max(times) < 1.0, times
    ready = stack.client.get("/readyz")
    # the replica down leaves the API ready: reads go to the primary; readiness says so
    assert ready.status_code == 200 and ready.json()["replica"]["fallbacks"]["down"] >= 5, ready.text
    # the monitor's next sample (every 0.25 s) finds the replica gone
    deadline = time.monotonic() + 5
    while ready.json()["replica"]["replayed"] is not None and time.monotonic() < deadline:
        time.sleep(0.1)
        ready = stack.client.get("/readyz")
    assert ready.json()["replica"]["replayed"] is None
    scraped = stack.client.get("/metrics").text
    fell = re.search(r'^membrane_replica_fallbacks_total\{reason="down"\} (\S+)$', scraped, re.M)
    assert fell is not None and float(fell[1]) >= 5, scraped[-2000:]
    assert re.search(r"^membrane_replica_lag_seconds ", scraped, re.M)


def test_the_sdk_sends_its_writes_token_with_its_reads(stack: Stack) -> None:
    from membrane_client import Client

    with Client(str(stack.client.base_url)) as sdk:
        fact = sdk.capture(
            {
                "source_kind": "observation",
                "scope": "s",
                "content": {"subject": "dee", "predicate": "lives in", "object": "kyiv"},
            },
            wait=10,
        ).record_ids[1]
        replayed(stack, sdk.tokens.latest or "")
        sdk.retract(fact, rationale="wrong city", wait=10)
        got = sdk.retrieve("dee kyiv", scopes=["s"], memory_types=["semantic"])
        page = sdk.list_records(scope="s", type="semantic")
    stale = retrieve(stack, "dee kyiv")  # no token: the replica, inside its delay
    assert stale["diagnostics"]["served_by"] == "replica" and str(fact) in ids(stale)
    assert got.diagnostics["served_by"] == "primary" and fact not in {r.id for r in got.records}
    assert page.diagnostics.served_by == "primary" and fact not in {r.id for r in page.records}


def test_an_erasure_read_with_its_token_finds_nothing_of_what_went(stack: Stack) -> None:
    """RFC 13.2, 15.4: the erasure's answer carries a token; a read that sends it finds none of
    the erased content, although the replica, inside its delay, still holds it."""
    fact, made = capture(stack, "eve", "quito")
    replayed(stack, made)
    body = {"scope": "s", "reason": "the user asked to be forgotten"}
    dry = stack.client.post("/v1/erase", json=body)
    assert dry.status_code == 200, dry.text
    done = stack.client.post("/v1/erase", json={**body, "dry_run": False, "confirm": dry.json()["confirm"]})
    assert done.status_code == 200, done.text
    token = done.headers[HEADER]
    stale = retrieve(stack, "eve quito")
    fresh = retrieve(stack, "eve quito", token)
    assert stale["diagnostics"]["served_by"] == "replica" and fact in ids(stale)  # the lag is real
    assert fresh["diagnostics"]["served_by"] == "primary" and fresh["records"] == []
