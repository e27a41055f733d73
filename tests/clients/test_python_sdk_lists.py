"""The Python SDK's list calls (RFC 10.7) against the live API: records by filter and across
pages, a record's lineage, operations, the work queue and scopes.

How the SDK writes a query and follows cursors is checked on ``httpx.MockTransport``; what
the server answers, on the real one.
"""

from __future__ import annotations

import asyncio
import itertools
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from membrane_client import (
    AsyncClient,
    Client,
    Forbidden,
    InvalidInput,
    MembraneError,
    NotFound,
    RecordPage,
    RecordTooLarge,
)

from tests.support.api import ServeFn
from tests.support.sql import scalar

KEYS = {
    "ops-key": {"read_scopes": ["*"], "write_scopes": ["*"], "max_sensitivity": "hyper", "operator": True},
    "team-key": {"read_scopes": ["team-a"], "write_scopes": ["team-a"], "max_sensitivity": "low"},
}


def event(text: str, scope: str = "lists-a", **extra: Any) -> dict[str, Any]:
    return {"source_kind": "event", "scope": scope, "content": {"text": text}, **extra}


def fact(obj: str, scope: str = "lists-a") -> dict[str, Any]:
    return {
        "source_kind": "observation",
        "scope": scope,
        "content": {"subject": "acme-api", "predicate": "runs_on", "object": obj},
    }


def captured(sdk: Client, captures: list[dict[str, Any]]) -> list[uuid.UUID]:
    """Every record id the captures wrote, each capture waited for."""
    ops = sdk.capture_many(captures, wait=10)
    assert all(op.succeeded for op in ops), [op.error for op in ops]
    return [rid for op in ops for rid in op.record_ids]


def bury(url: str, kind: str, target: uuid.UUID, error: str) -> int:
    """A work item buried after its last attempt (RFC 9.4), as a worker leaves it."""
    return scalar(
        url,
        "INSERT INTO work_items (kind, target_id, attempts, last_error, dead) VALUES (%s, %s, 5, %s, true) "
        "ON CONFLICT (kind, target_id) DO UPDATE SET attempts = 5, last_error = EXCLUDED.last_error, "
        "dead = true RETURNING id",
        kind,
        target,
        error,
    )


# -- records --------------------------------------------------------------------------------


def test_records_page_by_rows_and_iterate_across_pages(sdk: Client) -> None:
    ids = captured(sdk, [event(f"deploy step {i}") for i in range(5)] + [event("elsewhere", scope="lists-b")])
    mine = set(ids[:5])

    first = sdk.list_records(scope="lists-a", limit=2)
    assert isinstance(first, RecordPage) and len(first.records) == 2
    assert first.next_cursor is not None
    assert first.diagnostics.returned == 2 and first.diagnostics.row_limit == 2
    assert first.diagnostics.row_limit_applied and not first.diagnostics.byte_limit_applied
    second = sdk.list_records(scope="lists-a", limit=2, cursor=first.next_cursor)
    assert {r.id for r in first.records}.isdisjoint(r.id for r in second.records)

    every = list(sdk.iter_records(scope="lists-a", limit=2))
    assert [r.id for r in every][:2] == [r.id for r in first.records]
    assert len(every) == 5 and {r.id for r in every} == mine
    created = [r.created_at for r in every]
    assert all(a is not None and b is not None and a >= b for a, b in itertools.pairwise(created))
    # the last page says so
    last = sdk.list_records(scope="lists-a", limit=5)
    assert last.next_cursor is None and not last.diagnostics.row_limit_applied

    # several scopes: a repeated query parameter
    both = {r.scope for r in sdk.iter_records(scope=["lists-a", "lists-b"])}
    assert both == {"lists-a", "lists-b"}


def test_records_page_by_bytes(sdk: Client) -> None:
    text = "x" * 700  # about 1,300 projected bytes a record: two fit in 3,000
    captured(sdk, [event(f"{i} {text}", scope="lists-bytes") for i in range(5)])
    page = sdk.list_records(scope="lists-bytes", max_bytes=3000)
    assert page.diagnostics.byte_limit_applied and page.diagnostics.max_bytes == 3000
    assert len(page.records) == 2 and page.next_cursor is not None
    assert 2000 < page.diagnostics.bytes <= 3000
    assert len(list(sdk.iter_records(scope="lists-bytes", max_bytes=3000))) == 5
    # control: the default budget holds them all
    assert len(sdk.list_records(scope="lists-bytes").records) == 5
    # a record over the budget on its own is refused, not skipped (as retrieve, RFC 8.3)
    with pytest.raises(RecordTooLarge):
        sdk.list_records(scope="lists-bytes", max_bytes=1024)


