"""The Python SDK against the live API: uvicorn, Postgres, and real Celery workers where marked.

Pure retry and ingest mechanics use ``httpx.MockTransport`` or a scripted HTTP server on
127.0.0.1; everything about what the server does runs against the real one.
"""

from __future__ import annotations

import asyncio
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import httpx
import pytest
from membrane_client import (
    AsyncClient,
    CaptureRequest,
    Client,
    ConnectionFailed,
    EncryptionKeyUnavailable,
    EvidenceRef,
    Forbidden,
    IdempotencyConflict,
    IngestProgress,
    InvalidInput,
    MembraneError,
    NotFound,
    OperationTimeout,
    PayloadTooLarge,
    RateLimited,
    RecordTooLarge,
    RevisionRefused,
    ServerError,
    TombstonedFact,
    Unauthorized,
    Unavailable,
)

from membrane_core import Membrane
from membrane_core.inbox.submit import RecordingDispatcher
from tests.support.api import ServeFn
from tests.support.processes import Spawn
from tests.support.sql import scalar

FACT: dict[str, Any] = {
    "source_kind": "observation",
    "scope": "project-a",
    "content": {"subject": "acme-api", "predicate": "runs_on", "object": "Python 3.12"},
}
KEYS = {
    "writer-key": {"read_scopes": ["team-a"], "write_scopes": ["team-a"], "max_sensitivity": "medium"},
    "reader-key": {"read_scopes": ["team-a"], "write_scopes": [], "max_sensitivity": "low"},
}


def event(i: int, scope: str = "bulk") -> dict[str, Any]:
    return {"source_kind": "event", "scope": scope, "content": {"text": f"event number {i}"}}


def count(url: str, text: str | None = None) -> int:
    """Episodic records in Postgres, all or those whose payload text is ``text``."""
    sql = (
        "SELECT count(*) FROM memory_records r JOIN record_payloads p ON p.record_id = r.id "
        "WHERE r.type = 'episodic'"
    )
    if text is None:
        return scalar(url, sql)
    return scalar(url, sql + " AND p.body->>'text' = %s", text)


def _objects(client: Client) -> list[tuple[str, str]]:
    hits = client.retrieve("acme-api runs on", scopes=["project-a"], memory_types=["semantic"])
    return [(str(r.id), (r.payload or {})["object"]) for r in hits.records]


# -- the correction loop ----------------------------------------------------------------


def test_capture_retrieve_supersede_retrieve(sdk: Client) -> None:
    op = sdk.capture(CaptureRequest.model_validate(FACT), wait=5)
    assert op.status == "succeeded", op.error
    episode, fact = op.record_ids
    assert sdk.get(fact).type == "semantic" and sdk.get(episode).type == "episodic"
    assert _objects(sdk) == [(str(fact), "Python 3.12")]

    new = sdk.supersede(
        fact,
        {"subject": "acme-api", "predicate": "runs_on", "object": "Python 3.13"},
        "the Dockerfile moved to 3.13",
        evidence=[EvidenceRef(kind="artifact", ref="Dockerfile")],
        wait=5,
    )
    assert new.status == "succeeded", new.error
    replacement = new.record_ids[0]
    assert _objects(sdk) == [(str(replacement), "Python 3.13")]  # only the replacement comes back
    old = sdk.get(fact)
    assert old.status == "retracted" and old.retracted_at is not None
    assert sdk.get(replacement).status == "active"
    history = sdk.audit(fact)
    assert history.chain_valid
    assert any(e.rationale == "the Dockerfile moved to 3.13" for e in history.entries)


