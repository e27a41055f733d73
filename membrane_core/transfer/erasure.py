"""Erasure (RFC 15.4): a person's memories removed from every place their content lives.

A target (a scope, an entity and every record with a relation to or from it, or a list of
records) is gathered with its closure (other versions of each record, and the records
derived from it) into a temporary table, within the scopes the eraser may erase. A dry run
counts what would go, by table, and returns a confirmation: the digest of the target and its
counts. An erasure with that confirmation (refused when the store has changed since)
removes, in one transaction: the records with everything that holds their content, their
audit entries' rationale and details (the chain stays verifiable), their operations'
requests and results, their work items, proposals and mining state; their fact keys stay as
digests, so no writer creates the facts again. What stays: the ids, and a content-free
``erasures`` row (who, when, why, the kind of target and its digest, the counts).
"""

from __future__ import annotations

import hashlib
import json
import uuid
from collections.abc import Mapping
from datetime import datetime
from typing import Any, Literal

from pydantic import Field, model_validator

from membrane_core import errors
from membrane_core.clock import Clock
from membrane_core.models import ClientInput, Frozen, Scope
from membrane_core.requests import parse
from membrane_core.storage import transfer as store
from membrane_core.storage.db import Connection, Database
from membrane_core.trust import ALL_SCOPES, TrustPolicy

#: RFC 15.4: records one erasure of listed records names at most.
MAX_RECORDS = 10_000
#: RFC 15.4: the tables an erasure reports, in this order.
TABLES = (
    "memory_records",
    "record_payloads",
    "record_tags",
    "provenance_sources",
    "relations",
    "entity_terms",
    "entity_identifiers",
    "record_embeddings",
    "audit_log",
    "operations",
    "work_items",
    "fact_tombstones",
    "proposals",
    "tool_signatures",
)


class ErasureRequest(ClientInput):
    """RFC 15.4: ``POST /v1/erase``: one target, why, and a dry run unless confirmed."""

    scope: Scope | None = None
    entity: uuid.UUID | None = None
    records: list[uuid.UUID] | None = Field(default=None, min_length=1, max_length=MAX_RECORDS)
    reason: str = Field(min_length=1, max_length=4096)
    #: RFC 15.4: count only (the default); an erasure needs the dry run's confirmation
    dry_run: bool = True
    confirm: str | None = Field(default=None, max_length=128)

    @model_validator(mode="after")
    def _one_target(self) -> ErasureRequest:
        given = [n for n in ("scope", "entity", "records") if getattr(self, n) is not None]
        if len(given) != 1:
            raise ValueError("name exactly one target: scope, entity or records")
        if not self.dry_run and not self.confirm:
            raise ValueError("an erasure needs the confirmation of its dry run (confirm)")
        return self

    @property
    def kind(self) -> Literal["scope", "entity", "records"]:
        """The kind of target."""
        return "scope" if self.scope is not None else "entity" if self.entity is not None else "records"

    def target_digest(self) -> bytes:
        """RFC 15.4: what the erasure row keeps of its target: a digest, never the names."""
        if self.scope is not None:
            value = self.scope
        elif self.entity is not None:
            value = str(self.entity)
        else:
            value = ",".join(sorted(str(r) for r in self.records or []))
        return hashlib.sha256(f"{self.kind}\x1f{value}".encode()).digest()


class ErasureResult(Frozen):
    """RFC 15.4: what an erasure removed (or, dry, would remove), by table."""

    dry_run: bool
    erasure_id: uuid.UUID | None = None
    target: Literal["scope", "entity", "records"]
    counts: dict[str, int]
    #: records the closure reaches in scopes the eraser may not erase, left as they are
    outside_scopes: int = 0
    #: the dry run's confirmation, for the erasure itself
    confirm: str
    erased_at: datetime | None = None


def _scopes(trust: TrustPolicy) -> list[str] | None:
    """The scopes the caller may erase in: those it reads and writes (``None``: every one)."""
    if trust.reads_all and trust.can_write_scope(ALL_SCOPES):
        return None
    named = (trust.read_scopes | trust.write_scopes) - {ALL_SCOPES}
    return sorted(s for s in named if trust.can_read_scope(s) and trust.can_write_scope(s))


class Erasure:
    """RFC 15.4: ``Membrane.erasure``."""

    def __init__(self, db: Database, *, clock: Clock) -> None:
        self.db = db
        self.clock = clock

    def erase(self, request: ErasureRequest | Mapping[str, Any], trust: TrustPolicy) -> ErasureResult:
        """RFC 15.4: count (a dry run) or erase a target; keys with ``erase`` only."""
        req = parse(ErasureRequest, request)
        if not trust.erase:
            raise errors.Forbidden("erasure needs a key with erase: true")
        scopes = _scopes(trust)
        if req.scope is not None and scopes is not None and req.scope not in scopes:
            raise errors.Forbidden(f"the key may not erase in scope {req.scope}")
        with self.db.transaction(unbounded=True) as conn:
            store.run(conn, "erase_start")
            self._gather(conn, req, scopes)
            outside = int(store.one(conn, "erase_outside")[0])
            if not req.dry_run:
                store.rows(conn, "erase_lock")
            store.run(conn, "erase_operations", {"scope": req.scope})
            counts = dict(
                zip(
                    TABLES,
                    (int(v) for v in store.one(conn, "erase_counts", {"scope": req.scope})),
                    strict=True,
                )
            )
            if counts["memory_records"] == 0 and req.kind != "scope":
                raise errors.NotFound("no record of the target is in the scopes the key may erase")
            confirm = _confirmation(req, counts)
            if req.dry_run:  # the transaction wrote its temporary tables only
                return ErasureResult(
                    dry_run=True, target=req.kind, counts=counts, outside_scopes=outside, confirm=confirm
                )
            if req.confirm != confirm:
                raise errors.Conflict("the target changed since its dry run: run the dry run again")
            erasure, now = uuid.uuid4(), self.clock()
            params = {"erasure": erasure, "actor": trust.actor, "now": now, "scope": req.scope}
            store.run(
                conn,
                "erase_record",
                {
                    "id": erasure,
                    "actor": trust.actor,
                    "reason": req.reason,
                    "kind": req.kind,
                    "digest": req.target_digest(),
                    "counts": json.dumps(counts),
                    "now": now,
                },
            )
            for step in (
                "erase_facts",
                "erase_audit_blank",
                "erase_audit_entries",
                "erase_operations_blank",
                "erase_work",
                "erase_proposals",
                "erase_signatures",
                "erase_records",
            ):
                store.run(conn, step, params)
        return ErasureResult(
            dry_run=False,
            erasure_id=erasure,
            target=req.kind,
            counts=counts,
            outside_scopes=outside,
            confirm=confirm,
            erased_at=now,
        )

    def _gather(self, conn: Connection, req: ErasureRequest, scopes: list[str] | None) -> None:
        """The target's records and their closure, in ``scopes``."""
        if req.scope is not None:
            store.run(conn, "erase_seed_scope", {"scope": req.scope})
        elif req.entity is not None:
            store.run(conn, "erase_seed_entity", {"entity": req.entity, "scopes": scopes})
        else:
            store.run(conn, "erase_seed_records", {"ids": req.records, "scopes": scopes})
        while int(store.one(conn, "erase_spread", {"scopes": scopes})[0]):
            pass


def _confirmation(req: ErasureRequest, counts: dict[str, int]) -> str:
    """RFC 15.4: the digest of a target and what it would erase, which the erasure repeats."""
    text = json.dumps([req.kind, req.target_digest().hex(), counts], sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:32]
