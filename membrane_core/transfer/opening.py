"""Opening sealed records in an export (RFC 15.1, 7.6), when it is asked to and holds the keys.

A sealed record's line becomes the line of the plain record a capture would have stored: its
payload, summary, metadata and tags from the ciphertext, its fact key and indexed text
computed from them as a capture computes them. Its tags' lines (blind values) are replaced by
the plain tags. What stays sealed: its audit entries' rationales (the chain covers their
ciphertext, 5.5) and its tombstones' blind keys (a blind value cannot be turned back).
"""

from __future__ import annotations

import base64
import json
import uuid
from typing import Any

from membrane_core.models import SemanticPayload
from membrane_core.providers.base import normalise_predicate
from membrane_core.sealing import Sealer
from membrane_core.storage.rowbatch import PAYLOAD, norm_term, search_text_of
from membrane_core.transfer.bundle import CHUNK_KINDS, Member


def _line(value: dict[str, Any]) -> bytes:
    return json.dumps(value, ensure_ascii=False, separators=(",", ":")).encode() + b"\n"


def open_record(sealer: Sealer, row: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """A sealed record's line as a plain record's, and its plain tags."""
    rid = uuid.UUID(row["id"])
    content = json.loads(sealer.open_text(rid, base64.b64decode(row["payload"]["sealed"])))
    payload = PAYLOAD.validate_python(content["payload"])
    tags = list(content.get("tags") or [])
    out = {
        **row,
        "summary": content.get("summary"),
        "metadata": content.get("metadata") or {},
        "search_text": search_text_of(payload, content.get("summary"), tags),
        "payload": {
            "kind": row["payload"]["kind"],
            "body": content["payload"],
            "key_id": None,
            "sealed": None,
        },
    }
    if isinstance(payload, SemanticPayload):
        out["fact_subject"] = norm_term(payload.subject)
        out["fact_predicate"] = normalise_predicate(payload.predicate)
        out["fact_object"] = norm_term(payload.object)
    return out, tags


def open_chunk(sealer: Sealer, members: list[Member], chunk: int) -> list[Member]:
    """A chunk's files with its sealed records opened (RFC 15.1): the records' lines, and the
    tags' lines of those records replaced by their plain tags, in the export's order."""
    by_kind = {m.entry.kind: m for m in members}
    records = by_kind.get("records")
    if records is None:
        return members
    lines: list[bytes] = []
    opened: dict[str, list[str]] = {}
    order: list[str] = []
    for raw in records.data.splitlines():
        row = json.loads(raw)
        order.append(row["id"])
        if row["payload"].get("sealed"):
            row, plain_tags = open_record(sealer, row)
            opened[row["id"]] = plain_tags
            lines.append(_line(row))
        else:
            lines.append(raw + b"\n")
    if not opened:
        return members
    by_kind["records"] = Member.of("records", chunk, b"".join(lines))
    tag_lines: dict[str, list[bytes]] = {}
    held = by_kind.get("tags")
    for raw in held.data.splitlines() if held else []:
        rid = json.loads(raw)["record_id"]
        if rid not in opened:
            tag_lines.setdefault(rid, []).append(raw + b"\n")
    for rid, values in opened.items():
        tag_lines[rid] = [_line({"record_id": rid, "tag": t}) for t in sorted(set(values))]
    data = b"".join(line for rid in order for line in tag_lines.get(rid, []))
    if data:
        by_kind["tags"] = Member.of("tags", chunk, data)
    else:
        by_kind.pop("tags", None)
    return [by_kind[k] for k in CHUNK_KINDS if k in by_kind]