def test_other_revisions_and_operator_endpoints(sdk: Client) -> None:
    fact = sdk.capture(FACT, wait=5).record_ids[1]
    other = sdk.capture({**FACT, "content": {**FACT["content"], "object": "Python 3.11"}}, wait=5).record_ids[
        1
    ]
    assert sdk.reinforce(fact, wait=5).succeeded
    assert sdk.penalize(fact, 0.05, "less sure", wait=5).succeeded
    contested = sdk.contest(fact, "the CI says otherwise", contesting_record_id=other, wait=5)
    assert contested.succeeded, contested.error
    assert sdk.get(fact).status == "contested"
    refused = sdk.supersede(fact, {"object": "Python 3.14"}, "no evidence given", wait=5)
    assert refused.failed and refused.error is not None and refused.error.code == "revision_refused"
    with pytest.raises(RevisionRefused):
        refused.raise_for_error()
    assert sdk.retract(other, "wrong service", wait=5).raise_for_error().succeeded
    assert sdk.retrieve(
        "acme-api runs on",
        scopes=["project-a"],
        include_retracted=True,
        memory_types=["semantic"],
        limit=5,
        expand=1,
    ).records
    run = sdk.run_maintenance(["decay", "prune"], wait=10)
    assert run.kind == "maintenance" and run.succeeded, run.error
    metrics = sdk.metrics()
    assert metrics.total_records >= 4 and metrics.records_by_type.get("semantic", 0) >= 2


# -- idempotency ------------------------------------------------------------------------


class LosingTransport(httpx.BaseTransport):
    """Forwards each request to the server, but loses the answer of the first write."""

    def __init__(self) -> None:
        self.inner = httpx.HTTPTransport()
        self.keys: list[str | None] = []

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        response = self.inner.handle_request(request)
        if request.method == "POST":
            self.keys.append(request.headers.get("Idempotency-Key"))
            if len(self.keys) == 1:
                response.read()
                response.close()
                raise httpx.ReadError("connection reset after the server committed")
        return response

    def close(self) -> None:
        self.inner.close()


def test_a_retried_write_does_not_duplicate(serve: ServeFn, database_url: str) -> None:
    url = str(serve().base_url)
    transport = LosingTransport()
    with Client(url, transport=transport, backoff=0.01) as client:
        op = client.capture(event(1), wait=5)
    assert op.succeeded
    # the first answer was lost after the write committed; the retry carried the same key
    assert count(database_url, "event number 1") == 1
    assert len(transport.keys) == 2 and transport.keys[0] == transport.keys[1] is not None
    with Client(url) as client:
        again = client.capture(event(2), idempotency_key="job-1", wait=5)
        assert client.capture(event(2), idempotency_key="job-1", wait=5).operation_id == again.operation_id
        assert count(database_url, "event number 2") == 1
        # positive control: another key is another write
        other = client.capture(event(2), idempotency_key="job-2", wait=5)
        assert other.operation_id != again.operation_id
        assert count(database_url, "event number 2") == 2
        with pytest.raises(IdempotencyConflict) as conflict:
            client.capture(event(3), idempotency_key="job-1")
        assert conflict.value.status == 409 and conflict.value.code == "idempotency_conflict"


def test_capture_many_derives_the_chunk_key(sdk: Client, database_url: str) -> None:
    batch = [event(10), event(11), {"source_kind": "event", "scope": "", "content": {}}, event(12)]
    ops = sdk.capture_many(batch, idempotency_key="many", wait=5)
    assert [o.status for o in ops] == ["succeeded", "succeeded", "failed", "succeeded"]
    assert ops[2].error is not None and ops[2].error.code == "invalid_input"
    assert ops[2].error.details[0].field == "scope"
    keys = [
        scalar(
            database_url,
            "SELECT count(*) FROM operations WHERE id = %s AND idempotency_key = %s",
            o.operation_id,
            f"many:0#{i}",
        )
        for i, o in enumerate(ops)
    ]
    assert keys == [1, 1, 1, 1]
    replay = sdk.capture_many(batch, idempotency_key="many")
    assert [o.operation_id for o in replay] == [o.operation_id for o in ops]
    assert count(database_url) == 3


# -- errors ------------------------------------------------------------------------------


