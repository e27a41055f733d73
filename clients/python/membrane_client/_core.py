"""What the sync and async clients share: requests as data, retry policy, answer parsing.

Each endpoint is described by a :class:`Call` (method, path, query, JSON body,
idempotency key, how to parse the answer) built without any I/O, so the two clients
differ only in how they send it and how they sleep.
"""

from __future__ import annotations

import email.utils
import enum
import random
import time
import uuid
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any, Generic, Literal, Protocol, TypeVar
from urllib.parse import quote
from uuid import UUID

import httpx
from pydantic import BaseModel, TypeAdapter

from membrane_client._version import __version__
from membrane_client.errors import ConnectionFailed, MembraneError, error_from
from membrane_client.models import (
    AuditHistory,
    Body,
    CaptureRequest,
    DecideResult,
    Decision,
    DecisionResult,
    Erasure,
    EvidenceRef,
    ExpandOptions,
    ExportFilters,
    ImportReport,
    Lineage,
    Metrics,
    Operation,
    OperationBatch,
    OperationFilters,
    OperationPage,
    Record,
    RecordFilters,
    RecordPage,
    RequeueResult,
    RetrieveResult,
    ReviewFilters,
    ReviewPage,
    RevisedRecord,
    ScopeList,
    WorkFilters,
    WorkOverview,
)

T = TypeVar("T")

#: Most captures one batch request may carry (RFC 3.6).
MAX_BATCH = 1000
#: Longest server-side ``?wait`` the API accepts, in seconds (RFC 10.1).
MAX_SERVER_WAIT = 30.0
#: Longest pause between two retries, whatever the backoff or ``Retry-After`` says.
MAX_RETRY_DELAY = 60.0
#: Answers worth retrying: the server asks to come back later (RFC 10.5).
RETRY_STATUSES = frozenset({429, 503})
#: Error codes of those statuses that waiting does not fix: the operator must (RFC 7.6).
NOT_RETRIED_CODES = frozenset({"encryption_key_unavailable"})
#: Failures of the connection itself; a write is safe to resend since it carries its key.
RETRY_EXCEPTIONS: tuple[type[Exception], ...] = (
    httpx.TimeoutException,
    httpx.NetworkError,
    httpx.RemoteProtocolError,
)

#: RFC 15.1, 15.2: the media type of a bundle.
TAR = "application/x-tar"

#: (method, path template) of every endpoint the client calls, by client method.
ENDPOINTS: dict[str, tuple[str, str]] = {
    "capture": ("POST", "/v1/captures"),
    "capture_many": ("POST", "/v1/captures:batch"),
    "get": ("GET", "/v1/records/{record_id}"),
    "audit": ("GET", "/v1/records/{record_id}/audit"),
    "retrieve": ("POST", "/v1/retrieve"),
    "supersede": ("POST", "/v1/records/{record_id}/supersede"),
    "fork": ("POST", "/v1/records/{record_id}/fork"),
    "merge": ("POST", "/v1/records:merge"),
    "retract": ("POST", "/v1/records/{record_id}/retract"),
    "contest": ("POST", "/v1/records/{record_id}/contest"),
    "reinforce": ("POST", "/v1/records/{record_id}/reinforce"),
    "penalize": ("POST", "/v1/records/{record_id}/penalize"),
    "metrics": ("GET", "/v1/metrics"),
    "run_maintenance": ("POST", "/v1/maintenance/run"),
    "operation": ("GET", "/v1/operations/{operation_id}"),
    "list_records": ("GET", "/v1/records"),
    "lineage": ("GET", "/v1/records/{record_id}/lineage"),
    "list_operations": ("GET", "/v1/operations"),
    "work": ("GET", "/v1/work"),
    "requeue_work": ("POST", "/v1/work:requeue"),
    "list_scopes": ("GET", "/v1/scopes"),
    "review_queue": ("GET", "/v1/review"),
    "decide": ("POST", "/v1/review:decide"),
    "export": ("GET", "/v1/export"),
    "import_bundle": ("POST", "/v1/import"),
    "erase": ("POST", "/v1/erase"),
}

#: The query parameters of each list call, by client method (RFC 10.7). The server ignores
#: a parameter it does not know, so a misspelt filter is refused here rather than widening
#: the list without a word.
FILTERS: dict[str, frozenset[str]] = {
    "list_records": RecordFilters.__optional_keys__,
    "list_operations": OperationFilters.__optional_keys__,
    "work": WorkFilters.__optional_keys__,
    "review_queue": ReviewFilters.__optional_keys__,
    "export": ExportFilters.__optional_keys__,
}

