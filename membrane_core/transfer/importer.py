"""Import (RFC 15.2): a bundle checked whole, then written in one transaction.

Every file is copied, as it is, into a staging table (``COPY`` of its lines as ``jsonb``) and
its bytes hashed on the way: a file whose sha256 or line count is not the manifest's, or an
audit chain that does not verify, refuses the import before anything is written outside the
staging tables. The rows then go from staging into the store in set statements, never one
record at a time; ids, times, statuses, chains and audit are kept.
"""

from __future__ import annotations

import hashlib
import tarfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, LiteralString

from pydantic import BaseModel, ValidationError

from membrane_core import errors
from membrane_core.storage import transfer as store
from membrane_core.storage.db import Connection, Database
from membrane_core.transfer.bundle import FORMAT_VERSION, KINDS, MANIFEST, Manifest
from membrane_core.trust import TrustPolicy

OnConflict = Literal["skip", "overwrite", "fail"]
#: Each kind's staging table suffix (RFC 15.2), as SQL text.
_KIND: dict[str, LiteralString] = {k: k for k in KINDS}
#: RFC 15.2: the ids an import that fails on a conflict names at most.
NAMED = 10


class ImportReport(BaseModel):
    """RFC 15.2: what an import wrote and what it left."""

    records_written: int = 0
    records_overwritten: int = 0
    records_skipped: int = 0
    tags: int = 0
    provenance: int = 0
    relations: int = 0
    relations_dangling: int = 0
    entity_terms: int = 0
    entity_identifiers: int = 0
    entity_identifiers_skipped: int = 0
    vectors: int = 0
    embeddings_queued: int = 0
    proposals: int = 0
    tombstones: int = 0
    erasures: int = 0
    audit_appended: int = 0
    #: records by how the store's audit chain stood against the bundle's
    chains: dict[str, int] = {}


class Bundle:
    """A bundle to read: a folder or a tar of one (RFC 15.1)."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tar: tarfile.TarFile | None = None
        if path.is_file():
            try:
                self._tar = tarfile.open(path, "r:*")
            except tarfile.TarError as exc:
                raise errors.InvalidInput(f"{path} is not a folder or a tar of an export: {exc}") from exc
        elif not path.is_dir():
            raise errors.InvalidInput(f"{path} does not exist")

    def read(self, name: str) -> bytes:
        """The bytes of file ``name``; ``InvalidInput`` when the bundle has none."""
        if self._tar is None:
            target = self.path / name
            if not target.is_file():
                raise errors.InvalidInput(f"the bundle has no {name}")
            return target.read_bytes()
        try:
            member = self._tar.extractfile(name)
        except KeyError:
            member = None
        if member is None:
            raise errors.InvalidInput(f"the bundle has no {name}")
        return member.read()

    def __enter__(self) -> Bundle:
        return self

    def __exit__(self, *exc: object) -> None:
        if self._tar is not None:
            self._tar.close()


def read_manifest(bundle: Bundle, store_version: int) -> Manifest:
    """RFC 15.2: the bundle's manifest, refused when it is not one this store can take."""
    try:
        manifest = Manifest.model_validate_json(bundle.read(MANIFEST))
    except ValidationError as exc:
        raise errors.InvalidInput(
            f"{MANIFEST} is not a manifest of an export: {exc.errors()[0]['msg']}"
        ) from exc
    if manifest.format_version != FORMAT_VERSION:
        raise errors.InvalidInput(
            f"the bundle is format {manifest.format_version}; this version reads format {FORMAT_VERSION}"
        )
    if manifest.schema_version > store_version:
        raise errors.InvalidInput(
            f"the bundle comes from schema {manifest.schema_version}, newer than this store's "
            f"{store_version}: upgrade Membrane before importing it"
        )
    return manifest


@dataclass
class _Staged:
    """Where each staged file's lines start, to name a line by its file."""

    starts: dict[str, list[tuple[int, str]]] = field(default_factory=dict)

    def name(self, kind: str, n: int) -> str:
        """``file:line`` of staging row ``n`` of ``kind``."""
        at, name = 0, "?"
        for first, file in self.starts.get(kind, []):
            if first <= n:
                at, name = first, file
        return f"{name}:{n - at + 1}"


def _stage(conn: Connection, bundle: Bundle, manifest: Manifest) -> _Staged:
    """Copy every file into its staging table, checking its sha256 and lines (RFC 15.2)."""
    staged = _Staged()
    counts = {kind: 0 for kind in KINDS}
    for entry in manifest.files:
        data = bundle.read(entry.name)
        if hashlib.sha256(data).hexdigest() != entry.sha256 or len(data) != entry.bytes:
            raise errors.InvalidInput(f"{entry.name} is not the file the manifest names (its sha256 differs)")
        if data.count(b"\n") != entry.rows or (data and not data.endswith(b"\n")):
            raise errors.InvalidInput(f"{entry.name} does not hold the {entry.rows} lines the manifest names")
        staged.starts.setdefault(entry.kind, []).append((counts[entry.kind] + 1, entry.name))
        counts[entry.kind] += entry.rows
        store.stage(conn, _KIND[entry.kind], data)
    return staged