def test_refusals_raise_their_typed_exception(sdk: Client, serve: ServeFn) -> None:
    with pytest.raises(NotFound) as missing:
        sdk.get(uuid.uuid4())
    assert (missing.value.status, missing.value.code) == (404, "not_found")
    with pytest.raises(NotFound):
        sdk.operation(uuid.uuid4())
    with pytest.raises(InvalidInput) as invalid:
        sdk.capture({"source_kind": "event", "content": {"text": "no scope"}})
    assert invalid.value.status == 422 and [d["field"] for d in invalid.value.details] == ["scope"]
    with pytest.raises(PayloadTooLarge) as large:
        sdk.capture({**event(0), "content": {"text": "x" * (2 * 1024 * 1024)}})
    assert large.value.status == 413
    with pytest.raises(InvalidInput):
        sdk.run_maintenance(["defrag"])
    assert sdk.capture(event(0), wait=5).succeeded  # positive control: a valid capture passes

    url = str(serve(keys=KEYS).base_url)
    team = {**event(0, scope="team-a")}
    with Client(url) as anonymous, pytest.raises(Unauthorized) as unauthorized:
        anonymous.capture(team)
    assert unauthorized.value.status == 401
    with Client(url, api_key="reader-key") as reader, pytest.raises(Forbidden) as forbidden:
        reader.capture(team)
    assert forbidden.value.status == 403
    with Client(url, api_key="writer-key") as writer:
        assert writer.capture(team, wait=5).succeeded


def _answer(status: int, code: str | None, **headers: str) -> httpx.Response:
    body = {"error": {"code": code, "message": f"{code} refused", "details": []}} if code else None
    if body is None:
        return httpx.Response(status, text="<html>bad gateway</html>", headers=headers)
    return httpx.Response(status, json=body, headers=headers)


@pytest.mark.parametrize(
    ("status", "code", "expected"),
    [
        (400, "bad_request", "BadRequest"),
        (422, "invalid_input", "InvalidInput"),
        (413, "payload_too_large", "PayloadTooLarge"),
        (413, "record_too_large", "RecordTooLarge"),
        (401, "unauthorized", "Unauthorized"),
        (403, "forbidden", "Forbidden"),
        (404, "not_found", "NotFound"),
        (409, "conflict", "Conflict"),
        (409, "idempotency_conflict", "IdempotencyConflict"),
        (409, "revision_refused", "RevisionRefused"),
        (409, "tombstoned_fact", "TombstonedFact"),
        (429, "too_many_requests", "RateLimited"),
        (503, "unavailable", "Unavailable"),
        (503, "encryption_key_unavailable", "EncryptionKeyUnavailable"),
        (500, "internal", "ServerError"),
        (502, None, "ServerError"),
        (404, "some_new_code", "NotFound"),
        (418, None, "MembraneError"),
    ],
)
def test_error_class_by_code_then_status(status: int, code: str | None, expected: str) -> None:
    with Client(
        "http://127.0.0.1:9", max_retries=0, transport=httpx.MockTransport(lambda _: _answer(status, code))
    ) as client:
        with pytest.raises(MembraneError) as raised:
            client.get(uuid.uuid4())
    assert type(raised.value).__name__ == expected
    assert raised.value.status == status
    assert raised.value.code == (code or {502: "internal", 418: "error"}[status])


def test_the_code_outranks_the_status() -> None:
    # a 409 is a Conflict, but its code names which one
    for code, cls in (("tombstoned_fact", TombstonedFact), ("revision_refused", RevisionRefused)):
        with (
            Client(
                "http://127.0.0.1:9", transport=httpx.MockTransport(lambda _, c=code: _answer(409, c))
            ) as client,
            pytest.raises(cls),
        ):
            client.retract(uuid.uuid4(), "x")
    with (
        Client(
            "http://127.0.0.1:9", transport=httpx.MockTransport(lambda _: _answer(413, "record_too_large"))
        ) as client,
        pytest.raises(RecordTooLarge),
    ):
        client.retrieve("x")
    assert not issubclass(RecordTooLarge, PayloadTooLarge) and issubclass(ServerError, MembraneError)


def test_an_unexpected_answer_is_a_membrane_error() -> None:
    with Client(
        "http://127.0.0.1:9",
        transport=httpx.MockTransport(lambda _: httpx.Response(200, text="<html>captive portal</html>")),
    ) as client:
        with pytest.raises(MembraneError) as raised:
            client.metrics()
    assert raised.value.code == "bad_answer" and raised.value.status == 200


