"""``membrane_client.langgraph.MembraneStore`` against the live API and a real Postgres.

``langgraph`` ships no store test suite, so these are the cases its ``BaseStore`` documents
(get, put, delete, search with filters, limit and offset, list_namespaces with prefix, suffix,
wildcards, depth, limit and offset, batch, TTL), plus what Membrane adds: a put of an existing
key supersedes, a delete retracts, and the earlier versions stay in the history (RFC 10.9.1).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from typing import Any, get_args

import pytest
from langgraph.store.base import (
    GetOp,
    InvalidNamespaceError,
    Item,
    ListNamespacesOp,
    MatchCondition,
    Op,
    PutOp,
    SearchOp,
)
from membrane_client import AsyncClient, Client
from membrane_client import _langgraph_items as items
from membrane_client.langgraph import SUPPORTED_OPS, MembraneStore

from tests.support.api import ServeFn
from tests.support.sql import rows

NS = ("users", "alice")


@pytest.fixture
def url(serve: ServeFn) -> str:
    return str(serve().base_url).rstrip("/")


@pytest.fixture
def store(url: str) -> Iterator[MembraneStore]:
    with MembraneStore(url, scope_prefix="lg:") as s:
        yield s


@pytest.fixture
def sdk(url: str) -> Iterator[Client]:
    with Client(url, timeout=30.0) as client:
        yield client


def versions(sdk: Client, scope: str, key: str) -> list[Any]:
    """Every record of ``key`` in ``scope``, retracted ones too, oldest first."""
    page = sdk.list_records(scope=scope, tag=items.key_tag(key), status=["active", "retracted"], limit=50)
    return sorted(page.records, key=lambda r: (r.created_at, r.id))


# -- the mapping rule ---------------------------------------------------------------------------


def test_a_namespace_maps_to_a_scope_and_back() -> None:
    for namespace in [("a",), ("users", "alice"), ("x y", "ünï", "a:b/c")]:
        scope = items.scope_of(namespace, "lg:")
        assert scope == "lg:" + ".".join(namespace)
        assert items.namespace_of(scope, "lg:") == namespace
    assert items.namespace_of("other-scope", "lg:") is None  # not under the prefix
    assert items.namespace_of("lg:a..b", "lg:") is None  # no namespace has an empty label
    assert items.namespace_of("lg:a.b", "lg:") == ("a", "b")  # control: the same shape, labels set
    for bad in [(), ("a.b",), ("",), (" a",), ("x" * 300,)]:
        with pytest.raises(InvalidNamespaceError):
            items.scope_of(bad, "lg:")


def test_the_store_runs_every_op_type_langgraph_defines() -> None:
    assert set(SUPPORTED_OPS) == set(get_args(Op))


def test_filters_as_langgraph_documents_them() -> None:
    value = {"kind": "report", "score": 4.5, "meta": {"lang": "en", "n": 2}, "tags": ["a", "b"]}
    assert items.matches_filter(value, {"kind": "report"})
    assert not items.matches_filter(value, {"kind": "memo"})
    assert items.matches_filter(value, {"score": {"$gt": 4}, "kind": {"$ne": "memo"}})
    assert not items.matches_filter(value, {"score": {"$lte": 4}})
    assert items.matches_filter(value, {"meta": {"lang": "en"}})
    assert not items.matches_filter(value, {"meta": {"lang": "fr"}})
    assert items.matches_filter(value, {"tags": ["a", "b"]}) and not items.matches_filter(
        value, {"tags": ["a"]}
    )
    assert not items.matches_filter(value, {"missing": {"$gt": 1}})
    with pytest.raises(ValueError, match="unsupported filter operator"):
        items.matches_filter(value, {"score": {"$in": [1]}})


# -- get, put, delete ----------------------------------------------------------------------------


def test_put_get_and_an_update_that_supersedes(store: MembraneStore, sdk: Client) -> None:
    assert store.get(NS, "editor") is None
    store.put(NS, "editor", {"prefers": "vim"})
    first = store.get(NS, "editor")
    assert isinstance(first, Item) and first.value == {"prefers": "vim"}
    assert (first.namespace, first.key) == (NS, "editor") and first.created_at == first.updated_at

    store.put(NS, "editor", {"prefers": "helix"})
    second = store.get(NS, "editor")
    assert second is not None and second.value == {"prefers": "helix"}
    assert second.created_at == first.created_at and second.updated_at > first.updated_at

    old, new = versions(sdk, "lg:users.alice", "editor")
    assert (old.status, new.status) == ("retracted", "active")
    assert old.metadata["langgraph"]["value"] == {"prefers": "vim"}  # the history keeps it
    revise = [e for e in sdk.audit(old.id).entries if e.action == "revise"]
    assert len(revise) == 1 and revise[
        0
    ].rationale == "langgraph store put of key 'editor' in namespace " + repr(NS)
    edges = sdk.lineage(new.id).edges
    assert [(e.kind, e.source_id, e.target_id) for e in edges] == [("supersedes", new.id, old.id)]
    assert edges[0].rationale == revise[0].rationale
    # never returned as current: not by get, search or retrieval; the new value is (control)
    assert [i.value for i in store.search(NS)] == [{"prefers": "helix"}]
    hits = sdk.retrieve("vim helix", scopes=["lg:users.alice"]).records
    assert [h.id for h in hits] == [new.id]


def test_delete_retracts_and_the_key_can_be_put_again(store: MembraneStore, sdk: Client) -> None:
    store.put(NS, "a", {"n": 1})
    store.put(NS, "b", {"n": 2})
    store.delete(NS, "a")
    assert store.get(NS, "a") is None
    assert store.get(NS, "b") is not None  # control: the other key is untouched
    (gone,) = versions(sdk, "lg:users.alice", "a")
    assert gone.status == "retracted"
    assert sdk.audit(gone.id).entries[
        -1
    ].rationale == "langgraph store delete of key 'a' in namespace " + repr(NS)
    store.delete(NS, "never-put")  # deleting nothing is no error
    store.put(NS, "a", {"n": 3})
    again = store.get(NS, "a")
    assert again is not None and again.value == {"n": 3}
    assert [r.status for r in versions(sdk, "lg:users.alice", "a")] == ["retracted", "active"]


def test_keys_are_exact_and_namespaces_apart(store: MembraneStore) -> None:
    odd = "  spaced key / with ünïcode and a very long tail " + "x" * 300
    store.put(NS, odd, {"v": "odd"})
    store.put(("users", "bob"), odd, {"v": "bob"})
    got = store.get(NS, odd)
    assert got is not None and got.key == odd and got.value == {"v": "odd"}
    other = store.get(("users", "bob"), odd)
    assert other is not None and other.value == {"v": "bob"}
    assert store.get(NS, odd.strip()) is None


def test_invalid_namespaces_are_refused(store: MembraneStore) -> None:
    with pytest.raises(InvalidNamespaceError):
        store.put(("a.b",), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.put(("langgraph", "x"), "k", {"v": 1})
    with pytest.raises(InvalidNamespaceError):
        store.batch([PutOp(("a.b",), "k", {"v": 1})])


# -- search ---------------------------------------------------------------------------------------


def _docs(store: MembraneStore) -> None:
    store.put(("docs", "en"), "d1", {"text": "postgres vacuum tuning", "kind": "report", "score": 5})
    store.put(("docs", "en"), "d2", {"text": "redis eviction policy", "kind": "memo", "score": 3})
    store.put(("docs", "fr"), "d3", {"text": "postgres index bloat", "kind": "report", "score": 4})
    store.put(("other",), "d4", {"text": "postgres elsewhere", "kind": "report", "score": 9})


def test_search_without_a_query_lists_newest_first(store: MembraneStore) -> None:
    _docs(store)
    assert [i.key for i in store.search(("docs",))] == ["d3", "d2", "d1"]
    assert [i.key for i in store.search(("docs", "en"))] == ["d2", "d1"]
    assert [i.key for i in store.search(())] == ["d4", "d3", "d2", "d1"]
    assert [i.key for i in store.search(("docs",), limit=1, offset=1)] == ["d2"]
    assert [i.key for i in store.search(("docs",), filter={"kind": "report"})] == ["d3", "d1"]
    assert [
        i.key for i in store.search(("docs",), filter={"score": {"$gte": 4}, "kind": {"$ne": "memo"}})
    ] == [
        "d3",
        "d1",
    ]
    assert store.search(("nothing",)) == []
    assert all(i.score is None for i in store.search(("docs",)))


def test_search_with_a_query_uses_retrieval(store: MembraneStore) -> None:
    _docs(store)
    hits = store.search(("docs",), query="postgres")
    assert {i.key for i in hits} == {"d1", "d3"}  # d4 matches too, outside the prefix; d2 does not match
    assert {i.key for i in store.search((), query="postgres")} == {"d1", "d3", "d4"}  # control
    assert [i.key for i in store.search(("docs",), query="postgres", filter={"score": 5})] == ["d1"]
    assert len(store.search(("docs",), query="postgres", limit=1)) == 1
    assert all(i.score is not None for i in hits)


def test_index_selects_the_text_retrieval_sees(store: MembraneStore) -> None:
    store.put(("idx",), "shown", {"title": "kubernetes", "body": "zebra"}, index=["title"])
    store.put(("idx",), "hidden", {"title": "kubernetes", "body": "zebra"}, index=False)
    assert [i.key for i in store.search(("idx",), query="kubernetes")] == ["shown"]
    assert store.search(("idx",), query="zebra") == []
    assert {i.key for i in store.search(("idx",))} == {"shown", "hidden"}  # both are stored (control)


# -- list_namespaces -------------------------------------------------------------------------------


def test_list_namespaces(store: MembraneStore) -> None:
    for ns in [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "v1")]:
        store.put(ns, "k", {"v": 1})
    assert store.list_namespaces() == [("a", "b", "c"), ("a", "b", "d"), ("a", "e"), ("x", "b", "v1")]
    assert store.list_namespaces(prefix=("a", "b")) == [("a", "b", "c"), ("a", "b", "d")]
    assert store.list_namespaces(suffix=("v1",)) == [("x", "b", "v1")]
    assert store.list_namespaces(prefix=("*", "b")) == [("a", "b", "c"), ("a", "b", "d"), ("x", "b", "v1")]
    assert store.list_namespaces(prefix=("a",), suffix=("d",)) == [("a", "b", "d")]
    assert store.list_namespaces(max_depth=2) == [("a", "b"), ("a", "e"), ("x", "b")]
    assert store.list_namespaces(limit=2, offset=1) == [("a", "b", "d"), ("a", "e")]
    store.delete(("a", "e"), "k")
    assert ("a", "e") not in store.list_namespaces()
    assert ("a", "b", "c") in store.list_namespaces()  # control


# -- batch, async, TTL ---------------------------------------------------------------------------


def test_batch_runs_each_op_in_order(store: MembraneStore) -> None:
    results = store.batch(
        [
            PutOp(NS, "k", {"v": 1}),
            GetOp(NS, "k"),
            PutOp(NS, "k", {"v": 2}),
            SearchOp(("users",)),
            ListNamespacesOp(match_conditions=(MatchCondition("prefix", ("users",)),)),
            PutOp(NS, "k", None),
            GetOp(NS, "k"),
        ]
    )
    assert results[0] is None and isinstance(results[1], Item) and results[1].value == {"v": 1}
    assert [i.value for i in results[3]] == [{"v": 2}]  # type: ignore[union-attr]
    assert results[4] == [NS] and results[6] is None


def test_the_async_methods(url: str) -> None:
    async def scenario() -> None:
        async with AsyncClient(url) as aclient:
            store = MembraneStore(async_client=aclient, scope_prefix="lg:")
            await store.aput(NS, "k", {"text": "async postgres"})
            await store.aput(NS, "k", {"text": "async postgres, again"})
            got = await store.aget(NS, "k")
            assert got is not None and got.value == {"text": "async postgres, again"}
            assert [i.key for i in await store.asearch(("users",), query="postgres")] == ["k"]
            assert await store.alist_namespaces() == [NS]
            await store.adelete(NS, "k")
            assert await store.aget(NS, "k") is None
            results = await store.abatch([PutOp(NS, "j", {"v": 1}), GetOp(NS, "j")])
            assert isinstance(results[1], Item) and results[1].value == {"v": 1}

    asyncio.run(scenario())


def test_ttl_omits_expired_items_and_the_sweep_retracts_them(store: MembraneStore, sdk: Client) -> None:
    store.put(NS, "brief", {"v": 1}, ttl=0.02)  # 1.2 s
    store.put(NS, "lasting", {"v": 2})
    assert store.get(NS, "brief") is not None  # not expired yet
    time.sleep(1.5)
    assert store.get(NS, "brief") is None
    assert [i.key for i in store.search(NS)] == ["lasting"]  # control: the other one is there
    assert store.sweep_ttl() == 1
    (record,) = versions(sdk, "lg:users.alice", "brief")
    assert record.status == "retracted"
    assert "ttl of 0.02 minutes passed" in sdk.audit(record.id).entries[-1].rationale
    assert store.sweep_ttl() == 0


def max_age(database_url: str, record_id: Any) -> int | None:
    """The record's lifecycle maximum age (RFC 6.1): the record view carries no lifecycle."""
    ((seconds,),) = rows(database_url, "SELECT max_age_seconds FROM memory_records WHERE id = %s", record_id)
    return seconds