_JSON: TypeAdapter[Any] = TypeAdapter(Any)

Id = UUID | str
Wait = float | bool | None
Capture = CaptureRequest | Mapping[str, Any]
Revised = RevisedRecord | Mapping[str, Any]
Evidence = Sequence[EvidenceRef | Mapping[str, Any]] | None
DecisionInput = Decision | Mapping[str, Any]


def client_headers(api_key: str | None) -> dict[str, str]:
    """Headers of every request: what the client accepts, who it is, and its key."""
    headers = {"Accept": "application/json", "User-Agent": f"membrane-client/{__version__}"}
    if api_key is not None:
        headers["Authorization"] = f"Bearer {api_key}"
    return headers


def jsonable(value: Any) -> Any:
    """``value`` with every model turned into its JSON object (unset fields left out)."""
    if isinstance(value, Body):
        return value.to_json()
    if isinstance(value, BaseModel):
        return value.model_dump(mode="json", exclude_none=True)
    if isinstance(value, Mapping):
        return {str(k): jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [jsonable(v) for v in value]
    return value


def new_key() -> str:
    """A fresh idempotency key."""
    return str(uuid.uuid4())


def chunk_key(key: str, index: int) -> str:
    """The key of chunk ``index`` of a bulk write under the caller's ``key``.

    The server binds item ``i`` of the chunk to ``f"{chunk_key}#{i}"`` (RFC 9.2), so an
    item's key depends on the caller's key, the chunk size and its place only.
    """
    return f"{key}:{index}"


def server_wait(wait: Wait) -> float | None:
    """The ``?wait`` to send for a caller's ``wait`` (``True`` is the server's longest)."""
    if wait is None or wait is False:
        return None
    seconds = MAX_SERVER_WAIT if wait is True else float(wait)
    if seconds <= 0:
        return None
    return min(seconds, MAX_SERVER_WAIT)


def wait_seconds(wait: Wait) -> float:
    """How long the caller asked to wait in all (``True``: the server's longest wait)."""
    if wait is None or wait is False:
        return 0.0
    return MAX_SERVER_WAIT if wait is True else max(0.0, float(wait))


def _path_part(value: Id) -> str:
    # an id is put in the path as one segment, whatever the caller passed
    return quote(str(value), safe="")


def _time(value: datetime | str) -> str:
    return value.isoformat() if isinstance(value, datetime) else value


def _drop_none(data: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in data.items() if v is not None}


@dataclass(frozen=True)
class Call(Generic[T]):
    """One request, described without sending it, and how to read its answer."""

    method: str
    path: str
    parse: Callable[[bytes], T]
    #: a list value repeats its parameter (``?scope=a&scope=b``)
    params: Mapping[str, str | list[str]] = field(default_factory=dict)
    body: Any = None
    #: the Idempotency-Key of a write; ``None`` for a read
    key: str | None = None
    #: the server-side ``?wait`` in seconds, which the read timeout must cover
    wait: float | None = None
    #: a read that must see the client's own writes: it carries the client's latest token
    consistent: bool = False
    #: a body sent as it is, not as JSON (a bundle's tar, RFC 15.2)
    raw: bytes | None = None

    def content(self) -> bytes | None:
        """The JSON body as bytes (datetimes, UUIDs and models included), or the raw body."""
        if self.raw is not None:
            return self.raw
        return None if self.body is None else _JSON.dump_json(jsonable(self.body))

    def headers(self) -> dict[str, str]:
        """Per-request headers: the content type and the idempotency key."""
        if self.raw is not None:
            headers = {"Content-Type": TAR}
        else:
            headers = {"Content-Type": "application/json"} if self.body is not None else {}
        if self.key is not None:
            headers["Idempotency-Key"] = self.key
        return headers


#: RFC 13.2: the header of a consistency token, on write answers and on reads.
CONSISTENCY = "Membrane-Consistency"


def _lsn(token: str) -> int:
    hi, lo = token.split("/")
    return (int(hi, 16) << 32) | int(lo, 16)


class Tokens:
    """RFC 13.2: the latest consistency token of this client's writes, sent with its reads so
    that a replica serves them only once it holds those writes."""

    def __init__(self) -> None:
        self.latest: str | None = None

    def seen(self, response: httpx.Response) -> None:
        """Keep the answer's token if it is later than the one kept."""
        token = response.headers.get(CONSISTENCY)
        if not token:
            return
        try:
            if self.latest is None or _lsn(token) > _lsn(self.latest):
                self.latest = token
        except ValueError:
            return  # not a token this client reads: ignored, as an unknown header is

    def headers(self, call: Call[Any]) -> dict[str, str]:
        """``call``'s headers, with the token when it is a read that must see the writes."""
        headers = call.headers()
        if call.consistent and self.latest is not None:
            headers[CONSISTENCY] = self.latest
        return headers


def _operation(data: bytes) -> Operation:
    return Operation.model_validate_json(data)


def _operations(data: bytes) -> list[Operation]:
    return OperationBatch.model_validate_json(data).operations


def _record(data: bytes) -> Record:
    return Record.model_validate_json(data)


def _audit(data: bytes) -> AuditHistory:
    return AuditHistory.model_validate_json(data)


def _retrieve(data: bytes) -> RetrieveResult:
    return RetrieveResult.model_validate_json(data)


def _metrics(data: bytes) -> Metrics:
    return Metrics.model_validate_json(data)


def _write(name: str, body: Any, wait: Wait, key: str | None, **path: Id) -> Call[Operation]:
    method, template = ENDPOINTS[name]
    seconds = server_wait(wait)
    params = {"wait": f"{seconds:g}"} if seconds is not None else {}
    return Call(
        method,
        template.format(**{k: _path_part(v) for k, v in path.items()}),
        _operation,
        params=params,
        body=body,
        key=key or new_key(),
        wait=seconds,
    )


def capture(capture: Any, wait: Wait, key: str | None) -> Call[Operation]:
    """``POST /v1/captures``."""
    return _write("capture", capture, wait, key)


def capture_batch(captures: Sequence[Any], wait: Wait, key: str) -> Call[list[Operation]]:
    """``POST /v1/captures:batch`` with an explicit key (a chunk's derived key)."""
    seconds = server_wait(wait)
    params = {"wait": f"{seconds:g}"} if seconds is not None else {}
    return Call(
        "POST",
        ENDPOINTS["capture_many"][1],
        _operations,
        params=params,
        body={"captures": list(captures)},
        key=key,
        wait=seconds,
    )


def get(record_id: Id, as_of: datetime | str | None, valid_at: datetime | str | None) -> Call[Record]:
    """``GET /v1/records/{id}``, optionally as believed at ``as_of`` and valid at ``valid_at``."""
    params = _drop_none({"as_of": as_of and _time(as_of), "valid_at": valid_at and _time(valid_at)})
    return Call("GET", f"/v1/records/{_path_part(record_id)}", _record, params=params)


def audit(record_id: Id) -> Call[AuditHistory]:
    """``GET /v1/records/{id}/audit``."""
    return Call("GET", f"/v1/records/{_path_part(record_id)}/audit", _audit)


def retrieve(
    query: str | None,
    scopes: Iterable[str] | None,
    limit: int,
    expand: int | Mapping[str, Any] | ExpandOptions | None,
    filters: Mapping[str, Any],
    include_proposed: bool = False,
) -> Call[RetrieveResult]:
    """``POST /v1/retrieve``; ``expand`` is a number of hops or the expand options.
    ``include_proposed`` is sent only when true, so a server without review (RFC 5.7) still
    takes the request."""
    hops = isinstance(expand, int) and not isinstance(expand, bool)
    expand_body: Any = {"hops": expand} if hops else expand
    body = _drop_none(
        {
            "query": query,
            "scopes": list(scopes) if scopes is not None else None,
            "limit": limit,
            "expand": expand_body,
            "include_proposed": True if include_proposed else None,
            **filters,
        }
    )
    return Call("POST", ENDPOINTS["retrieve"][1], _retrieve, body=body, consistent=True)


def revision(
    name: str, record_id: Id | None, body: Mapping[str, Any], wait: Wait, key: str | None
) -> Call[Operation]:
    """One of the revision writes; ``None`` values of ``body`` are left out."""
    path = {"record_id": record_id} if record_id is not None else {}
    return _write(name, _drop_none(body), wait, key, **path)


def supersede(
    record_id: Id, record: Any, rationale: str, evidence: Any, wait: Wait, key: str | None
) -> Call[Operation]:
    """``POST /v1/records/{id}/supersede``."""
    body = {"record": record, "rationale": rationale, "evidence": evidence}
    return revision("supersede", record_id, body, wait, key)


def fork(
    record_id: Id, record: Any, rationale: str, condition: Any, evidence: Any, wait: Wait, key: str | None
) -> Call[Operation]:
    """``POST /v1/records/{id}/fork``."""
    body = {"record": record, "rationale": rationale, "condition": condition, "evidence": evidence}
    return revision("fork", record_id, body, wait, key)


def merge(
    record_ids: Iterable[Id], record: Any, rationale: str, evidence: Any, wait: Wait, key: str | None
) -> Call[Operation]:
    """``POST /v1/records:merge``."""
    body = {
        "record_ids": [str(r) for r in record_ids],
        "record": record,
        "rationale": rationale,
        "evidence": evidence,
    }
    return revision("merge", None, body, wait, key)


def retract(record_id: Id, rationale: str, wait: Wait, key: str | None) -> Call[Operation]:
    """``POST /v1/records/{id}/retract``."""
    return revision("retract", record_id, {"rationale": rationale}, wait, key)


def contest(
    record_id: Id, rationale: str, contesting_record_id: Id | None, wait: Wait, key: str | None
) -> Call[Operation]:
    """``POST /v1/records/{id}/contest``."""
    body = {
        "rationale": rationale,
        "contesting_record_id": None if contesting_record_id is None else str(contesting_record_id),
    }
    return revision("contest", record_id, body, wait, key)


def reinforce(record_id: Id, rationale: str | None, wait: Wait, key: str | None) -> Call[Operation]:
    """``POST /v1/records/{id}/reinforce``."""
    return revision("reinforce", record_id, {"rationale": rationale}, wait, key)


def penalize(
    record_id: Id, amount: float | None, rationale: str | None, wait: Wait, key: str | None
) -> Call[Operation]:
    """``POST /v1/records/{id}/penalize``."""
    return revision("penalize", record_id, {"amount": amount, "rationale": rationale}, wait, key)


def maintenance(jobs: Iterable[str], wait: Wait, key: str | None) -> Call[Operation]:
    """``POST /v1/maintenance/run``."""
    return _write("run_maintenance", {"jobs": list(jobs)}, wait, key)


def metrics() -> Call[Metrics]:
    """``GET /v1/metrics``."""
    return Call("GET", ENDPOINTS["metrics"][1], _metrics)


def operation(operation_id: Id, wait: float | None = None) -> Call[Operation]:
    """``GET /v1/operations/{id}``; ``wait`` asks the server to hold the answer until the
    operation finishes (a server without that answers at once)."""
    seconds = server_wait(wait)
    params = {"wait": f"{seconds:g}"} if seconds is not None else {}
    return Call("GET", f"/v1/operations/{_path_part(operation_id)}", _operation, params=params, wait=seconds)


# -- lists (RFC 10.7) -------------------------------------------------------------------


class Paged(Protocol):
    """A page of a list call: the cursor of the next page, ``None`` on the last."""

    @property
    def next_cursor(self) -> str | None: ...


P = TypeVar("P", bound=Paged)


def _query_value(value: Any) -> str:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, enum.Enum):
        return str(value.value)
    return str(value)


