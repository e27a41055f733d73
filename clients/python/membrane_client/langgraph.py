"""A LangGraph ``BaseStore`` on Membrane (RFC 10.9.1): ``pip install 'membrane-client[langgraph]'``.

>>> from membrane_client.langgraph import MembraneStore
>>> with MembraneStore("http://127.0.0.1:8080") as store:           # doctest: +SKIP
...     store.put(("users", "alice"), "editor", {"prefers": "vim"})
...     store.put(("users", "alice"), "editor", {"prefers": "helix"})  # supersedes
...     store.get(("users", "alice"), "editor").value
{'prefers': 'helix'}

Every call goes through the SDK, so the server decides what the key may read and write.
A put of an existing key supersedes its current version, a delete retracts it: the
earlier values stay in the record's history (``Client.audit``, ``Client.lineage``) and
are never returned as current.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, get_args

from langgraph.store.base import (
    BaseStore,
    GetOp,
    Item,
    ListNamespacesOp,
    Op,
    PutOp,
    Result,
    SearchItem,
    SearchOp,
    TTLConfig,
)

from membrane_client import _langgraph_items as items
from membrane_client._steps import Steps, adrive, drive, send
from membrane_client.async_client import AsyncClient
from membrane_client.client import Client
from membrane_client.errors import NotFound, OperationTimeout, RevisionRefused
from membrane_client.models import Operation, Record, RecordPage, RetrieveResult, ScopeList

__all__ = ["SUPPORTED_OPS", "MembraneStore"]

#: The op types of the installed ``langgraph``; :meth:`MembraneStore.batch` runs each of them.
SUPPORTED_OPS: tuple[type, ...] = (GetOp, PutOp, SearchOp, ListNamespacesOp)
#: Retrieval answers at most this many records (RFC 8.3), and a list page holds as many.
MAX_PAGE = 200
#: Retrieval and lists take at most this many scopes in one request.
MAX_SCOPES = 256
#: A put that loses a race with another writer of its key reads again this many times.
PUT_ATTEMPTS = 3


class MembraneStore(BaseStore):
    """LangGraph's long-term memory store on the Membrane HTTP API (RFC 10.9.1).

    ``url`` and ``api_key`` build the clients; or pass ``client`` (and ``async_client`` for
    the ``a*`` methods). ``scope_prefix`` starts every scope the store uses; ``index`` lists
    the value paths retrieval indexes (``["$"]``, the whole value, by default; ``[]``
    nothing); ``ttl`` is LangGraph's ``TTLConfig`` (``default_ttl`` in minutes; a TTL is the
    record's maximum age, ``refresh_on_read`` is not honoured); ``wait`` is
    how long a write waits for its operation; ``sensitivity`` is given to every capture.
    """

    supports_ttl = True

    def __init__(
        self,
        url: str | None = None,
        *,
        api_key: str | None = None,
        client: Client | None = None,
        async_client: AsyncClient | None = None,
        scope_prefix: str = "",
        index: Sequence[str] | None = ("$",),
        ttl: TTLConfig | None = None,
        wait: float = 30.0,
        sensitivity: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        if url is None and client is None and async_client is None:
            raise TypeError("MembraneStore needs a url, a client or an async_client")
        self._url, self._api_key, self._timeout = url, api_key, timeout
        self._client, self._async_client = client, async_client
        self._owned: list[Client | AsyncClient] = []
        self.scope_prefix = scope_prefix
        self.index_fields = list(index or ())
        self.ttl_config = ttl
        self.wait = wait
        self.sensitivity = sensitivity

    # -- clients ----------------------------------------------------------------------

    @property
    def client(self) -> Client:
        """The synchronous client (built from ``url`` on first use)."""
        if self._client is None:
            if self._url is None:
                raise TypeError("this MembraneStore has only an async_client: use the a* methods")
            self._client = Client(self._url, api_key=self._api_key, timeout=self._timeout)
            self._owned.append(self._client)
        return self._client

    @property
    def async_client(self) -> AsyncClient:
        """The asynchronous client (built from ``url`` on first use)."""
        if self._async_client is None:
            if self._url is None:
                raise TypeError("this MembraneStore has only a client: use the sync methods")
            self._async_client = AsyncClient(self._url, api_key=self._api_key, timeout=self._timeout)
            self._owned.append(self._async_client)
        return self._async_client

    def close(self) -> None:
        """Close the sync client the store built (``aclose`` closes the async one)."""
        for owned in self._owned:
            if isinstance(owned, Client):
                owned.close()

    async def aclose(self) -> None:
        """Close every client the store built."""
        self.close()
        for owned in self._owned:
            if isinstance(owned, AsyncClient):
                await owned.aclose()

    def __enter__(self) -> MembraneStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> MembraneStore:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    # -- BaseStore ----------------------------------------------------------------------

    def batch(self, ops: Iterable[Op]) -> list[Result]:
        """Run ``ops`` in order (a get after a put of its key sees the put)."""
        return [drive(self.client, self._op(op)) for op in ops]

    async def abatch(self, ops: Iterable[Op]) -> list[Result]:
        """:meth:`batch` on the asynchronous client."""
        return [await adrive(self.async_client, self._op(op)) for op in ops]

    def sweep_ttl(self) -> int:
        """Retract every item of the store's scopes whose TTL has passed; how many."""
        return drive(self.client, self._sweep())

    async def asweep_ttl(self) -> int:
        """:meth:`sweep_ttl` on the asynchronous client."""
        return await adrive(self.async_client, self._sweep())

    def _op(self, op: Op) -> Steps[Result]:
        if isinstance(op, GetOp):
            return self._get(op)
        if isinstance(op, PutOp):
            return self._put(op)
        if isinstance(op, SearchOp):
            return self._search(op)
        if isinstance(op, ListNamespacesOp):
            return self._list_namespaces(op)
        raise TypeError(f"MembraneStore cannot run {type(op).__name__}; it runs {', '.join(_names())}")

    # -- steps ---------------------------------------------------------------------------

    def _versions(self, namespace: tuple[str, ...], key: str) -> Steps[list[items.Stored]]:
        """The key's active versions, newest first (one, unless first puts raced)."""
        page: RecordPage = yield send(
            "list_records",
            scope=items.scope_of(namespace, self.scope_prefix),
            tag=items.key_tag(key),
            type="working",
            limit=MAX_PAGE,
        )
        found = (items.stored(r, self.scope_prefix) for r in page.records)
        return [s for s in found if s is not None and s.namespace == namespace and s.key == key]

    def _get(self, op: GetOp) -> Steps[Result]:
        versions = yield from self._versions(tuple(op.namespace), str(op.key))
        now = datetime.now(UTC)
        live = [v for v in versions if not v.expired(now)]
        return _item(live[0]) if live else None

    def _put(self, op: PutOp) -> Steps[Result]:
        namespace, key = tuple(op.namespace), str(op.key)
        scope = items.scope_of(namespace, self.scope_prefix)
        where = f"key {key[:200]!r} in namespace {namespace!r}"
        for _ in range(PUT_ATTEMPTS):
            versions = yield from self._versions(namespace, key)
            if op.value is None:
                for version in versions:
                    yield from self._retract(version, f"langgraph store delete of {where}")
                return None
            now = datetime.now(UTC)
            text = items.index_text(op.value, self._fields(op.index))
            if not versions:
                body = items.capture_body(
                    scope,
                    namespace,
                    key,
                    op.value,
                    text=text,
                    now=now,
                    ttl=op.ttl,
                    sensitivity=self.sensitivity,
                )
                _finished((yield send("capture", body, wait=self.wait)))
                return None
            current, *raced = versions
            revised = items.revised_body(current, op.value, text=text, now=now, ttl=op.ttl)
            try:
                answer = yield send(
                    "supersede", current.record_id, revised, f"langgraph store put of {where}", wait=self.wait
                )
                _finished(answer)
            except (RevisionRefused, NotFound):  # superseded, deleted or pruned first: read again
                continue
            for version in raced:
                yield from self._retract(version, f"langgraph store put of {where}: a newer version exists")
            return None
        raise RevisionRefused(f"put of {where}: other writers kept replacing it ({PUT_ATTEMPTS} tries)")

    def _retract(self, version: items.Stored, rationale: str) -> Steps[None]:
        try:
            _finished((yield send("retract", version.record_id, rationale, wait=self.wait)))
        except (RevisionRefused, NotFound):  # retracted or superseded by another writer, or pruned
            pass

    def _fields(self, index: Any) -> list[str]:
        if index is False:
            return []
        return list(index) if index else self.index_fields

    def _scopes(self, prefix: tuple[str, ...], *, active_only: bool = False) -> Steps[list[str] | None]:
        """The readable scopes under ``prefix``; ``None`` for every scope (no prefix at all)."""
        if not prefix and not self.scope_prefix and not active_only:
            return None
        listing: ScopeList = yield send("list_scopes")
        found = []
        for count in listing.scopes:
            namespace = items.namespace_of(count.scope, self.scope_prefix)
            if namespace is None or namespace[: len(prefix)] != prefix:
                continue
            if not active_only or count.active + count.contested > 0:
                found.append(count.scope)
        return sorted(found)

    def _search(self, op: SearchOp) -> Steps[Result]:
        prefix = tuple(op.namespace_prefix)
        scopes = yield from self._scopes(prefix)
        if scopes == []:
            return []
        wanted = op.offset + op.limit
        now = datetime.now(UTC)
        found: list[items.Stored] = []
        for batch in _chunks(scopes):
            if op.query:
                records = yield from self._retrieve(op.query, batch, MAX_PAGE if op.filter else wanted)
            else:
                records = yield from self._list(batch, wanted, op.filter, now)
            found += self._keep(records, prefix, op.filter, now)
        if op.query and scopes is not None and len(scopes) > MAX_SCOPES:
            found.sort(key=lambda s: s.score or 0.0, reverse=True)
        elif not op.query:
            found.sort(key=lambda s: (s.updated_at, s.record_id), reverse=True)
        return [_search_item(s) for s in found[op.offset : wanted]]

    def _keep(
        self, records: Iterable[Record], prefix: tuple[str, ...], wanted: Any, now: datetime
    ) -> list[items.Stored]:
        found = (items.stored(r, self.scope_prefix) for r in records)
        return [
            s
            for s in found
            if s is not None
            and s.namespace[: len(prefix)] == prefix
            and not s.expired(now)
            and items.matches_filter(s.value, wanted)
        ]

    def _retrieve(self, query: str, scopes: list[str] | None, limit: int) -> Steps[list[Record]]:
        result: RetrieveResult = yield send(
            "retrieve",
            query,
            scopes=scopes,
            limit=max(1, min(limit, MAX_PAGE)),
            memory_types=["working"],
            tags=[items.ITEM_TAG],
        )
        return result.records

    def _list(self, scopes: list[str] | None, wanted: int, want: Any, now: datetime) -> Steps[list[Record]]:
        """Newest first, page after page, until ``wanted`` items pass the filter."""
        # without a filter every record listed is kept (save expired ones): ask for no more
        page_size = MAX_PAGE if want else max(1, min(wanted, MAX_PAGE))
        filters: dict[str, Any] = {"tag": items.ITEM_TAG, "type": "working", "limit": page_size}
        if scopes is not None:
            filters["scope"] = scopes
        records: list[Record] = []
        kept = 0
        while True:
            page: RecordPage = yield send("list_records", **filters)
            records += page.records
            kept += sum(1 for s in self._keep(page.records, (), want, now))
            if kept >= wanted or not page.next_cursor:
                return records
            filters["cursor"] = page.next_cursor

    def _list_namespaces(self, op: ListNamespacesOp) -> Steps[Result]:
        scopes = yield from self._scopes((), active_only=True)
        namespaces = (items.namespace_of(scope, self.scope_prefix) for scope in scopes or ())
        matched = {
            ns[: op.max_depth] if op.max_depth is not None else ns
            for ns in namespaces
            if ns is not None and all(items.matches_condition(c, ns) for c in op.match_conditions or ())
        }
        return sorted(matched)[op.offset : op.offset + op.limit]

    def _sweep(self) -> Steps[int]:
        scopes = yield from self._scopes(())
        now = datetime.now(UTC)
        swept = 0
        for batch in _chunks(scopes):
            filters: dict[str, Any] = {"tag": items.ITEM_TAG, "type": "working", "limit": MAX_PAGE}
            if batch is not None:
                filters["scope"] = batch
            expired: list[items.Stored] = []
            while True:
                page: RecordPage = yield send("list_records", **filters)
                found = (items.stored(r, self.scope_prefix) for r in page.records)
                expired += [s for s in found if s is not None and s.expired(now)]
                if not page.next_cursor:
                    break
                filters["cursor"] = page.next_cursor
            for stale in expired:
                rationale = (
                    f"langgraph store ttl of {stale.ttl_minutes} minutes passed for key {stale.key[:200]!r}"
                )
                yield from self._retract(stale, rationale)
                swept += 1
        return swept


def _finished(op: Operation) -> Operation:
    """``op`` once it succeeded; its error raised, or a timeout when it has not finished."""
    if not op.finished:
        raise OperationTimeout(f"operation {op.operation_id} is still {op.status}", operation=op)
    return op.raise_for_error()


def _chunks(scopes: list[str] | None) -> list[list[str] | None]:
    if scopes is None:
        return [None]
    return [scopes[i : i + MAX_SCOPES] for i in range(0, len(scopes), MAX_SCOPES)]


def _item(s: items.Stored) -> Item:
    return Item(
        value=s.value, key=s.key, namespace=s.namespace, created_at=s.created_at, updated_at=s.updated_at
    )


def _search_item(s: items.Stored) -> SearchItem:
    return SearchItem(s.namespace, s.key, s.value, s.created_at, s.updated_at, score=s.score)


def _names() -> list[str]:
    return [t.__name__ for t in get_args(Op)]