class Importer:
    """RFC 15.2: ``Membrane.transfer``'s import."""

    def __init__(self, db: Database, *, clock: Any, embedding_model: str | None, embedding_dim: int) -> None:
        self.db = db
        self.clock = clock
        self.embedding_model = embedding_model
        self.embedding_dim = embedding_dim

    def run(self, path: Path, trust: TrustPolicy, *, on_conflict: OnConflict = "skip") -> ImportReport:
        """RFC 15.2: import the bundle at ``path`` (a folder or a tar); an operator's call."""
        if not trust.operator:
            raise errors.Forbidden("an import needs an operator key")
        if on_conflict not in ("skip", "overwrite", "fail"):
            raise errors.InvalidInput(f"on_conflict must be skip, overwrite or fail, not {on_conflict!r}")
        with Bundle(path) as bundle, self.db.transaction(unbounded=True) as conn:
            version = int(store.one(conn, "schema_version")[0])
            manifest = read_manifest(bundle, version)
            store.run(conn, "import_staging")
            staged = _stage(conn, bundle, manifest)
            found = store.rows(conn, "import_broken_chain")
            if found:
                broken = found[0]
                where = staged.name(broken[0], broken[1])
                raise errors.InvalidInput(
                    f"the audit chain of record {broken[2]} is broken at {where}: "
                    "the bundle was changed after its export"
                )
            return self._write(conn, manifest, trust, on_conflict)

    def _write(
        self, conn: Connection, manifest: Manifest, trust: TrustPolicy, on_conflict: OnConflict
    ) -> ImportReport:
        report = ImportReport()
        moved = store.rows(conn, "import_scope_moves", {"limit": NAMED})
        if moved:  # RFC 13.2: a record's scope never changes, whatever the conflict mode
            raise errors.Conflict(
                "the store holds these records in another scope, and a record's scope never changes: "
                + ", ".join(f"{rid} ({held}, not {offered})" for rid, held, offered in moved)
            )
        if on_conflict == "fail":
            held = [str(r[0]) for r in store.rows(conn, "import_conflicts", {"limit": NAMED})]
            diverged = [r[0] for r in store.rows(conn, "import_diverged", {"limit": NAMED})]
            if held or diverged:
                raise errors.Conflict(
                    "the store already holds "
                    + (f"records {', '.join(held)}" if held else f"other histories of {', '.join(diverged)}")
                    + " (--on-conflict skip or overwrite decides for them)"
                )
        store.run(conn, "import_records_overwrite" if on_conflict == "overwrite" else "import_records_skip")
        fresh, overwritten = store.one(conn, "import_counts_written")
        report.records_written, report.records_overwritten = int(fresh), int(overwritten)
        report.records_skipped = (
            manifest.counts.get("records", 0) - report.records_written - report.records_overwritten
        )
        if report.records_overwritten:
            store.run(conn, "import_clear_overwritten")
        _, tags, prov, terms, idents, offered = store.one(conn, "import_children")
        report.tags, report.provenance, report.entity_terms = int(tags), int(prov), int(terms)
        report.entity_identifiers = int(idents)
        report.entity_identifiers_skipped = int(offered) - int(idents)
        report.relations, report.relations_dangling = (int(v) for v in store.one(conn, "import_relations"))
        if self.embedding_model:
            report.vectors = int(
                store.one(conn, "import_vectors", {"model": self.embedding_model, "dim": self.embedding_dim})[
                    0
                ]
            )
            report.embeddings_queued = int(store.one(conn, "import_embed_work")[0])
        report.proposals = int(store.one(conn, "import_proposals")[0])
        report.tombstones = int(store.one(conn, "import_tombstones")[0])
        report.erasures = int(store.one(conn, "import_erasures")[0])
        appended = matched = 0
        for state, records, added, same in store.rows(conn, "import_audit"):
            report.chains[state] = int(records)
            appended, matched = int(added), int(same)
        if matched != appended:
            raise errors.InvalidInput(
                "the audit entries of the bundle do not chain onto the store's as they were exported"
            )
        report.audit_appended = appended
        if report.records_overwritten:
            store.run(
                conn,
                "import_overwritten_entries",
                {
                    "actor": trust.actor,
                    "now": self.clock(),
                    "exported_by": manifest.exported_by,
                    "exported_at": manifest.exported_at.isoformat(),
                },
            )
        return report