def query(method: str, filters: Mapping[str, Any]) -> dict[str, str | list[str]]:
    """The query parameters of list call ``method``: a sequence repeats its parameter, a
    datetime is sent in ISO 8601, ``None`` is left out; an unknown name is a ``TypeError``."""
    known = FILTERS[method]
    unknown = sorted(set(filters) - known)
    if unknown:
        raise TypeError(f"{method}() got unknown filters {unknown}; it takes {sorted(known)}")
    params: dict[str, str | list[str]] = {}
    for name, value in filters.items():
        if value is None:
            continue
        if isinstance(value, Iterable) and not isinstance(value, str | bytes):
            params[name] = [_query_value(v) for v in value]
        else:
            params[name] = _query_value(value)
    return params


def list_records(filters: Mapping[str, Any]) -> Call[RecordPage]:
    """``GET /v1/records``: one page of records, newest first."""
    return Call(
        "GET",
        ENDPOINTS["list_records"][1],
        RecordPage.model_validate_json,
        params=query("list_records", filters),
        consistent=True,
    )


def lineage(record_id: Id, as_of: datetime | str | None) -> Call[Lineage]:
    """``GET /v1/records/{id}/lineage``, optionally as believed at ``as_of``."""
    params: dict[str, str | list[str]] = {"as_of": _time(as_of)} if as_of is not None else {}
    return Call(
        "GET", f"/v1/records/{_path_part(record_id)}/lineage", Lineage.model_validate_json, params=params
    )


