"""Export (RFC 15.1): a store's records in the caller's scopes, chunk by chunk, as NDJSON.

Every file's lines come from Postgres as they are written (``COPY (SELECT ...::text) TO
STDOUT``): the rows are never parsed in Python. A chunk is a range of the export order
(scope, created_at, id); an export holds one chunk in memory at a time, and one stopped
after a chunk resumes after that chunk's last key.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from membrane_core import errors
from membrane_core.clock import Clock
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage import transfer as store
from membrane_core.storage.db import Connection, Database
from membrane_core.transfer.bundle import (
    CHUNK_BYTES,
    CHUNK_KINDS,
    CHUNK_ROWS,
    FORMAT_VERSION,
    MANIFEST,
    ExportRequest,
    FileEntry,
    Manifest,
    Member,
    manifest_bytes,
)
from membrane_core.transfer.opening import open_chunk
from membrane_core.trust import ALL_SCOPES, TrustPolicy


@dataclass(frozen=True)
class Key:
    """A position in the export order."""

    scope: str
    created_at: datetime
    id: uuid.UUID

    def as_list(self) -> list[str]:
        """The key as its progress state keeps it."""
        return [self.scope, self.created_at.isoformat(), str(self.id)]

    @classmethod
    def of(cls, value: list[str]) -> Key:
        """A key its progress state kept."""
        return cls(value[0], datetime.fromisoformat(value[1]), uuid.UUID(value[2]))


#: RFC 15.1: the kinds a second connection reads, beside the records, audit and proposals.
CHILD_KINDS = frozenset({"tags", "provenance", "relations", "entity_terms", "entity_identifiers", "vectors"})

#: Before every record: no scope is empty (RFC 2.1).
START = Key("", datetime(1, 1, 1, tzinfo=UTC), uuid.UUID(int=0))


@dataclass(frozen=True)
class Plan:
    """RFC 15.1: an export's request under the caller's policy: the scopes it lists (every
    scope the caller reads, when it names none) and the highest sensitivity it takes."""

    request: ExportRequest
    scopes: list[str]
    max_rank: int
    actor: str

    def params(self) -> dict[str, Any]:
        """The filters every export statement binds."""
        r = self.request
        return {
            "scopes": self.scopes,
            "types": [t.value for t in r.types] if r.types else None,
            # in UTC: COPY binds its values into the text, where Postgres takes offsets up to
            # 15:59 only (a bound timestamptz is sent as UTC anyway)
            "created_after": r.created_after.astimezone(UTC) if r.created_after else None,
            "created_before": r.created_before.astimezone(UTC) if r.created_before else None,
            "max_rank": self.max_rank,
        }


def _read(conn: Connection, kinds: list[str], bounds: dict[str, Any]) -> dict[str, bytes]:
    """Each kind's lines of one chunk."""
    return {k: store.lines_of(conn, f"export_{k}", bounds) for k in kinds}