def test_a_ttl_is_the_records_max_age(store: MembraneStore, sdk: Client, database_url: str) -> None:
    store.put(NS, "k", {"v": 1}, ttl=30)
    store.put(NS, "brief", {"v": 1}, ttl=0.02)  # 1.2 s: rounded up to whole seconds
    store.put(NS, "plain", {"v": 1})
    (first,) = versions(sdk, "lg:users.alice", "k")
    assert max_age(database_url, first.id) == 30 * 60
    (brief,) = versions(sdk, "lg:users.alice", "brief")
    assert max_age(database_url, brief.id) == 2
    (plain,) = versions(sdk, "lg:users.alice", "plain")
    assert max_age(database_url, plain.id) is None  # control: no TTL, no maximum age
    store.put(NS, "k", {"v": 2}, ttl=90)  # the superseding record carries the new TTL
    store.put(NS, "plain", {"v": 2}, ttl=1)
    old, new = versions(sdk, "lg:users.alice", "k")
    assert (old.id, old.status, new.status) == (first.id, "retracted", "active")
    assert max_age(database_url, new.id) == 90 * 60
    assert max_age(database_url, versions(sdk, "lg:users.alice", "plain")[-1].id) == 60
    store.put(NS, "k", {"v": 3}, ttl=None)  # a put without a TTL: the new record has none
    assert max_age(database_url, versions(sdk, "lg:users.alice", "k")[-1].id) is None
    assert store.get(NS, "k").value == {"v": 3}  # type: ignore[union-attr]


