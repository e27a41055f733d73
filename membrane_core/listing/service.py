"""The listing service (RFC 10.7): ``Membrane.listing``."""

from __future__ import annotations

import dataclasses
import uuid
from collections.abc import Callable, Mapping
from datetime import datetime
from typing import Any

from pydantic_core import to_json

from membrane_core import errors, metrics
from membrane_core.capture.mentions import normalise_predicate
from membrane_core.clock import Clock
from membrane_core.enums import OperationKind, OperationStatus, RevisionStatus, Sensitivity, WorkKind
from membrane_core.listing import cursor, lineage
from membrane_core.listing.requests import (
    OperationListRequest,
    RecordListRequest,
    RequeueRequest,
    WorkRequest,
)
from membrane_core.listing.results import (
    BuriedItem,
    InboxCount,
    JobBacklog,
    Lineage,
    OperationPage,
    OperationSummary,
    PageDiagnostics,
    RecordPage,
    RequeueResult,
    ScopeCount,
    ScopeList,
    WorkOverview,
)
from membrane_core.requests import parse
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage import listing as store
from membrane_core.storage.db import Database
from membrane_core.storage.replica import parse_lsn
from membrane_core.storage.retrieval import ReadFilter
from membrane_core.storage.rowbatch import SEALED_RATIONALE, norm_term
from membrane_core.trust import ALL_SCOPES, TrustPolicy, Visibility

#: RFC 10.7: the most scopes ``GET /v1/scopes`` lists.
MAX_SCOPES = 10_000
#: RFC 10.7: by default a list shows active and contested records, as retrieval does.
DEFAULT_STATUSES = (RevisionStatus.ACTIVE, RevisionStatus.CONTESTED)


def _seen(policy: TrustPolicy) -> Callable[[str, str], Visibility]:
    """RFC 7.3: the caller's visibility of a scope and sensitivity, each pair checked once a
    page (a page holds few of them)."""
    memo: dict[tuple[str, str], Visibility] = {}

    def seen(scope: str, sens: str) -> Visibility:
        v = memo.get((scope, sens))
        if v is None:
            v = memo[(scope, sens)] = policy.visibility(scope, Sensitivity(sens))
        return v

    return seen


def _full(seen: Callable[[str, str], Visibility]) -> Callable[[str, str], bool]:
    """RFC 2.5: a relation target is shown only when the caller sees it in full."""
    return lambda scope, sens: seen(scope, sens) == "full"


def _entity(value: str | None) -> uuid.UUID | None:
    if value is None:
        return None
    try:
        return uuid.UUID(value)
    except ValueError as exc:
        raise errors.InvalidInput(
            f"entity {value!r} is not a record id",
            details=[{"field": "entity", "message": "not a UUID", "type": "uuid_parsing"}],
        ) from exc


def _operator(trust: TrustPolicy, what: str) -> None:
    if not trust.operator:
        raise errors.Forbidden(f"{what} needs an operator key")