class Exporter:
    """RFC 15.1: ``Membrane.transfer``'s export."""

    def __init__(self, db: Database, *, clock: Clock, sealer: Sealer = NO_KEYS) -> None:
        self.db = db
        self.clock = clock
        self.sealer = sealer

    def plan(self, request: ExportRequest, trust: TrustPolicy) -> Plan:
        """RFC 15.1, 7.2: the export's scopes and level under the caller's policy; naming a
        scope the caller does not read is ``Forbidden``."""
        if request.open_sealed and not self.sealer.enabled:
            raise errors.InvalidInput(
                "open_sealed needs the deployment's encryption keys (MEMBRANE_ENCRYPTION_KEYS)"
            )
        policy = trust.narrow(request.scopes, None)
        if ALL_SCOPES in policy.read_scopes:
            with self.db.reader() as conn:
                scopes = sorted(r[0] for r in store.rows(conn, "export_scopes"))
        else:
            scopes = sorted(policy.read_scopes)
        return Plan(request, scopes, policy.max_sensitivity.rank, trust.actor)

    def counts(self, plan: Plan) -> tuple[int, int]:
        """The records the export takes and those it withholds (above the caller's level)."""
        with self.db.reader() as conn:
            taken, withheld = store.one(conn, "export_counts", plan.params())
        return int(taken), int(withheld)

    def chunks(
        self, plan: Plan, *, after: Key = START, first: int = 1
    ) -> Iterator[tuple[int, Key, list[Member]]]:
        """RFC 15.1: each chunk after ``after`` (numbered from ``first``): its number, its
        last key and its files, read in one snapshot: a second connection, on the snapshot the
        first exports, reads the children's files while the first reads the records'."""
        base = plan.params()
        kinds = [k for k in CHUNK_KINDS if k != "vectors" or plan.request.with_vectors]
        with contextlib.ExitStack() as stack:
            conn = stack.enter_context(self.db.snapshot())
            share = store.share_snapshot(conn)
            second = stack.enter_context(self.db.snapshot(share))
            pool = stack.enter_context(ThreadPoolExecutor(1, thread_name_prefix="membrane-export"))
            children = [k for k in kinds if k in CHILD_KINDS]
            n = first
            for scope in plan.scopes:
                if scope < after.scope:
                    continue
                position = (
                    (after.created_at, after.id) if scope == after.scope else (START.created_at, START.id)
                )
                while True:
                    at = {**base, "scope": scope, "after_created": position[0], "after_id": position[1]}
                    found = store.rows(
                        conn, "export_next_chunk", {**at, "rows": CHUNK_ROWS, "max_bytes": CHUNK_BYTES}
                    )
                    if not found:
                        break
                    upto = Key(scope, found[0][0], found[0][1])
                    bounds = {**at, "upto_created": upto.created_at, "upto_id": upto.id}
                    read = pool.submit(_read, second, children, bounds)
                    data = _read(conn, [k for k in kinds if k not in children], bounds)
                    data.update(read.result())
                    members = [Member.of(k, n, data[k]) for k in kinds if data[k]]
                    if plan.request.open_sealed:
                        members = open_chunk(self.sealer, members, n)
                    yield n, upto, members
                    position, n = (upto.created_at, upto.id), n + 1

    def tail(self, plan: Plan) -> list[Member]:
        """RFC 15.1: the files of the export's scopes as a whole: their tombstones, the
        histories of their deleted records (without a type filter) and the erasures that
        blanked audit entries."""
        base = plan.params()
        kinds = ["tombstones", *([] if plan.request.types else ["gone_audit"]), "erasures"]
        with self.db.snapshot() as conn:
            out = []
            for kind in kinds:
                data = store.copy_out(conn, f"export_{kind}", base)
                if data:
                    out.append(Member.of(kind, 0, data))
            return out

    def manifest(
        self, plan: Plan, files: list[FileEntry], *, withheld: int, resumed: bool = False
    ) -> Manifest:
        """RFC 15.1: the manifest of an export whose files are ``files``."""
        counts: dict[str, int] = {}
        for f in files:
            counts[f.kind] = counts.get(f.kind, 0) + f.rows
        with self.db.reader() as conn:
            version = store.one(conn, "schema_version")
            models = (
                [r[0] for r in store.rows(conn, "export_vector_models", {"scopes": plan.scopes})]
                if plan.request.with_vectors
                else None
            )
        return Manifest(
            format_version=FORMAT_VERSION,
            schema_version=int(version[0]),
            exported_at=self.clock(),
            exported_by=plan.actor,
            filters=plan.request,
            vector_models=models,
            counts=counts,
            withheld=withheld,
            resumed=resumed,
            files=files,
        )

    def stream(self, request: ExportRequest, trust: TrustPolicy) -> Iterator[tuple[str, bytes]]:
        """RFC 15.1: every file of an export, the manifest last, one at a time (``GET
        /v1/export`` writes them as a tar). The policy is checked here, before the first file."""
        plan = self.plan(request, trust)
        _, withheld = self.counts(plan)
        return self._files(plan, withheld)

    def _files(self, plan: Plan, withheld: int) -> Iterator[tuple[str, bytes]]:
        files: list[FileEntry] = []
        for _, _, members in self.chunks(plan):
            for m in members:
                files.append(m.entry)
                yield m.entry.name, m.data
        for m in self.tail(plan):
            files.append(m.entry)
            yield m.entry.name, m.data
        yield MANIFEST, manifest_bytes(self.manifest(plan, files, withheld=withheld))


def refuse_mismatch(kept: ExportRequest, asked: ExportRequest) -> None:
    """RFC 15.1: a resumed export continues the same request."""
    if kept != asked:
        raise errors.InvalidInput(
            "the folder holds a stopped export of other filters: resume it with the same ones, "
            "or export into an empty folder"
        )