def test_the_server_prunes_an_expired_item_and_a_later_put_captures_anew(
    store: MembraneStore, sdk: Client, database_url: str
) -> None:
    store.put(NS, "k", {"v": 1}, ttl=0.02)  # a maximum age of 2 s
    store.put(NS, "kept", {"v": 1}, ttl=60)  # control
    (gone,) = versions(sdk, "lg:users.alice", "k")
    time.sleep(2.1)  # its decay checkpoint, at its maximum age, is due: run what the beat runs
    sdk.run_maintenance(["decay", "prune"], wait=10).raise_for_error()
    assert versions(sdk, "lg:users.alice", "k") == []
    assert [r.status for r in versions(sdk, "lg:users.alice", "kept")] == ["active"]
    deleted = "SELECT rationale FROM audit_log WHERE record_id = %s AND action = 'delete'"
    assert rows(database_url, deleted, gone.id) == [("pruned: maximum age passed",)]
    assert store.get(NS, "k") is None
    assert store.sweep_ttl() == 0  # nothing left for the client's sweep
    store.put(NS, "k", {"v": 2})
    assert store.get(NS, "k").value == {"v": 2}  # type: ignore[union-attr]


def test_default_ttl_from_the_config(url: str) -> None:
    with MembraneStore(url, scope_prefix="lg:", ttl={"default_ttl": 60.0}) as store:
        store.put(NS, "k", {"v": 1})
        with Client(url) as sdk:
            (record,) = versions(sdk, "lg:users.alice", "k")
        assert record.metadata["langgraph"]["ttl_minutes"] == 60.0
        store.put(NS, "forever", {"v": 1}, ttl=None)
        assert store.get(NS, "forever") is not None