def test_records_filters(sdk: Client) -> None:
    episode, semantic = captured(sdk, [fact("Python 3.12")])
    tagged, other = captured(sdk, [event("tests passed", tags=["ci"]), event("coffee", sensitivity="medium")])
    assert [r.id for r in sdk.list_records(scope="lists-a", type="semantic").records] == [semantic]
    assert {r.id for r in sdk.list_records(scope="lists-a", type=["semantic", "episodic"]).records} == {
        episode,
        semantic,
        tagged,
        other,
    }
    assert [r.id for r in sdk.list_records(scope="lists-a", tag="ci").records] == [tagged]
    assert [r.id for r in sdk.list_records(scope="lists-a", sensitivity="medium").records] == [other]
    # one level above a narrowed maximum: shown redacted, as retrieve shows it (RFC 7.3)
    narrowed = {r.id: r for r in sdk.list_records(scope="lists-a", max_sensitivity="low").records}
    assert narrowed[other].redacted and narrowed[other].payload is None and not narrowed[tagged].redacted
    assert [r.id for r in sdk.list_records(subject="acme-api", predicate="runs_on").records] == [semantic]
    later = datetime.now(UTC) + timedelta(hours=1)
    assert sdk.list_records(scope="lists-a", created_after=later).records == []
    assert len(sdk.list_records(scope="lists-a", created_before=later).records) == 4

    # retracted records are listed only when asked for (RFC 5.1)
    assert sdk.retract(semantic, "not a fact of ours", wait=5).succeeded
    assert semantic not in {r.id for r in sdk.list_records(scope="lists-a").records}
    retracted = sdk.list_records(scope="lists-a", status="retracted").records
    assert [(r.id, r.status) for r in retracted] == [(semantic, "retracted")]
    assert len(sdk.list_records(scope="lists-a", status=["active", "retracted"]).records) == 4
    # as believed an hour ago: nothing was written yet
    assert sdk.list_records(scope="lists-a", as_of=datetime.now(UTC) - timedelta(hours=1)).records == []


def test_records_refusals(sdk: Client, serve: ServeFn) -> None:
    with pytest.raises(InvalidInput) as invalid:
        sdk.list_records(type="gossip")  # type: ignore[typeddict-item]
    assert invalid.value.status == 422
    with pytest.raises(InvalidInput):
        sdk.list_records(limit=0)
    with pytest.raises(InvalidInput):
        sdk.list_records(created_after="2026-01-02T00:00:00Z", created_before="2026-01-01T00:00:00Z")
    with pytest.raises(InvalidInput):
        sdk.list_records(cursor="not a cursor")
    with pytest.raises(TypeError, match="scopes"):
        sdk.list_records(scopes=["lists-a"])  # type: ignore[call-arg]

    url = str(serve(keys=KEYS).base_url)
    with Client(url, api_key="ops-key") as ops:
        ops.capture_many([event("ours", scope="team-a"), event("theirs", scope="team-b")], wait=10)
        ops.capture(event("half secret", scope="team-a", sensitivity="medium"), wait=10)
        ops.capture(event("secret", scope="team-a", sensitivity="high"), wait=10)
    with Client(url, api_key="team-key") as team:
        with pytest.raises(Forbidden):
            team.list_records(scope="team-b")
        seen = team.list_records().records
        assert {r.scope for r in seen} == {"team-a"}
        # one level above the key's maximum: redacted; beyond: hidden (RFC 7.3)
        assert sorted((r.sensitivity, r.redacted, r.payload is None) for r in seen) == [
            ("low", False, False),
            ("medium", True, True),
        ]


# -- lineage ------------------------------------------------------------------------------------


def test_lineage_of_a_superseded_fact(sdk: Client) -> None:
    _, old = captured(sdk, [fact("Python 3.12")])
    before = datetime.now(UTC)
    new = sdk.supersede(
        old,
        {"object": "Python 3.13"},
        "the Dockerfile moved to 3.13",
        evidence=[{"kind": "artifact", "ref": "Dockerfile"}],
        wait=5,
    )
    replacement = new.raise_for_error().record_ids[0]

    for start in (old, replacement):
        lineage = sdk.lineage(start)
        assert lineage.record_id == start and not lineage.truncated
        assert {n.id for n in lineage.nodes} == {old, replacement}
        (edge,) = lineage.edges
        assert (edge.kind, edge.source_id, edge.target_id) == ("supersedes", replacement, old)
        assert edge.rationale == "the Dockerfile moved to 3.13"
        assert [(e.kind, e.ref) for e in edge.evidence] == [("artifact", "Dockerfile")]
        assert edge.target_status == "retracted" and edge.at is not None
    # as believed before the correction: the fact stood alone
    then = sdk.lineage(old, as_of=before)
    assert then.edges == [] and [n.id for n in then.nodes] == [old]
    with pytest.raises(NotFound):
        sdk.lineage(uuid.uuid4())


