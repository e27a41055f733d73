"""The export bundle (RFC 15.1): NDJSON files by kind and chunk, and a manifest.

A bundle is a folder, or a tar of the same files: ``<kind>-<chunk>.ndjson`` for each chunk
of records (a file only for a kind the chunk has rows of), the trailing files of the
export's scopes (``tombstones``, ``gone_audit``, ``erasures``, chunk 0) and ``manifest.json``,
written last, naming every file with its kind, rows and sha256.
"""

from __future__ import annotations

import hashlib
import tarfile
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field

from membrane_core.enums import MemoryType
from membrane_core.models import ClientInput, Scope

FORMAT: Literal["membrane-export"] = "membrane-export"
#: RFC 15.1: the bundle format this package writes and reads.
FORMAT_VERSION = 1
MANIFEST = "manifest.json"

#: RFC 15.1: the kinds of a chunk, in the order an import loads them.
CHUNK_KINDS = (
    "records",
    "tags",
    "provenance",
    "relations",
    "entity_terms",
    "entity_identifiers",
    "vectors",
    "proposals",
    "audit",
)
#: RFC 15.1: the kinds of the export's scopes as a whole, written after the chunks.
TAIL_KINDS = ("tombstones", "gone_audit", "erasures")
KINDS = CHUNK_KINDS + TAIL_KINDS

#: RFC 15.1: a chunk holds at most this many records, and past its first at most this many
#: projected bytes, so an export holds one chunk in memory at a time.
CHUNK_ROWS = 5000
CHUNK_BYTES = 16 * 1024 * 1024


def file_name(kind: str, chunk: int) -> str:
    """The name of ``kind``'s file of ``chunk`` (0 for the trailing kinds)."""
    return f"{kind}-{chunk:06d}.ndjson"


class ExportRequest(ClientInput):
    """RFC 15.1: what an export takes. Every status is taken, retracted, contested and
    proposed records included."""

    scopes: list[Scope] | None = Field(default=None, max_length=256)
    types: list[MemoryType] | None = None
    created_after: AwareDatetime | None = None
    created_before: AwareDatetime | None = None
    #: RFC 15.1: the embeddings too, with the model named in the manifest
    with_vectors: bool = False
    #: RFC 15.1, 7.6: sealed records as plain ones (the deployment must hold their keys)
    open_sealed: bool = False


class FileEntry(BaseModel):
    """One file of a bundle, as its manifest names it."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    kind: Literal[KINDS]  # type: ignore[valid-type]
    rows: int = Field(ge=0)
    bytes: int = Field(ge=0)
    sha256: str = Field(pattern="^[0-9a-f]{64}$")


class Manifest(BaseModel):
    """RFC 15.1: ``manifest.json``."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    format: Literal["membrane-export"] = FORMAT
    format_version: int
    schema_version: int
    exported_at: datetime
    #: the id of the exporting key (its principal)
    exported_by: str
    filters: ExportRequest
    #: RFC 15.1: the embedding models of the vectors, when the export has them
    vector_models: list[str] | None = None
    counts: dict[str, int]
    #: records in the export's scopes above the exporter's sensitivity, left out
    withheld: int = Field(ge=0)
    #: RFC 15.1: the export was stopped and resumed, so its chunks span several snapshots
    resumed: bool = False
    files: list[FileEntry]


@dataclass(frozen=True)
class Member:
    """One file of a bundle as it is written: its entry and its bytes."""

    entry: FileEntry
    data: bytes

    @classmethod
    def of(cls, kind: str, chunk: int, data: bytes) -> Member:
        """The member of ``kind``'s lines of ``chunk``."""
        entry = FileEntry(
            name=file_name(kind, chunk),
            kind=kind,
            rows=data.count(b"\n"),
            bytes=len(data),
            sha256=hashlib.sha256(data).hexdigest(),
        )
        return cls(entry, data)


def tar_member(name: str, data: bytes, mtime: float) -> bytes:
    """One tar member (ustar header, data, padding to a 512-byte block)."""
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mtime = int(mtime)
    info.mode = 0o644
    pad = (-len(data)) % tarfile.BLOCKSIZE
    return info.tobuf(format=tarfile.USTAR_FORMAT) + data + b"\0" * pad


#: The end of a tar: two zero blocks.
TAR_END = b"\0" * (2 * tarfile.BLOCKSIZE)


def tar_stream(members: Iterator[tuple[str, bytes]], mtime: float) -> Iterator[bytes]:
    """RFC 15.1: a bundle's files as a tar, one member at a time."""
    for name, data in members:
        yield tar_member(name, data, mtime)
    yield TAR_END


def manifest_bytes(manifest: Manifest) -> bytes:
    """``manifest.json`` as written: indented, keys in model order, a final newline."""
    return manifest.model_dump_json(indent=2).encode() + b"\n"