def list_operations(filters: Mapping[str, Any]) -> Call[OperationPage]:
    """``GET /v1/operations``: one page of operations, newest first."""
    params = query("list_operations", filters)
    return Call("GET", ENDPOINTS["list_operations"][1], OperationPage.model_validate_json, params=params)


def work(filters: Mapping[str, Any]) -> Call[WorkOverview]:
    """``GET /v1/work`` (operator)."""
    return Call("GET", ENDPOINTS["work"][1], WorkOverview.model_validate_json, params=query("work", filters))


def requeue_work(ids: Iterable[int], rationale: str | None) -> Call[RequeueResult]:
    """``POST /v1/work:requeue`` (operator). No idempotency key: putting a buried item back
    twice leaves it as once, so a retry is safe without one."""
    body = _drop_none({"ids": [int(i) for i in ids], "rationale": rationale})
    return Call("POST", ENDPOINTS["requeue_work"][1], RequeueResult.model_validate_json, body=body)


def list_scopes() -> Call[ScopeList]:
    """``GET /v1/scopes``."""
    return Call("GET", ENDPOINTS["list_scopes"][1], ScopeList.model_validate_json)


# -- review (RFC 5.7) -------------------------------------------------------------------


def review_queue(
    scopes: Iterable[str] | str | None, order: str | None, limit: int | None, cursor: str | None
) -> Call[ReviewPage]:
    """``GET /v1/review`` (reviewer keys): a page of the pending proposals the caller may decide."""
    filters = {"scope": scopes, "order": order, "limit": limit, "cursor": cursor}
    params = query("review_queue", filters)
    return Call("GET", ENDPOINTS["review_queue"][1], ReviewPage.model_validate_json, params=params)