def test_the_sdk_imports_nothing_of_the_server() -> None:
    code = (
        "import sys, membrane_client; "
        "print(sorted({m.split('.')[0] for m in sys.modules} & {'membrane_core', 'api', 'workers', "
        "'membrane_cli', 'fastapi', 'psycopg', 'celery'}))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=tempfile.gettempdir()
    )
    assert out.stdout.strip() == "[]"


# -- retries ------------------------------------------------------------------------------


class Scripted:
    """An HTTP server on 127.0.0.1 that answers from a script and records each request."""

    def __init__(self, script: list[tuple[int, dict[str, str], Any]]) -> None:
        self.script = script
        self.seen: list[tuple[float, str, dict[str, str]]] = []
        owner = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                self.rfile.read(length)
                owner.seen.append((time.monotonic(), self.command, dict(self.headers)))
                status, headers, body = owner.script[min(len(owner.seen), len(owner.script)) - 1]
                data = json.dumps(body).encode()
                self.send_response(status)
                for name, value in {
                    **headers,
                    "Content-Type": "application/json",
                    "Content-Length": str(len(data)),
                }.items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = _answer

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.05,), daemon=True)

    def __enter__(self) -> Scripted:
        self.thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.server.shutdown()
        self.server.server_close()


def _op(status: str = "succeeded") -> dict[str, Any]:
    return {
        "operation_id": str(uuid.uuid4()),
        "kind": "capture",
        "status": status,
        "record_ids": [],
        "created_at": datetime.now(UTC).isoformat(),
    }


UNAVAILABLE = {"error": {"code": "unavailable", "message": "postgres unavailable", "details": []}}


def test_503_is_retried_after_retry_after_with_the_same_key() -> None:
    with (
        Scripted([(503, {"Retry-After": "1"}, UNAVAILABLE), (202, {}, _op("queued"))]) as server,
        Client(server.url, backoff=0.01) as client,
    ):
        op = client.capture(event(0))
    assert op.status == "queued"
    (t0, _, first), (t1, _, second) = server.seen
    # backoff alone would have waited ~0.01 s: the pause is the server's Retry-After
    assert t1 - t0 >= 0.95
    assert first["Idempotency-Key"] == second["Idempotency-Key"]
    uuid.UUID(first["Idempotency-Key"])  # a fresh uuid4 when the caller gives none


def test_429_is_retried_but_other_4xx_are_not() -> None:
    limited = {"error": {"code": "too_many_requests", "message": "slow down", "details": []}}
    with (
        Scripted([(429, {"Retry-After": "0"}, limited), (200, {}, _op())]) as server,
        Client(server.url, backoff=0.01) as client,
    ):
        assert client.operation(uuid.uuid4()).succeeded
    assert len(server.seen) == 2
    gone = {"error": {"code": "not_found", "message": "no such record", "details": []}}
    with (
        Scripted([(404, {}, gone), (200, {}, _op())]) as server,
        Client(server.url, backoff=0.01) as client,
        pytest.raises(NotFound),
    ):
        client.get(uuid.uuid4())
    assert len(server.seen) == 1


@pytest.mark.parametrize("asynchronous", [False, True])
def test_a_missing_encryption_key_is_raised_at_once(asynchronous: bool) -> None:
    """RFC 7.6: waiting does not bring a key back; an outage's 503 before it is retried."""
    answers = [
        _answer(503, "unavailable", **{"Retry-After": "0"}),
        _answer(503, "encryption_key_unavailable", **{"Retry-After": "60"}),
        httpx.Response(200, json={"records": []}),
    ]
    calls: list[httpx.Request] = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return answers[len(calls) - 1]

    async def run_async() -> None:
        async with AsyncClient(
            "http://127.0.0.1:9", backoff=0.001, transport=httpx.MockTransport(handler)
        ) as client:
            await client.retrieve({"query": "x"})

    with pytest.raises(EncryptionKeyUnavailable) as exc:
        if asynchronous:
            asyncio.run(run_async())
        else:
            with Client(
                "http://127.0.0.1:9", backoff=0.001, transport=httpx.MockTransport(handler)
            ) as client:
                client.retrieve({"query": "x"})
    assert isinstance(exc.value, Unavailable) and exc.value.retry_after == 60
    assert len(calls) == 2  # the outage retried once, the missing key not at all


