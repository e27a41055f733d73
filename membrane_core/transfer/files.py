"""Writing an export into a folder or a tar, resumably (RFC 15.1).

Each chunk's files are written under a temporary name and renamed; then the progress state
(``.export-state.json``: the request, the last key written, the files so far) is replaced.
A run that stops resumes after the last chunk the state names; files of a later chunk are
leftovers of the stopped run and are written again.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
from collections.abc import Callable
from pathlib import Path

from membrane_core import errors
from membrane_core.transfer.bundle import MANIFEST, ExportRequest, FileEntry, Manifest, manifest_bytes
from membrane_core.transfer.export import START, Exporter, Key, refuse_mismatch
from membrane_core.trust import TrustPolicy

STATE = ".export-state.json"


def _write(path: Path, data: bytes) -> None:
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)


def export_to_folder(
    exporter: Exporter,
    request: ExportRequest,
    trust: TrustPolicy,
    folder: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """RFC 15.1: export into ``folder`` (created, or holding a stopped export of the same
    request, which this run resumes). ``progress(done, total)`` is called after each chunk
    with the records written so far and the records the export takes."""
    folder.mkdir(parents=True, exist_ok=True)
    state_path = folder / STATE
    plan = exporter.plan(request, trust)
    taken, withheld = exporter.counts(plan)
    after, first, files, resumed = START, 1, [], False
    if state_path.exists():
        state = json.loads(state_path.read_text())
        refuse_mismatch(ExportRequest.model_validate(state["request"]), request)
        after, first, resumed = Key.of(state["after"]), int(state["next"]), True
        files = [FileEntry.model_validate(f) for f in state["files"]]
        kept = {f.name for f in files}
        for leftover in folder.glob("*.ndjson*"):
            if leftover.name not in kept:
                leftover.unlink()
    elif any(folder.iterdir()):
        raise errors.InvalidInput(f"{folder} is not empty: export into a new or empty folder")
    done = sum(f.rows for f in files if f.kind == "records")
    for n, upto, members in exporter.chunks(plan, after=after, first=first):
        for m in members:
            _write(folder / m.entry.name, m.data)
            files.append(m.entry)
            done += m.entry.rows if m.entry.kind == "records" else 0
        state = {
            "request": request.model_dump(mode="json"),
            "after": upto.as_list(),
            "next": n + 1,
            "files": [f.model_dump() for f in files],
        }
        _write(state_path, json.dumps(state).encode())
        if progress:
            progress(done, taken)
    for m in exporter.tail(plan):
        _write(folder / m.entry.name, m.data)
        files.append(m.entry)
    manifest = exporter.manifest(plan, files, withheld=withheld, resumed=resumed)
    _write(folder / MANIFEST, manifest_bytes(manifest))
    state_path.unlink(missing_ok=True)
    return manifest


def export_to_tar(
    exporter: Exporter,
    request: ExportRequest,
    trust: TrustPolicy,
    path: Path,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> Manifest:
    """RFC 15.1: export into the tar ``path``, through a folder beside it
    (``<path>.parts``) that a stopped run resumes from."""
    parts = path.with_name(path.name + ".parts")
    manifest = export_to_folder(exporter, request, trust, parts, progress=progress)
    tmp = path.with_name(path.name + ".tmp")
    with tarfile.open(tmp, "w", format=tarfile.USTAR_FORMAT) as tar:
        for name in [*(f.name for f in manifest.files), MANIFEST]:
            tar.add(parts / name, arcname=name)
    os.replace(tmp, path)
    shutil.rmtree(parts)
    return manifest