def decision(
    proposal_id: Id,
    decision: str,
    *,
    mode: str | None = None,
    rationale: str | None = None,
    record: Any = None,
    evidence: Any = None,
) -> dict[str, Any]:
    """One decision as the body of ``POST /v1/review:decide`` takes it; unset fields left out."""
    given = {"mode": mode, "rationale": rationale, "record": record, "evidence": evidence}
    return {"proposal_id": str(proposal_id), "decision": decision, **_drop_none(given)}


def decide(decisions: Iterable[DecisionInput]) -> Call[DecideResult]:
    """``POST /v1/review:decide`` (reviewer keys). No idempotency key: a decision is applied
    once; sent again, it is refused as already decided (``revision_refused``), so a retry after
    a lost answer changes nothing."""
    body = {"decisions": list(decisions)}
    return Call("POST", ENDPOINTS["decide"][1], DecideResult.model_validate_json, body=body)


def only(result: DecideResult) -> DecisionResult:
    """The one result of a one-decision call; a refusal raised as the exception of its code."""
    if len(result.results) != 1:
        raise MembraneError(
            f"the server answered {len(result.results)} results for one decision", code="bad_answer"
        )
    return result.results[0].raise_for_error()


def next_page(call: Call[P], page: P) -> Call[P] | None:
    """The call of the page after ``page`` (the answer of ``call``); ``None`` after the last.

    A server that hands back the cursor it was given would page forever: that is an error.
    """
    cursor = page.next_cursor
    if cursor is None:
        return None
    if cursor == call.params.get("cursor"):
        raise MembraneError(
            f"{call.method} {call.path}: the server sent the same cursor twice", code="bad_answer"
        )
    return replace(call, params={**call.params, "cursor": cursor})


def operation_id_of(operation_or_id: Operation | Id) -> Id:
    """The id of an operation given as itself or as its id."""
    return operation_or_id.operation_id if isinstance(operation_or_id, Operation) else operation_or_id


# -- answers and retries ---------------------------------------------------------------


def retry_after(response: httpx.Response) -> float | None:
    """The answer's ``Retry-After`` in seconds (delta-seconds or an HTTP date), if any."""
    value = response.headers.get("Retry-After")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())