class Listing:
    """RFC 10.7: list records, a record's lineage, operations, the work queue and scopes,
    trust-filtered and redacted exactly as retrieval is (RFC 7.3, 5.1, 5.6)."""

    def __init__(self, db: Database, *, clock: Clock, sealer: Sealer = NO_KEYS) -> None:
        self.db = db
        self.clock = clock
        self.sealer = sealer

    # -- records ------------------------------------------------------------------------

    def query(self, req: RecordListRequest, policy: TrustPolicy, now: datetime) -> store.RecordQuery:
        """RFC 10.7: the page a request asks for under the caller's narrowed policy; the
        filters retrieval applies go into a :class:`ReadFilter`, as retrieval builds it."""
        statuses = [s.value for s in (req.statuses or DEFAULT_STATUSES)]
        if ALL_SCOPES in policy.read_scopes:
            plan: store.ScopePlan = "every"
            scopes: list[str] = []
        else:
            scopes = sorted(policy.read_scopes)
            plan = "listed"
        f = ReadFilter(
            scopes=None if plan == "every" else scopes,
            max_rank=policy.max_sensitivity.rank,
            types=[t.value for t in req.types] if req.types else None,
            tags=self.sealer.tag_forms(list(req.tags)) if req.tags else None,
            include_retracted=RevisionStatus.RETRACTED.value in statuses,
            include_contested=RevisionStatus.CONTESTED.value in statuses,
            include_proposed=RevisionStatus.PROPOSED.value in statuses,
            min_salience=0.0,
            now=now,
            as_of=req.as_of,
        )
        return store.RecordQuery(
            filter=f,
            plan=plan,
            scopes=scopes,
            limit=req.limit,
            max_bytes=req.max_bytes,
            statuses=statuses,
            ranks=sorted({s.rank for s in req.sensitivities}) if req.sensitivities else None,
            entity=_entity(req.entity),
            subjects=self._fact_terms(norm_term(req.subject), scopes) if req.subject else None,
            predicates=self._fact_terms(normalise_predicate(req.predicate), scopes)
            if req.predicate
            else None,
            created=(req.created_after, req.created_before),
            occurred=(req.occurred_after, req.occurred_before),
            valid=(req.valid_after, req.valid_before),
        )

    def _fact_terms(self, term: str, scopes: list[str]) -> list[str]:
        """RFC 7.6: a fact term as stored: plain, and blind in each listed scope when records
        are sealed (every scope's blind value differs, so a list of every scope matches only
        the plain one)."""
        if not self.sealer.enabled:
            return [term]
        return [term, *(self.sealer.blind("fact", s, term) for s in scopes)]

    def records(self, request: RecordListRequest | Mapping[str, Any], trust: TrustPolicy) -> RecordPage:
        """RFC 10.7: one page of records, newest first, each checked again in Python as
        retrieval checks its rows (RFC 7.3): hidden ones dropped, redacted ones without content.
        The page is :meth:`records_json`'s answer, parsed: the API sends the same bytes."""
        return RecordPage.model_validate_json(self.records_json(request, trust))

    def records_json(self, request: RecordListRequest | Mapping[str, Any], trust: TrustPolicy) -> bytes:
        """RFC 10.7: :meth:`records` as the JSON of a :class:`RecordPage`, made from each view's
        JSON, the bytes its budget measured (RFC 8.3), without building a model of the page."""
        req = parse(RecordListRequest, request)
        policy = trust.narrow(req.scopes, req.max_sensitivity)
        fp = cursor.fingerprint(
            trust.actor, req.model_dump(mode="json", exclude={"cursor", "limit", "max_bytes", "min_lsn"})
        )
        now = self.clock()
        query = self.query(req, policy, now)
        if req.cursor is not None:
            query = dataclasses.replace(query, after=_position(req.cursor, fp))
        token = parse_lsn(req.min_lsn) if req.min_lsn else None
        seen = _seen(policy)
        with self.db.read(token, single=True) as (conn, served_by):  # one statement
            rows = store.records_page(conn, query, _full(seen))
        views, used, last, cut = self._views(rows, seen, req, now)
        more = cut or len(rows) > req.limit or any(not r.fits for r in rows)
        next_cursor = (
            cursor.encode({"c": last.created_at.isoformat(), "i": str(last.id)}, fp)
            if more and last is not None
            else None
        )
        diagnostics = PageDiagnostics(
            returned=len(views),
            bytes=used,
            row_limit=req.limit,
            max_bytes=req.max_bytes,
            row_limit_applied=len(rows) > req.limit,
            byte_limit_applied=cut or any(not r.fits and r.ord <= req.limit for r in rows),
            served_by=served_by,
        )
        # RecordPage's fields in order: records, next_cursor, diagnostics
        return b"".join(
            (
                b'{"records":[',
                b",".join(views),
                b'],"next_cursor":',
                to_json(next_cursor),
                b',"diagnostics":',
                diagnostics.__pydantic_serializer__.to_json(diagnostics),
                b"}",
            )
        )

    def _views(
        self,
        rows: list[store.Listed],
        seen: Callable[[str, str], Visibility],
        req: RecordListRequest,
        now: datetime,
    ) -> tuple[list[bytes], int, store.Listed | None, bool]:
        """RFC 7.3, 8.3: the JSON of the caller's views of the rows that fit, their bytes
        measured again; the last row read (the next page starts after it) and whether the
        budget cut it."""
        if rows and not rows[0].fits:  # the first record alone is over the budget
            raise _too_large(rows[0].bytes, req.max_bytes)
        views: list[bytes] = []
        used, last = 0, None
        for row in rows:
            rec = row.record
            if not row.fits or rec is None:
                break
            visibility = seen(rec.scope, rec.sensitivity)
            if visibility != "hidden":
                redacted = visibility == "redacted"
                shown = rec if redacted else rec.opened(self.sealer)
                v = shown.view_json(salience=shown.salience_at(now), status=row.status, redacted=redacted)
                size = len(v)
                if used + size > req.max_bytes:
                    if not views:
                        raise _too_large(size, req.max_bytes)
                    return views, used, last, True
                used += size
                views.append(v)
            last = row
        return views, used, last, False

    def lineage(
        self, record_id: uuid.UUID | str, trust: TrustPolicy, *, as_of: datetime | None = None
    ) -> Lineage:
        """RFC 10.7: the record's correction chain, trust-checked node by node."""
        try:
            rid = uuid.UUID(str(record_id))
        except ValueError as exc:
            raise errors.InvalidInput(f"record id {record_id!r} is not a UUID") from exc
        return lineage.build(self.db, rid, trust, sealer=self.sealer, as_of=as_of, now=self.clock())

    # -- operations and the work queue --------------------------------------------------

    def operations(
        self, request: OperationListRequest | Mapping[str, Any], trust: TrustPolicy
    ) -> OperationPage:
        """RFC 10.7: one page of operations, newest first: the caller's own unless it is an
        operator (RFC 9.1)."""
        req = parse(OperationListRequest, request)
        fp = cursor.fingerprint(trust.actor, req.model_dump(mode="json", exclude={"cursor", "limit"}))
        after = _position(req.cursor, fp) if req.cursor is not None else None
        with self.db.transaction() as conn:  # RFC 13.2: operation status reads the primary
            rows = store.operations_page(
                conn,
                principal=None if trust.operator else trust.actor,
                kinds=[k.value for k in req.kinds] if req.kinds else None,
                statuses=[s.value for s in req.statuses] if req.statuses else None,
                scope=req.scope,
                created=(req.created_after, req.created_before),
                after=after,
                limit=req.limit + 1,
            )
        page = rows[: req.limit]
        last = page[-1] if page else None
        return OperationPage(
            operations=[
                OperationSummary.model_validate(
                    {k: v for k, v in dataclasses.asdict(r).items() if k != "id"} | {"operation_id": r.id}
                )
                for r in page
            ],
            next_cursor=cursor.encode({"c": last.created_at.isoformat(), "i": str(last.id)}, fp)
            if len(rows) > req.limit and last is not None
            else None,
        )

    def work(self, request: WorkRequest | Mapping[str, Any], trust: TrustPolicy) -> WorkOverview:
        """RFC 10.7: every job's backlog, the inbox, the embedding lag and a page of buried
        items (operator)."""
        _operator(trust, "the work queue")
        req = parse(WorkRequest, request)
        kinds = [k.value for k in req.kinds] if req.kinds else None
        fp = cursor.fingerprint(trust.actor, {"kinds": kinds})
        after = None
        if req.cursor is not None:
            pos = cursor.decode(req.cursor, fp)
            if not isinstance(pos.get("a"), int):
                raise cursor.bad("is not a cursor this server made")
            after = pos["a"]
        now = self.clock()
        with self.db.transaction() as conn:  # RFC 13.2: operation status reads the primary
            jobs = {j.kind: j for j in store.jobs(conn, now)}
            inbox = store.inbox_counts(conn)
            buried = store.buried(conn, kinds, after, req.limit + 1)
        gauges = metrics.deployment(self.db, now=now)
        page = buried[: req.limit]
        return WorkOverview(
            jobs=[_backlog(k, jobs.get(k.value), now) for k in WorkKind],
            inbox=[
                InboxCount(kind=OperationKind(r.kind), status=OperationStatus(r.status), count=r.count)
                for r in inbox
            ],
            embedding_lag_seconds=gauges.embedding_lag_seconds,
            buried=[BuriedItem.model_validate(dataclasses.asdict(b)) for b in page],
            next_cursor=cursor.encode({"a": page[-1].id}, fp) if len(buried) > req.limit and page else None,
        )

    def requeue(self, request: RequeueRequest | Mapping[str, Any], trust: TrustPolicy) -> RequeueResult:
        """RFC 10.7: put buried items back, due now, in one transaction with one ``requeue``
        audit entry on each item's record (a sealed record's rationale sealed, RFC 7.6). An
        item that is not buried (already put back, done, or never there) is left as it is,
        so a repeated call changes nothing."""
        _operator(trust, "requeueing work")
        req = parse(RequeueRequest, request)
        ids = sorted(set(req.ids))
        now = self.clock()
        with self.db.transaction() as conn:
            done = store.requeue(conn, ids, now)
            entries = []
            for item in sorted(done, key=lambda d: d.id):
                details: dict[str, Any] = {
                    "operation": "requeue",
                    "work_item": item.id,
                    "job": item.kind,
                    "last_error": item.last_error,
                }
                rationale = req.rationale
                if self.sealer.seals(item.sensitivity):
                    details[SEALED_RATIONALE] = self.sealer.seal_note(item.target_id, rationale)
                    rationale = ""
                entries.append((item.target_id, item.scope, item.sensitivity, rationale, details))
            store.audit_requeues(conn, entries, actor=trust.actor, now=now)
        back = {d.id for d in done}
        return RequeueResult(requeued=sorted(back), unchanged=[i for i in ids if i not in back])

    # -- scopes -------------------------------------------------------------------------

    def scopes(self, trust: TrustPolicy) -> ScopeList:
        """RFC 10.7: the scopes the caller may read that hold records it sees, with counts."""
        f = ReadFilter(
            scopes=None if trust.reads_all else sorted(trust.read_scopes),
            max_rank=trust.max_sensitivity.rank,
            types=None,
            tags=None,
            include_retracted=True,
            include_contested=True,
            include_proposed=True,
            min_salience=0.0,
            now=self.clock(),
        )
        with self.db.reader() as conn:
            rows = store.scope_counts(conn, f, MAX_SCOPES)
        return ScopeList(
            scopes=[
                ScopeCount(
                    scope=r.scope,
                    records=r.records,
                    active=r.active,
                    contested=r.contested,
                    retracted=r.retracted,
                    proposed=r.proposed,
                )
                for r in rows
            ]
        )