def test_retries_are_bounded_and_connection_errors_retried() -> None:
    calls: list[httpx.Request] = []

    def always_503(request: httpx.Request) -> httpx.Response:
        calls.append(request)
        return _answer(503, "unavailable", **{"Retry-After": "0"})

    with (
        Client(
            "http://127.0.0.1:9", max_retries=3, backoff=0.001, transport=httpx.MockTransport(always_503)
        ) as client,
        pytest.raises(Unavailable) as exc,
    ):
        client.reinforce(uuid.uuid4())
    assert len(calls) == 4 and exc.value.retry_after == 0
    assert len({r.headers["Idempotency-Key"] for r in calls}) == 1

    attempts: list[str] = []

    def flaky(request: httpx.Request) -> httpx.Response:
        attempts.append(request.headers["Idempotency-Key"])
        if len(attempts) < 3:
            raise httpx.ConnectError("connection refused")
        return httpx.Response(202, json=_op("queued"))

    with Client("http://127.0.0.1:9", backoff=0.001, transport=httpx.MockTransport(flaky)) as client:
        assert client.capture(event(0), idempotency_key="mine").status == "queued"
    assert attempts == ["mine"] * 3

    with (
        Client(
            "http://127.0.0.1:9",
            max_retries=2,
            backoff=0.001,
            transport=httpx.MockTransport(lambda _: (_ for _ in ()).throw(httpx.ConnectError("down"))),
        ) as client,
        pytest.raises(ConnectionFailed),
    ):
        client.metrics()
    with (
        Client(
            "http://127.0.0.1:9",
            max_retries=1,
            backoff=0.001,
            transport=httpx.MockTransport(lambda _: _answer(429, "rate_limited")),
        ) as client,
        pytest.raises(RateLimited),
    ):
        client.metrics()


# -- waiting --------------------------------------------------------------------------------


def test_wait_polls_until_the_operation_finishes(serve: ServeFn, api_membrane: Membrane) -> None:
    url = str(serve(dispatcher=RecordingDispatcher()).base_url)  # nothing processes the writes
    with Client(url) as client:
        op = client.capture(event(0), wait=0.3)
        assert op.status == "queued"  # waited on the server, then returned as it stands
        with pytest.raises(OperationTimeout) as late:
            client.wait(op, timeout=0.3)
        assert late.value.operation is not None and late.value.operation.status == "queued"
        worker = threading.Timer(
            0.3, api_membrane.inbox_worker.process_captures, [[op.operation_id]], {"worker": "test"}
        )
        worker.start()
        try:
            done = client.wait(op.operation_id, timeout=10)
        finally:
            worker.join()
    assert done.succeeded and done.record_ids == [op.record_id]


# -- ingest ---------------------------------------------------------------------------------


def _batch_handler(
    delay: float = 0.0,
    status_for: dict[str, int] | None = None,
) -> tuple[Any, dict[str, Any]]:
    state: dict[str, Any] = {"active": 0, "peak": 0, "keys": [], "lock": threading.Lock()}

    def handler(request: httpx.Request) -> httpx.Response:
        key = request.headers["Idempotency-Key"]
        with state["lock"]:
            state["keys"].append(key)
            state["active"] += 1
            state["peak"] = max(state["peak"], state["active"])
        try:
            time.sleep(delay)
            for suffix, status in (status_for or {}).items():
                if key.endswith(suffix):
                    code = {503: "unavailable", 413: "payload_too_large"}[status]
                    return _answer(status, code, **{"Retry-After": "0"})
            captures = json.loads(request.content)["captures"]
            return httpx.Response(202, json={"operations": [_op() for _ in captures]})
        finally:
            with state["lock"]:
                state["active"] -= 1

    return handler, state


