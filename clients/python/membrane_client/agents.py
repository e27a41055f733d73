"""An OpenAI Agents SDK ``Session`` on Membrane (RFC 10.9.3): ``pip install 'membrane-client[agents]'``.

>>> from agents import Agent, Runner
>>> from membrane_client.agents import MembraneSession
>>> session = MembraneSession("user-42", url="http://127.0.0.1:8080")   # doctest: +SKIP
>>> result = await Runner.run(Agent(name="a"), "hello", session=session)  # doctest: +SKIP

Each conversation item is a working record in the session's scope; popping an item
retracts it, and clearing the session erases its records where the key may erase, else
retracts every item. Every call goes through the SDK, so the server decides trust.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any
from uuid import UUID

from membrane_client.async_client import AsyncClient
from membrane_client.errors import Conflict, Forbidden, OperationTimeout, RevisionRefused
from membrane_client.models import Operation, Record, RecordFilters, RecordPage, RecordStatusName

if TYPE_CHECKING:
    from agents.items import TResponseInputItem
    from agents.memory.session_settings import SessionSettings

__all__ = ["ITEM_TAG", "MembraneSession"]

#: Every record a session writes carries this tag.
ITEM_TAG = "agents.item"
#: Where the item lives in the record's metadata.
META = "agents"
#: A list page; retraction and capture batches are sent in pages this size too.
PAGE = 200
MAX_SUMMARY = 4096
#: RFC 15.4: an erasure names at most this many records.
MAX_ERASE = 10_000
#: The working record's ``thread_id`` is at most this long (RFC 2.2.2).
MAX_THREAD = 512


class MembraneSession:
    """The Agents SDK ``Session`` protocol on working records of one scope (RFC 10.9.3).

    ``scope`` defaults to ``"agents-session:" + session_id``. Give ``url`` (and ``api_key``),
    or an ``AsyncClient``. ``wait`` is how long a write waits for its operation.
    """

    session_settings: SessionSettings | None = None

    def __init__(
        self,
        session_id: str,
        *,
        url: str | None = None,
        api_key: str | None = None,
        client: AsyncClient | None = None,
        scope: str | None = None,
        wait: float = 30.0,
        sensitivity: str | None = None,
        timeout: float = 30.0,
    ) -> None:
        if not session_id.strip():
            raise ValueError("session_id must not be blank")
        if client is None and url is None:
            raise TypeError("MembraneSession needs a url or a client")
        self.session_id = session_id
        self.scope = scope or f"agents-session:{session_id}"
        self.wait = wait
        self.sensitivity = sensitivity
        self._owned = client is None
        self._client = client or AsyncClient(str(url), api_key=api_key, timeout=timeout)

    @property
    def client(self) -> AsyncClient:
        """The client every call goes through."""
        return self._client

    async def close(self) -> None:
        """Close the client, when the session built it."""
        if self._owned:
            await self._client.aclose()

    # -- Session --------------------------------------------------------------------------

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items in the order they were added; with ``limit``, the latest
        ``limit`` of them (still oldest first)."""
        entries = await self._entries()
        if limit is not None:
            entries = entries[-limit:] if limit > 0 else []
        return [item for _, _, item in entries]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Capture each item as a working record; they keep the order given."""
        if not items:
            return
        stamp = time.time_ns()
        captures = [self._capture(item, f"{stamp:020d}-{i:06d}") for i, item in enumerate(items)]
        for start in range(0, len(captures), PAGE):
            ops = await self._client.capture_many(captures[start : start + PAGE], wait=self.wait)
            for op in ops:
                _finished(op)

    async def pop_item(self) -> TResponseInputItem | None:
        """Retract the latest item and return it; ``None`` when the session is empty."""
        for _ in range(3):
            entries = await self._entries()
            if not entries:
                return None
            _, record, item = entries[-1]
            try:
                _finished(await self._client.retract(record.id, self._rationale("pop_item"), wait=self.wait))
            except RevisionRefused:  # popped by another caller first: take the next one
                continue
            return item
        return None

    async def clear_session(self) -> None:
        """Erase the session's records, popped ones included (RFC 15.4), where the key may
        erase; else retract every item."""
        reason = self._rationale("clear_session")
        try:
            every = await self._entries(("active", "contested", "retracted"))
            for start in range(0, len(every), MAX_ERASE):
                await self._erase([record.id for _, record, _ in every[start : start + MAX_ERASE]], reason)
            return
        except Forbidden:  # this key may not erase
            pass
        for _, record, _ in await self._entries():
            try:
                _finished(await self._client.retract(record.id, reason, wait=self.wait))
            except RevisionRefused:
                pass

    async def _erase(self, ids: list[UUID], reason: str) -> None:
        for attempt in range(2):
            dry = await self._client.erase(reason=reason, records=ids)
            try:
                await self._client.erase(reason=reason, records=ids, confirm=dry.confirm)
                return
            except Conflict:  # the records changed between the dry run and the erasure
                if attempt:
                    raise

    # -- records --------------------------------------------------------------------------

    def _rationale(self, call: str) -> str:
        return f"agents session {call} of session {self.session_id[:200]!r}"

    def _capture(self, item: TResponseInputItem, position: str) -> dict[str, Any]:
        body: dict[str, Any] = {
            "source_kind": "working_state",
            "scope": self.scope,
            "content": {
                "thread_id": self.session_id[:MAX_THREAD],
                "task_state": "executing",
                "context_summary": item_text(item),
            },
            "tags": [ITEM_TAG],
            "metadata": {META: {"session_id": self.session_id, "position": position, "item": item}},
        }
        if self.sensitivity is not None:
            body["sensitivity"] = self.sensitivity
        return body

    async def _entries(
        self, status: Sequence[RecordStatusName] = ("active", "contested")
    ) -> list[tuple[str, Record, TResponseInputItem]]:
        """The session's items of ``status`` as ``(position, record, item)``, oldest first."""
        entries: list[tuple[str, Record, TResponseInputItem]] = []
        filters: RecordFilters = {
            "scope": self.scope,
            "tag": ITEM_TAG,
            "type": "working",
            "status": list(status),
            "limit": PAGE,
        }
        while True:
            page: RecordPage = await self._client.list_records(**filters)
            for record in page.records:
                meta = record.metadata.get(META)
                if isinstance(meta, dict) and meta.get("session_id") == self.session_id and "item" in meta:
                    entries.append((str(meta.get("position", "")), record, meta["item"]))
            if not page.next_cursor:
                break
            filters["cursor"] = page.next_cursor
        entries.sort(key=lambda e: (e[0], e[1].id))
        return entries


def item_text(item: Any) -> str:
    """What retrieval indexes of an item: its role and text, a tool call and its arguments,
    or a tool's output; the JSON of anything else; at most a working summary long."""
    if not isinstance(item, dict):
        return json.dumps(item, default=str)[:MAX_SUMMARY]
    kind, role = item.get("type"), item.get("role")
    if kind == "function_call":
        text = f"call {item.get('name')}({item.get('arguments', '')})"
    elif kind == "function_call_output":
        text = f"output: {item.get('output')}"
    elif role is not None:
        text = f"{role}: {_content_text(item.get('content'))}"
    else:
        text = json.dumps(item, default=str)
    return text[:MAX_SUMMARY]


def _content_text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return " ".join(str(p.get("text", "")) for p in content if isinstance(p, dict))
    return ""


def _finished(op: Operation) -> Operation:
    if not op.finished:
        raise OperationTimeout(f"operation {op.operation_id} is still {op.status}", operation=op)
    return op.raise_for_error()
