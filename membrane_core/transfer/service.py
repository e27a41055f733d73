"""``Membrane.transfer`` (RFC 15): export and import."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from membrane_core.clock import Clock
from membrane_core.requests import parse
from membrane_core.sealing import NO_KEYS, Sealer
from membrane_core.storage.db import Database
from membrane_core.transfer import files
from membrane_core.transfer.bundle import ExportRequest, Manifest
from membrane_core.transfer.export import Exporter
from membrane_core.transfer.importer import Importer, ImportReport, OnConflict
from membrane_core.trust import TrustPolicy


class Transfer:
    """RFC 15: a store's records out as a bundle (with the caller's trust) and back in (an
    operator's)."""

    def __init__(
        self,
        db: Database,
        *,
        clock: Clock,
        embedding_model: Callable[[], str | None],
        sealer: Sealer = NO_KEYS,
    ) -> None:
        self.db = db
        self.exporter = Exporter(db, clock=clock, sealer=sealer)
        self._model = embedding_model
        self._clock = clock

    def export(
        self,
        request: ExportRequest | Mapping[str, Any],
        trust: TrustPolicy,
        target: Path,
        *,
        tar: bool = False,
        progress: Callable[[int, int], None] | None = None,
    ) -> Manifest:
        """RFC 15.1: export into the folder (or, ``tar``, the tar file) ``target``; a stopped
        export into the same target resumes."""
        req = parse(ExportRequest, request)
        write = files.export_to_tar if tar else files.export_to_folder
        return write(self.exporter, req, trust, target, progress=progress)

    def stream(
        self, request: ExportRequest | Mapping[str, Any], trust: TrustPolicy
    ) -> Iterator[tuple[str, bytes]]:
        """RFC 15.1: the export's files one at a time, the manifest last (``GET /v1/export``)."""
        return self.exporter.stream(parse(ExportRequest, request), trust)

    def import_bundle(
        self, source: Path, trust: TrustPolicy, *, on_conflict: OnConflict = "skip"
    ) -> ImportReport:
        """RFC 15.2: import the bundle at ``source`` (a folder or a tar)."""
        importer = Importer(
            self.db, clock=self._clock, embedding_model=self._model(), embedding_dim=self.db.embedding_dim
        )
        return importer.run(source, trust, on_conflict=on_conflict)