def _position(token: str, fp: str) -> store.Position:
    """RFC 10.7: the keyset position a cursor of ``fp``'s filters holds."""
    pos = cursor.decode(token, fp)
    try:
        return store.Position(datetime.fromisoformat(pos["c"]), uuid.UUID(pos["i"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise cursor.bad("is not a cursor this server made") from exc


def _backlog(kind: WorkKind, row: store.JobRow | None, now: datetime) -> JobBacklog:
    if row is None:
        return JobBacklog(kind=kind, due=0, claimed=0, retrying=0, buried=0, pending=0)
    oldest = row.oldest_due_at
    return JobBacklog(
        kind=kind,
        due=row.due,
        claimed=row.claimed,
        retrying=row.retrying,
        buried=row.buried,
        pending=row.pending,
        oldest_due_at=oldest,
        oldest_due_seconds=max(0.0, (now - oldest).total_seconds()) if oldest is not None else None,
    )


def _too_large(size: int, max_bytes: int) -> errors.RecordTooLarge:
    return errors.RecordTooLarge(
        f"the first record of the page is {size} bytes, over max_bytes={max_bytes}",
        details=[
            {
                "field": "max_bytes",
                "message": "a single record exceeds the budget",
                "type": "record_too_large",
            }
        ],
    )