# -- operations ---------------------------------------------------------------------------------


def test_operations_by_kind_status_and_page(sdk: Client) -> None:
    ops = sdk.capture_many(
        [
            fact("Python 3.12", scope="lists-ops"),
            {"source_kind": "event", "scope": ""},
            event("two", scope="lists-ops"),
        ],
        wait=10,
    )
    assert [op.status for op in ops] == ["succeeded", "failed", "succeeded"]
    target = ops[0].record_ids[1]  # the fact: episodes are immutable
    retract = sdk.retract(target, "wrong service", wait=5)
    assert retract.succeeded, retract.error

    captures = list(sdk.iter_operations(kind="capture", limit=1))
    assert [o.operation_id for o in captures] == [o.operation_id for o in reversed(ops)]  # newest first
    assert all(o.principal == "development" for o in captures)
    page = sdk.list_operations(kind="capture", limit=2)
    assert len(page.operations) == 2 and page.next_cursor is not None
    failed = sdk.list_operations(status="failed").operations
    assert [o.operation_id for o in failed] == [ops[1].operation_id]
    assert failed[0].error is not None and failed[0].error.code == "invalid_input"
    revisions = sdk.list_operations(kind=["retract", "supersede"]).operations
    assert [(o.operation_id, o.target_id) for o in revisions] == [(retract.operation_id, target)]
    assert {o.operation_id for o in sdk.iter_operations(scope="lists-ops")} >= {
        ops[0].operation_id,
        ops[2].operation_id,
    }


# -- work queue ---------------------------------------------------------------------------------


def test_work_shows_buried_items_and_requeues_them(serve: ServeFn, database_url: str) -> None:
    url = str(serve(keys=KEYS).base_url)
    with Client(url, api_key="ops-key") as ops:
        records = captured(ops, [event(f"step {i}") for i in range(3)])
        buried = [
            bury(database_url, "embed", rid, f"provider timed out {i}") for i, rid in enumerate(records)
        ]
        bury(database_url, "extract", records[0], "no model")

        overview = ops.work(kind="embed")
        jobs = {j.kind: j for j in overview.jobs}
        assert jobs["embed"].buried == 3 and jobs["extract"].buried == 1
        assert sorted(b.id for b in overview.buried) == sorted(buried)
        assert {b.kind for b in overview.buried} == {"embed"}
        item = next(b for b in overview.buried if b.id == buried[0])
        assert (item.target_id, item.attempts, item.last_error) == (records[0], 5, "provider timed out 0")
        first = ops.work(kind="embed", limit=2)
        rest = ops.work(kind="embed", limit=2, cursor=first.next_cursor)
        assert len(first.buried) == 2 and first.next_cursor is not None and rest.next_cursor is None
        assert sorted(b.id for b in [*first.buried, *rest.buried]) == sorted(buried)

        missing = 10**9
        result = ops.requeue_work([buried[0], missing], rationale="the provider is back")
        assert (result.requeued, result.unchanged) == ([buried[0]], [missing])
        again = ops.requeue_work([buried[0]])
        assert (again.requeued, again.unchanged) == ([], [buried[0]])  # idempotent
        assert buried[0] not in {b.id for b in ops.work().buried}
        assert {j.kind: j.buried for j in ops.work().jobs}["embed"] == 2
        assert any(e.rationale == "the provider is back" for e in ops.audit(records[0]).entries)
        with pytest.raises(InvalidInput):
            ops.requeue_work([])

    with Client(url, api_key="team-key") as team:
        with pytest.raises(Forbidden):
            team.work()
        with pytest.raises(Forbidden):
            team.requeue_work(buried[1:])
    assert scalar(database_url, "SELECT count(*) FROM work_items WHERE dead") == 3


# -- scopes -------------------------------------------------------------------------------------