def parse(call: Call[T], response: httpx.Response) -> T:
    """The parsed answer of a successful ``response``, else its typed exception."""
    if response.is_success:
        try:
            return call.parse(response.content)
        except ValueError as exc:  # not JSON, or not the expected shape (a proxy's page, say)
            raise MembraneError(
                f"{call.method} {call.path}: unexpected answer: {exc}",
                status=response.status_code,
                code="bad_answer",
            ) from exc
    try:
        body: Any = response.json()
    except ValueError:
        body = None
    raise error_from(response.status_code, body, retry_after=retry_after(response))


@dataclass(frozen=True)
class RetryPolicy:
    """Jittered exponential backoff, bounded by ``max_retries``; ``Retry-After`` is a floor."""

    max_retries: int = 5
    backoff: float = 0.2

    def delay(self, attempt: int, after: float | None) -> float:
        """Seconds to pause before retry number ``attempt + 1`` (``attempt`` counts from 0).

        The jitter spreads clients that failed together, so they do not come back together.
        """
        base = min(MAX_RETRY_DELAY, self.backoff * (2.0**attempt))
        jittered = base * (0.5 + random.random() / 2)
        if after is not None:
            jittered = max(jittered, after)
        return min(MAX_RETRY_DELAY, jittered)


def should_retry(status: int, code: str | None = None) -> bool:
    """Whether an answer of ``status`` with error ``code`` is retried: 429 and 503, never
    another 4xx, and not a code in ``NOT_RETRIED_CODES``."""
    return status in RETRY_STATUSES and code not in NOT_RETRIED_CODES


def error_code(response: httpx.Response) -> str | None:
    """The error code of a read answer's body (``{"error": {"code": ...}}``), if it has one."""
    try:
        body = response.json()
    except ValueError:
        return None
    error = body.get("error") if isinstance(body, dict) else None
    code = error.get("code") if isinstance(error, dict) else None
    return code if isinstance(code, str) else None


def retryable(response: httpx.Response) -> bool:
    """Whether ``response`` (read) is an answer worth sending the request again for."""
    return response.status_code in RETRY_STATUSES and should_retry(response.status_code, error_code(response))


def connection_error(exc: Exception, call: Call[Any]) -> MembraneError:
    """The error raised when the connection kept failing for ``call``."""
    return ConnectionFailed(f"{call.method} {call.path}: {type(exc).__name__}: {exc}")


class Deadline:
    """A point in monotonic time, for waits that span several requests."""

    def __init__(self, seconds: float) -> None:
        self.at = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left, never negative."""
        return max(0.0, self.at - time.monotonic())


def poll_interval(attempt: int) -> float:
    """Pause between two polls of an operation: quick at first, then every half second."""
    return min(0.5, 0.02 * (2.0**attempt))


# -- moving and forgetting (RFC 15) ------------------------------------------------------


def export_params(filters: Mapping[str, Any]) -> dict[str, str | list[str]]:
    """The query of ``GET /v1/export`` (RFC 15.1); booleans as ``true``/``false``."""
    return query("export", {k: (str(v).lower() if isinstance(v, bool) else v) for k, v in filters.items()})


def import_bundle(data: bytes, on_conflict: str) -> Call[ImportReport]:
    """``POST /v1/import`` (operator keys): a bundle's tar, checked whole before anything is
    written (RFC 15.2). No idempotency key: importing the same bundle again changes nothing."""
    return Call(
        "POST",
        ENDPOINTS["import_bundle"][1],
        ImportReport.model_validate_json,
        params={"on_conflict": on_conflict},
        raw=data,
    )


def erase(body: Mapping[str, Any]) -> Call[Erasure]:
    """``POST /v1/erase`` (keys with ``erase``): a dry run unless ``dry_run`` is false and
    ``confirm`` repeats the dry run's (RFC 15.4)."""
    return Call("POST", ENDPOINTS["erase"][1], Erasure.model_validate_json, body=dict(body))


#: RFC 15.2: what an import does with a record id the store holds.
OnConflict = Literal["skip", "overwrite", "fail"]


def erase_body(
    reason: str, scope: str | None, entity: Id | None, records: Iterable[Id] | None, confirm: str | None
) -> dict[str, Any]:
    """The body of ``POST /v1/erase``: the target given, a dry run unless confirmed."""
    body: dict[str, Any] = {"reason": reason, "dry_run": confirm is None}
    if scope is not None:
        body["scope"] = scope
    if entity is not None:
        body["entity"] = str(entity)
    if records is not None:
        body["records"] = [str(r) for r in records]
    if confirm is not None:
        body["confirm"] = confirm
    return body
