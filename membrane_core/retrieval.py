"""Retrieval: trust-, status- and budget-bounded (RFC 8)."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from membrane_core import decay, errors
from membrane_core.enums import RevisionStatus, Sensitivity
from membrane_core.models import MemoryRecord
from membrane_core.requests import RetrieveRequest
from membrane_core.results import RecordView, RetrieveResult, view
from membrane_core.storage import reads, records
from membrane_core.storage.db import Database
from membrane_core.trust import TrustPolicy


def current_salience(record: MemoryRecord, at: datetime) -> float:
    """RFC 6.1: the record's salience now, from its base and decay clock."""
    lc = record.lifecycle
    return decay.salience_at(lc.base_salience, lc.reinforced_at, lc.decay, at, pinned=lc.pinned)


def check_status(record: MemoryRecord, req: RetrieveRequest) -> bool:
    """RFC 5.1: revision status is enforced on every hydrated record."""
    if record.status is RevisionStatus.RETRACTED:
        return req.include_retracted
    if record.status is RevisionStatus.CONTESTED:
        return req.include_contested
    return True


class Retriever:
    """RFC 8: candidates in SQL, then trust, status and budgets re-applied in Python."""

    def __init__(self, db: Database, *, clock: Any) -> None:
        self.db = db
        self.clock = clock

    def retrieve(self, req: RetrieveRequest, trust: TrustPolicy) -> RetrieveResult:
        """RFC 8.1-8.3: filter in SQL, re-check in Python, cap by rows and bytes."""
        policy = trust.narrow(req.scopes, req.max_sensitivity)
        now = self.clock()
        f = reads.CandidateFilter(
            scopes=None if policy.reads_all else sorted(policy.read_scopes),
            max_rank=policy.max_sensitivity.rank,
            types=[t.value for t in req.memory_types] if req.memory_types else None,
            include_retracted=req.include_retracted, include_contested=req.include_contested,
            min_salience=req.min_salience, now=now,
        )
        with self.db.reader() as conn:
            cands = reads.candidates(conn, f, query=req.query, limit=req.limit,
                                     max_bytes=req.max_bytes)
            within = [c for c in cands if not c.over_budget]
            hydrated = records.hydrate(conn, [c.id for c in within])
        return self._assemble(req, policy, cands, within, hydrated, now)

    def _assemble(
        self, req: RetrieveRequest, policy: TrustPolicy, cands: list[reads.Candidate],
        within: list[reads.Candidate], hydrated: dict[uuid.UUID, MemoryRecord], now: datetime,
    ) -> RetrieveResult:
        if cands and not within:
            raise errors.RecordTooLarge(
                f"the best candidate needs {cands[0].bytes} bytes, over max_bytes={req.max_bytes}",
                details=[{"field": "max_bytes", "message": "a single record exceeds the budget",
                          "type": "record_too_large"}],
            )
        out: list[RecordView] = []
        used = 0
        dropped_trust = 0
        for c in within:
            rec = hydrated.get(c.id)
            if rec is None:
                continue  # deleted between the two statements
            visibility = policy.visibility(rec.scope, rec.sensitivity)
            if visibility == "hidden" or not check_status(rec, req):
                dropped_trust += 1
                continue
            v = view(rec, salience=current_salience(rec, now), redacted=visibility == "redacted",
                     score=c.text_rank or current_salience(rec, now))
            size = len(v.model_dump_json())
            if used + size > req.max_bytes and out:
                break
            used += size
            out.append(v)
        diagnostics: dict[str, Any] = {
            "candidates": len(cands), "returned": len(out), "bytes": used,
            "byte_limit_applied": len(within) < len(cands) or len(out) < len(within) - dropped_trust,
            "row_limit": req.limit, "filtered_in_python": dropped_trust,
        }
        return RetrieveResult(records=out, diagnostics=diagnostics)

    def get(self, record_id: uuid.UUID, trust: TrustPolicy) -> RecordView:
        """RFC 5.1, 7.3: one record by id, status shown, redacted or hidden per trust."""
        with self.db.reader() as conn:
            acc = records.access(conn, [record_id]).get(record_id)
            if acc is None or trust.visibility(acc[0], Sensitivity(acc[1])) == "hidden":
                raise errors.NotFound(f"record {record_id} not found")
            rec = records.hydrate(conn, [record_id]).get(record_id)
            if rec is None:
                raise errors.NotFound(f"record {record_id} not found")
            targets = {r.target_id for r in rec.relations}
            visible = {
                tid for tid, (scope, sens, _) in records.access(conn, targets).items()
                if trust.visibility(scope, Sensitivity(sens)) == "full"
            }
        visibility = trust.visibility(rec.scope, rec.sensitivity)
        return view(rec, salience=current_salience(rec, self.clock()),
                    redacted=visibility == "redacted", visible_targets=visible)