def test_scopes_with_their_counts(sdk: Client, serve: ServeFn) -> None:
    ids = captured(sdk, [fact("Python 3.12"), event("b1", scope="lists-b")])
    assert sdk.retract(ids[1], "wrong service", wait=5).succeeded  # the fact
    scopes = {s.scope: s for s in sdk.list_scopes().scopes}
    assert (scopes["lists-a"].records, scopes["lists-a"].active, scopes["lists-a"].retracted) == (2, 1, 1)
    assert scopes["lists-b"].records == 1

    url = str(serve(keys=KEYS).base_url)
    with Client(url, api_key="ops-key") as ops:
        ops.capture(event("ours", scope="team-a"), wait=10)
    with Client(url, api_key="team-key") as team:
        assert [(s.scope, s.records) for s in team.list_scopes().scopes] == [("team-a", 1)]


# -- async --------------------------------------------------------------------------------------


def test_async_lists(serve: ServeFn) -> None:
    url = str(serve().base_url)

    async def main() -> None:
        async with AsyncClient(url, timeout=30.0, backoff=0.01) as client:
            ops = await client.capture_many(
                [event(f"async {i}", scope="lists-async") for i in range(3)], wait=10
            )
            ids = {rid for op in ops for rid in op.record_ids}
            page = await client.list_records(scope="lists-async", limit=2)
            assert len(page.records) == 2 and page.next_cursor is not None
            seen = [r.id async for r in client.iter_records(scope="lists-async", limit=2)]
            assert set(seen) == ids and len(seen) == 3
            listed = [o.operation_id async for o in client.iter_operations(kind="capture", limit=2)]
            assert listed == [op.operation_id for op in reversed(ops)]
            assert (await client.list_operations(kind="capture")).operations
            assert (await client.lineage(seen[0])).edges == []
            assert "lists-async" in {s.scope for s in (await client.list_scopes()).scopes}
            assert (await client.work()).buried == []
            assert (await client.requeue_work([10**9])).unchanged == [10**9]
            with pytest.raises(TypeError):
                client.iter_records(scopes=["x"])  # type: ignore[call-arg]

    asyncio.run(main())


# -- the query and the cursor, without a server ---------------------------------------------


def _page(records: int, cursor: str | None) -> dict[str, Any]:
    diagnostics = {
        "returned": records,
        "bytes": 0,
        "row_limit": 50,
        "max_bytes": 1 << 20,
        "row_limit_applied": cursor is not None,
        "byte_limit_applied": False,
    }
    record = {
        "type": "episodic",
        "scope": "s",
        "sensitivity": "low",
        "confidence": 1.0,
        "salience": 1.0,
        "status": "active",
    }
    return {
        "records": [{**record, "id": str(uuid.uuid4())} for _ in range(records)],
        "next_cursor": cursor,
        "diagnostics": diagnostics,
    }


def test_the_query_repeats_lists_and_writes_times_in_iso_8601() -> None:
    seen: list[httpx.URL] = []

    def handler(request: httpx.Request) -> httpx.Response:
        seen.append(request.url)
        return httpx.Response(200, json=_page(0, None))

    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    with Client("http://127.0.0.1:9", transport=httpx.MockTransport(handler)) as client:
        client.list_records(scope=["a", "b"], type="semantic", created_after=when, limit=5, tag=None)  # type: ignore[typeddict-item]
        client.list_records()
    params = seen[0].params
    assert params.get_list("scope") == ["a", "b"] and params.get_list("type") == ["semantic"]
    assert params["created_after"] == "2026-01-02T03:04:05+00:00" and params["limit"] == "5"
    assert "tag" not in params and seen[0].path == "/v1/records"
    assert str(seen[1]) == "http://127.0.0.1:9/v1/records"


def test_iteration_follows_the_cursor_and_stops_on_a_repeated_one() -> None:
    pages = {None: _page(2, "c1"), "c1": _page(2, "c2"), "c2": _page(1, None)}
    cursors: list[str | None] = []

    def handler(request: httpx.Request) -> httpx.Response:
        cursor = request.url.params.get("cursor")
        cursors.append(cursor)
        assert request.url.params.get_list("scope") == ["s"]  # the filters go with every page
        return httpx.Response(200, json=pages[cursor])

    with Client("http://127.0.0.1:9", transport=httpx.MockTransport(handler)) as client:
        records = client.iter_records(scope="s")
        assert cursors == []  # nothing is fetched before the first record is asked for
        assert len(list(records)) == 5
    assert cursors == [None, "c1", "c2"]

    def stuck(request: httpx.Request) -> httpx.Response:
        return httpx.Response(200, json=_page(1, "same"))

    with Client("http://127.0.0.1:9", transport=httpx.MockTransport(stuck)) as client:
        with pytest.raises(MembraneError) as raised:
            list(client.iter_records())
    assert raised.value.code == "bad_answer"