def test_ingest_reads_lazily_with_bounded_chunks_in_flight() -> None:
    batch, concurrency, n = 50, 3, 1000
    handler, state = _batch_handler(delay=0.05)
    pulled, done, ahead = [0], [0], [0]

    def source() -> Iterator[dict[str, Any]]:
        for i in range(n):
            pulled[0] += 1
            ahead[0] = max(ahead[0], pulled[0] - done[0])
            yield event(i)

    def progress(p: IngestProgress) -> None:
        done[0] = p.items

    started = time.monotonic()
    with Client("http://127.0.0.1:9", transport=httpx.MockTransport(handler)) as client:
        result = client.ingest(
            source(), batch=batch, concurrency=concurrency, on_progress=progress, idempotency_key="lazy"
        )
    elapsed = time.monotonic() - started
    assert result.total == n and result.succeeded == n and result.failed == 0
    assert [i.index for i in result.items] == list(range(n))
    assert 1 < state["peak"] <= concurrency  # the pool is used, never beyond its size...
    assert ahead[0] == (concurrency + 1) * batch  # ...and the reader never gets further ahead
    assert elapsed >= (n / batch / concurrency) * 0.05 * 0.9  # a slow server slows the reader
    assert sorted(state["keys"]) == sorted(f"lazy:{i}" for i in range(n // batch))


def test_ingest_reports_the_items_of_a_chunk_that_failed_after_every_retry() -> None:
    handler, state = _batch_handler(status_for={":1": 503, ":3": 413})
    with Client(
        "http://127.0.0.1:9", max_retries=2, backoff=0.001, transport=httpx.MockTransport(handler)
    ) as client:
        result = client.ingest(
            (event(i) for i in range(450)), batch=100, concurrency=2, idempotency_key="job"
        )
    failed = {i.index: i for i in result.failures}
    assert sorted(failed) == list(range(100, 200)) + list(range(300, 400))
    codes = {i: item.error.code if item.error else None for i, item in failed.items()}
    assert {codes[i] for i in range(100, 200)} == {"unavailable"}
    assert {codes[i] for i in range(300, 400)} == {"payload_too_large"}
    assert all(i.operation_id is None for i in failed.values())
    assert result.succeeded == 250 and result.total == 450
    assert state["keys"].count("job:1") == 3  # retried up to max_retries
    assert state["keys"].count("job:3") == 1  # a 4xx is never retried
    with pytest.raises(ValueError):
        Client("http://127.0.0.1:9").ingest([], batch=1001)


@pytest.mark.queue
def test_ingest_through_real_workers(serve: ServeFn, spawn: Spawn, redis_url: str, database_url: str) -> None:
    """2,500 captures, four of them invalid, through redis and real Celery workers."""
    worker = spawn("worker", "ingest,revision", concurrency=2)
    url = str(serve(broker_url=redis_url).base_url)
    # index -> (an invalid capture, the field the server names)
    bad: dict[int, tuple[dict[str, Any], str]] = {
        7: ({"source_kind": "event", "scope": "", "content": {"text": "x"}}, "scope"),
        1000: ({"source_kind": "bogus", "scope": "bulk", "content": {}}, "source_kind"),
        1999: (
            {"source_kind": "observation", "scope": "bulk", "content": {"subject": "a", "predicate": "b"}},
            "content",
        ),
        2499: ({"source_kind": "event", "scope": "bulk"}, "content"),
    }
    n = 2500

    def source() -> Iterator[dict[str, Any]]:
        for i in range(n):
            yield bad[i][0] if i in bad else event(i)

    seen: list[IngestProgress] = []
    with Client(url, timeout=30.0) as client:
        result = client.ingest(
            source(), batch=500, concurrency=3, wait=60, on_progress=seen.append, idempotency_key="bulk-1"
        )
        assert sorted(i.index for i in result.failures) == sorted(bad)
        for item in result.failures:
            assert item.error is not None and item.error.code == "invalid_input"
            assert bad[item.index][1] in {d.field.split(".")[0] for d in item.error.details}
        assert result.succeeded == n - len(bad) and result.pending == 0
        assert seen[-1].items == n and len(seen) == 5
        valid = n - len(bad)
        assert count(database_url) == valid
        assert (
            scalar(
                database_url,
                "SELECT count(DISTINCT p.body->>'text') FROM record_payloads p "
                "JOIN memory_records r ON r.id = p.record_id WHERE r.type = 'episodic'",
            )
            == valid
        )

        # the same ingest again under its key: the same operations, nothing written twice
        again = client.ingest(source(), batch=500, concurrency=3, idempotency_key="bulk-1")
        assert again.operation_ids == result.operation_ids
        assert count(database_url) == valid

        # the revision queue too: supersede through a worker
        fact = client.capture(FACT, wait=20).raise_for_error().record_ids[1]
        new = client.supersede(
            fact,
            {"object": "Python 3.13"},
            "upgraded",
            evidence=[{"kind": "artifact", "ref": "Dockerfile"}],
            wait=20,
        )
        assert new.raise_for_error().kind == "supersede"
        assert client.get(fact).status == "retracted"
        assert _objects(client) == [(str(new.record_ids[0]), "Python 3.13")]
    # the work was done by the Celery worker, not in the API process
    log = worker.text()
    assert "Task membrane.ingest[" in log and "Task membrane.revision[" in log


def test_ingest_with_the_live_server_in_process(sdk: Client, database_url: str) -> None:
    result = sdk.ingest(
        (
            {"source_kind": "event", "scope": "bulk", "content": {"text": f"t{i}"}}
            if i != 5
            else {"source_kind": "event"}
            for i in range(30)
        ),
        batch=8,
        concurrency=2,
        wait=True,
    )
    assert [i.index for i in result.failures] == [5]
    assert result.succeeded == 29
    assert count(database_url) == 29


# -- async ----------------------------------------------------------------------------------


def test_async_client_round_trip(serve: ServeFn, database_url: str) -> None:
    url = str(serve().base_url)

    async def source() -> AsyncIterator[dict[str, Any]]:
        for i in range(40):
            await asyncio.sleep(0)
            yield event(i, scope="async") if i % 13 else {"source_kind": "event", "scope": "async"}

    async def main() -> None:
        async with AsyncClient(url, timeout=30.0, backoff=0.01) as client:
            op = await client.capture(FACT, wait=5)
            assert op.succeeded, op.error
            fact = op.record_ids[1]
            assert ((await client.get(fact)).payload or {})["object"] == "Python 3.12"
            hits = await client.retrieve("acme-api runs on", scopes=["project-a"])
            assert fact in [r.id for r in hits.records]
            retracted = await client.retract(fact, "wrong", wait=5)
            assert (await client.wait(retracted)).succeeded
            assert (await client.get(fact)).status == "retracted"
            with pytest.raises(NotFound):
                await client.get(uuid.uuid4())
            result = await client.ingest(source(), batch=10, concurrency=2, wait=True)
            assert [i.index for i in result.failures] == [0, 13, 26, 39]
            assert result.succeeded == 36
            assert (await client.metrics()).total_records >= 38

    asyncio.run(main())
    assert scalar(database_url, "SELECT count(*) FROM memory_records WHERE scope = 'async'") == 36


def test_async_client_retries_and_reports_chunks_like_the_sync_one() -> None:
    seen: list[tuple[str, str]] = []

    def handler(request: httpx.Request) -> httpx.Response:
        key = request.headers.get("Idempotency-Key", "")
        seen.append((request.url.path, key))
        if key.endswith(":1") or (key == "once" and len(seen) == 1):
            return _answer(503, "unavailable", **{"Retry-After": "0"})
        if request.url.path.endswith(":batch"):
            captures = json.loads(request.content)["captures"]
            return httpx.Response(202, json={"operations": [_op() for _ in captures]})
        return httpx.Response(202, json=_op("queued"))

    async def main() -> None:
        async with AsyncClient(
            "http://127.0.0.1:9", max_retries=2, backoff=0.001, transport=httpx.MockTransport(handler)
        ) as client:
            assert (await client.capture(event(0), idempotency_key="once")).status == "queued"
            result = await client.ingest([event(i) for i in range(25)], batch=10, idempotency_key="a")
            assert [i.index for i in result.failures] == list(range(10, 20))
            assert result.succeeded == 15
        async with AsyncClient(
            "http://127.0.0.1:9", transport=httpx.MockTransport(lambda _: _answer(404, "not_found"))
        ) as gone:
            with pytest.raises(NotFound):
                await gone.get(uuid.uuid4())

    asyncio.run(main())
    assert seen[:2] == [("/v1/captures", "once")] * 2
    assert [k for _, k in seen].count("a:1") == 3
