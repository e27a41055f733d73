"""Bounded, trust-filtered reads for retrieval (RFC 8.1, 8.3, 8.4)."""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, NamedTuple

import psycopg
from pgvector import Vector
from psycopg.rows import dict_row
from pydantic import BaseModel, TypeAdapter
from pydantic_core import to_json

from membrane_core import decay
from membrane_core.enums import RevisionStatus, Sensitivity
from membrane_core.models import MemoryRecord, Payload
from membrane_core.results import RecordView, has_references, shown_references
from membrane_core.retrieval.fusion import FEATURES
from membrane_core.sealing import Sealer
from membrane_core.storage import records
from membrane_core.storage.queries import Shaped, q, shaped


@dataclass(frozen=True)
class ReadFilter:
    """Trust, time, status and type predicates applied in SQL on every path (RFC 8.1, 7.3, 5.6)."""

    scopes: list[str] | None  # None: every scope
    max_rank: int
    types: list[str] | None
    tags: list[str] | None
    include_retracted: bool
    include_contested: bool
    min_salience: float
    now: datetime
    as_of: datetime | None = None
    valid_at: datetime | None = None
    #: RFC 5.7: proposed records, flagged, only when the read asks for them
    include_proposed: bool = False

    def params(self) -> dict[str, Any]:
        """Bind parameters shared by the read queries."""
        return {
            "all_scopes": self.scopes is None,
            "scopes": self.scopes or [],
            "max_rank": self.max_rank,
            "types": self.types,
            "tags": self.tags,
            "include_retracted": self.include_retracted,
            "include_contested": self.include_contested,
            "include_proposed": self.include_proposed,
            "min_salience": self.min_salience,
            "salience_floor": self.min_salience > 0,
            "now": self.now,
            "as_of": self.as_of,
            "valid_at": self.valid_at,
        }


_PAYLOAD: TypeAdapter[Payload] = TypeAdapter(Payload)


@dataclass(frozen=True, slots=True)
class Stored:
    """A record as a retrieval read hydrated it (RFC 8.3): the fields the service checks again,
    and its row (``record_fields``, relations already cut to targets shown in full), from
    which the caller's view is built directly: its payload goes through its model, as a read
    by id has it, and its provenance is read in the view's JSON form; the full
    :class:`MemoryRecord` is validated only when asked for (the selector's candidates,
    RFC 8.5).
    """

    id: uuid.UUID
    type: str
    scope: str
    sensitivity: str
    status: str  # stored (current)
    recorded_at: datetime
    retracted_at: datetime | None
    valid_from: datetime | None
    valid_to: datetime | None
    row: dict[str, Any]

    @classmethod
    def of(cls, row: dict[str, Any]) -> Stored:
        """The stored record of a hydrated row."""
        timed = bool(row["validity_mode"])
        return cls(
            row["id"],
            row["type"],
            row["scope"],
            row["sensitivity"],
            row["status"],
            row["recorded_at"],
            row["retracted_at"],
            row["valid_from"] if timed else None,
            row["valid_to"] if timed else None,
            row,
        )

    def salience_at(self, at: datetime) -> float:
        """RFC 6.1: current salience from the stored base and decay clock."""
        row = self.row
        return decay.decayed(
            row["base_salience"],
            row["reinforced_at"],
            row["half_life_seconds"],
            row["min_salience"],
            at,
            pinned=row["pinned"],
        )

    def view(self, *, salience: float, status: str, redacted: bool, score: float | None = None) -> RecordView:
        """RFC 7.3: the caller's view (metadata only when ``redacted``), as
        :func:`membrane_core.results.view` makes it from the full record."""
        fields = self.view_fields(salience=salience, status=status, redacted=redacted, score=score)
        if isinstance(fields["payload"], BaseModel):  # the view holds it as its JSON form
            fields["payload"] = fields["payload"].model_dump(mode="json")
        return RecordView.model_validate(fields)

    def view_json(self, *, salience: float, status: str, redacted: bool, score: float | None = None) -> bytes:
        """RFC 10.7: the view's JSON, byte for byte :meth:`view`'s ``model_dump_json()``, without
        building the model: a page of records is answered as these (RFC 8.3 measures them)."""
        return to_json(self.view_fields(salience=salience, status=status, redacted=redacted, score=score))

    def view_fields(
        self, *, salience: float, status: str, redacted: bool, score: float | None = None
    ) -> dict[str, Any]:
        """Every field of :class:`RecordView`, in its order, as its JSON holds them: the payload
        as its model (its JSON form where references were cut), the rest as stored (their types
        are the view's; the provenance is read in its JSON form)."""
        row = self.row
        payload: Payload | dict[str, Any] | None = None
        summary: str | None = None
        tags: list[str] = []
        metadata: dict[str, Any] = {}
        relations: list[dict[str, Any]] = []
        provenance: list[Any] = []
        validity: dict[str, Any] | None = None
        if not redacted:
            # the payload through its model: maintenance writes some of its fields in SQL
            # (timestamps, rates), and a field a later model adds takes its default; its
            # references only with their relations (RFC 2.5). Without references the model
            # itself goes in, and the view's JSON is its serialisation.
            relations = row["relations"]
            payload = _PAYLOAD.validate_python(row["payload"])
            if has_references(row["payload"]):
                payload = shown_references(
                    _PAYLOAD.dump_python(payload, mode="json"),
                    ((rel["predicate"], rel["target_id"]) for rel in relations),
                )
            summary, tags, metadata = row["summary"], row["tags"], row["metadata"]
            # already in the view's form (record_fields): each source as its model dumps it
            provenance = row["provenance"]
            validity = (
                {
                    "mode": row["validity_mode"],
                    "conditions": {},
                    "valid_from": row["valid_from"],
                    "valid_to": row["valid_to"],
                }
                if row["validity_mode"]
                else None
            )
        return {
            "id": row["id"],
            "type": row["type"],
            "scope": row["scope"],
            "sensitivity": row["sensitivity"],
            "confidence": float(row["confidence"]),
            "salience": float(salience),
            "status": status,
            "payload": payload,
            "summary": summary,
            "tags": tags,
            "metadata": metadata,
            "relations": relations,
            "provenance": provenance,
            "validity": validity,
            "occurred_at": row["occurred_at"],
            "created_at": row["created_at"],
            "updated_at": row["updated_at"],
            "recorded_at": row["recorded_at"],
            "retracted_at": row["retracted_at"],
            "redacted": redacted,
            "score": None if score is None else float(score),
        }

    def opened(self, sealer: Sealer) -> Stored:
        """RFC 7.6: the record with its sealed part opened (a plain one as it is); only a view in
        full needs it, so the service opens a record after its trust check."""
        if self.row.get("sealed") is None:
            return self
        return dataclasses.replace(self, row=sealer.open_row(self.row))

    def record(self) -> MemoryRecord:
        """The full record, validated (RFC 2.1)."""
        return records.row_to_record(self.row)


@dataclass(frozen=True)
class Ranked:
    """A fused candidate within the row cap, best first (RFC 8.2, 8.3).

    ``bytes`` is its projected size and ``running`` the running total up to it; when it
    fits the byte budget, ``record`` is the hydrated record.
    """

    ord: int
    score: float
    status: str  # as of the request's as_of (RFC 5.6)
    vector_score: float | None
    text_score: float | None
    entity_score: float | None
    salience: float  # current (RFC 6.1)
    bytes: int
    running: int
    fits: bool
    record: Stored | None


@dataclass(frozen=True)
class Roots:
    """The ranked candidates within the row cap, and what the pool held (RFC 8.6).

    With expansion, ``first_hop`` is the first hop from every fitting root shown in full,
    found by the same statement (RFC 8.4).
    """

    ranked: list[Ranked]
    candidates: int
    arms: dict[str, int]
    first_hop: Hop | None = None
    #: RFC 8.2.3, with ``late``: the id of every ranked row, in order, and the token signs
    #: of those that have them
    pool_ids: list[uuid.UUID] = dataclasses.field(default_factory=list)
    signs: dict[uuid.UUID, bytes] = dataclasses.field(default_factory=dict)


@dataclass(frozen=True)
class Sized:
    """A ranked id with its projected bytes, running total and, when it fits, the record (RFC 8.3)."""

    ord: int
    id: uuid.UUID
    bytes: int
    running: int
    fits: bool
    record: Stored | None


@dataclass(frozen=True)
class HopRow:
    """A relation leaving the frontier and the neighbour at its other end (RFC 8.4)."""

    source_id: uuid.UUID
    predicate: str
    target_id: uuid.UUID
    other: uuid.UUID
    scope: str
    sensitivity: str
    status: str
    bytes: int  # the neighbour's projected bytes (RFC 8.3)


@dataclass(frozen=True)
class Hop:
    """One hop's edges, and the new neighbours it hydrated (RFC 8.4, 8.3)."""

    rows: list[HopRow]
    records: dict[uuid.UUID, Stored]


def configure_scan(conn: psycopg.Connection, *, ef_search: int, max_scan_tuples: int) -> None:
    """RFC 8.1: iterative HNSW scans for this transaction, so filters do not starve results."""
    conn.execute(q("retrieval_scan_settings"), {"ef_search": ef_search, "max_scan_tuples": max_scan_tuples})


#: Partitions of record_embeddings by scope, as looked up (RFC 13.2); bounded.
_PARTITIONS: dict[str, str] = {}
_PARTITIONS_MAX = 100_000
_PARTITION_NAME = re.compile(r"record_embeddings_p\d{1,3}")


def embeddings_relation(conn: psycopg.Connection, scopes: Sequence[str] | None) -> str:
    """RFC 13.2: the table the vector reads of a request name: the scope's partition of
    ``record_embeddings`` when the request reads one scope, else ``record_embeddings``.

    A generic plan over the parent locks every partition each time it is bound (Postgres
    prunes them only afterwards), which cost a one-scope retrieval more than the search.
    Hash partitioning is fixed by migration 0002, so a scope's partition never changes
    and is looked up once per process.
    """
    if scopes is None or len(scopes) != 1:
        return "record_embeddings"
    scope = scopes[0]
    rel = _PARTITIONS.get(scope)
    if rel is None:
        row = conn.execute(q("embedding_partition"), {"scope": scope}).fetchone()
        if row is None or not _PARTITION_NAME.fullmatch(row[0]):
            return "record_embeddings"
        if len(_PARTITIONS) >= _PARTITIONS_MAX:
            _PARTITIONS.clear()
        rel = _PARTITIONS[scope] = row[0]
    return rel


#: RFC 8.1.1: with a tag filter matching at most this many records, the vector arm ranks
#: them exactly instead of searching the HNSW graph.
TAG_CAP = 2000

#: RFC 8.1.3: an entity with more links than this in a direction is too common to rank for
#: every caller, so that counting the links a caller may see never reads a hub's every link.
LINK_SCAN = 1000

#: RFC 8.1.2: a request for at most this many scopes matches its words in the index of scoped
#: lexemes; its query holds every word in every scope, and Postgres checks each match
#: against the whole query, so more scopes read the plain index with the scope lexemes.
SCOPED_MAX = 4


class FirstHop(NamedTuple):
    """RFC 8.4: the first expansion hop the roots statement runs, as :func:`graph_hop` would,
    from the fitting roots shown in full."""

    max_edges: int
    max_nodes: int


class Adjacent(NamedTuple):
    """RFC 8.2.1: the best ``sources`` episodes of the pool lift the ``reach`` episodes before
    and after each of them in time, the k-th by ``decay ** k`` of its source's score."""

    sources: int
    reach: int
    decay: float


@dataclass(frozen=True, kw_only=True)
class RootsQuery:
    """What the roots statement reads and how it ranks (RFC 8.1-8.3): the request's filters
    and every knob of the arms, the fusion, the bounds and the optional parts.

    ``when``: the windows ``[start, end)`` the query names; a candidate that occurred in one
    gets ``when_prior`` (RFC 8.2.2). ``late``: every ranked row's id and token signs come
    back too (RFC 8.2.3); it is not combined with ``first_hop``, since late interaction
    re-ranks the roots the hop would run from.
    """

    filter: ReadFilter
    query: str | None
    qvec: Sequence[float] | None
    terms: Sequence[str]
    #: RFC 8.1.3: ``(namespace, value)`` of each identifier the query names
    identifiers: Sequence[tuple[str, str]] = ()
    #: RFC 8.1: candidates kept per lexical and entity arm, and by the vector arm
    arm_k: int
    vec_k: int
    #: RFC 8.1.3: an entity linked to more records than this is too common to rank by
    fanout: int
    #: RFC 8.3: the row cap and the byte budget
    limit: int
    max_bytes: int
    #: RFC 8.2: the fusion and its constants
    rrf: bool
    weights: Mapping[str, float]
    rrf_k: float
    sd_floor_salience: float
    semantic_prior: float = 0.0
    when: Sequence[tuple[datetime, datetime]] = ()
    when_prior: float = 0.0
    first_hop: FirstHop | None = None
    adjacent: Adjacent | None = None
    late: bool = False
    #: RFC 8.1.2: document-frequency and match caps of the full-text arm
    df_cap: int = 1000
    fts_cap: int = 5000
    #: RFC 2.5: whether a relation target ``(scope, sensitivity)`` is shown in full
    target_visible: Callable[[str, str], bool]

    def __post_init__(self) -> None:
        if self.late and self.first_hop is not None:
            raise ValueError("late interaction re-ranks the roots: no first hop from them")

    def params(self, embeddings: str) -> dict[str, Any]:
        """Bind parameters of ``retrieval_roots``, reading ``embeddings`` (RFC 13.2)."""
        f, hop, adjacent = self.filter, self.first_hop, self.adjacent
        edges, nodes = hop or (0, 0)
        sources, reach, decay = adjacent or (0, 0, 0.0)
        return {
            **f.params(),
            "query": self.query or None,
            "has_query": bool(self.query),
            "qvec": Vector(list(self.qvec)) if self.qvec is not None else None,
            "has_qvec": self.qvec is not None,
            "terms": list(self.terms),
            "id_namespaces": [namespace for namespace, _ in self.identifiers],
            "id_values": [value for _, value in self.identifiers],
            "arm_k": self.arm_k,
            "vec_k": self.vec_k,
            "fanout": self.fanout,
            "df_cap": self.df_cap,
            "fts_cap": self.fts_cap,
            "tag_cap": TAG_CAP,
            "link_scan": LINK_SCAN,
            "limit": self.limit,
            "max_bytes": self.max_bytes,
            "rrf": self.rrf,
            "rrf_k": self.rrf_k,
            "sd_floor_salience": self.sd_floor_salience,
            "semantic_prior": self.semantic_prior,
            "when_from": [start for start, _ in self.when],
            "when_to": [end for _, end in self.when],
            "when_prior": self.when_prior,
            **{f"w_{name}": float(self.weights.get(name, 0.0)) for name in FEATURES},
            "embeddings": embeddings,
            "has_tags": f.tags is not None,
            "hop": hop is not None,
            "scoped": f.scopes is not None and 1 <= len(f.scopes) <= SCOPED_MAX,
            "hop_rows": 2 * edges + 1 if hop else 0,
            "hop_edges": edges,
            "hop_new": nodes,
            "adjacent": adjacent is not None,
            "adjacent_sources": sources,
            "adjacent_reach": reach,
            "adjacent_decay": decay,
            "late": self.late,
        }


def roots(conn: psycopg.Connection, query: RootsQuery) -> Roots:
    """RFC 8.1-8.3: one statement: candidates of every arm, filtered in SQL, fused, cut by rows
    and projected bytes, and hydrated where they fit.

    With ``query.first_hop`` it also runs the first expansion hop (RFC 8.4) from the fitting
    roots shown in full, as :func:`graph_hop` would, in the same statement; with
    ``query.adjacent`` the episodes next to the best ones are lifted (RFC 8.2.1).
    """
    st = shaped(
        "retrieval_roots",
        query.params(embeddings_relation(conn, query.filter.scopes)),
        ints=(
            "max_rank",
            "arm_k",
            "vec_k",
            "fanout",
            "df_cap",
            "fts_cap",
            "tag_cap",
            "link_scan",
            "hop_rows",
            "adjacent_sources",
            "adjacent_reach",
        ),
        relations=("embeddings",),
    )
    found = _run(conn, st).fetchall()
    rows = [row for row in found if row["kind"] == "root"]
    first = rows[0] if rows else {}
    target_visible, late = query.target_visible, query.late
    return Roots(
        ranked=[_ranked(row, target_visible) for row in rows],
        candidates=first.get("pool_size", 0),
        arms={
            "vector": first.get("n_vector", 0),
            "text": first.get("n_text", 0),
            "entity": first.get("n_entity", 0),
        },
        first_hop=_hop([row for row in found if row["kind"] == "hop"], target_visible)
        if query.first_hop
        else None,
        pool_ids=[row["pool_id"] for row in rows] if late else [],
        signs={row["pool_id"]: bytes(row["token_signs"]) for row in rows if row["token_signs"]}
        if late
        else {},
    )


def _ranked(row: dict[str, Any], target_visible: Callable[[str, str], bool]) -> Ranked:
    """A root row as a ranked candidate, hydrated when it fits (RFC 8.2, 8.3)."""
    return Ranked(
        ord=row["ord"],
        score=row["score"],
        status=row["status_as_of"],
        vector_score=row["vector_score"],
        text_score=row["text_score"],
        entity_score=row["entity_score"],
        salience=row["salience_now"],
        bytes=row["bytes"],
        running=row["running"],
        fits=row["fits"],
        record=stored(row, target_visible) if row["fits"] and row["id"] is not None else None,
    )


def _run(conn: psycopg.Connection, st: Shaped, *, tuples: bool = False) -> psycopg.RawCursor[Any]:
    """Execute a shaped statement, prepared, its rows in binary (RFC 8.1.5), as dicts unless
    ``tuples``."""
    cur: psycopg.RawCursor[Any] = (
        psycopg.RawCursor(conn) if tuples else psycopg.RawCursor(conn, row_factory=dict_row)
    )
    cur.execute(st.sql, st.values, prepare=True, binary=True)
    return cur


def stored(row: dict[str, Any], target_visible: Callable[[str, str], bool]) -> Stored:
    """A hydrated row (``record_fields`` with ``visible_relations``) as a stored record; RFC
    2.5: relations only to targets shown in full."""
    row["relations"] = [
        # a weight as the view's JSON writes it: a float (JSON gives 1 for 1.0)
        {
            "predicate": rel["predicate"],
            "target_id": rel["target_id"],
            "weight": None if rel["weight"] is None else float(rel["weight"]),
        }
        for rel in row["relations"]
        if target_visible(rel["target_scope"], rel["target_sensitivity"])
    ]
    return Stored.of(row)


def bounded_hydrate(
    conn: psycopg.Connection,
    ids: Sequence[uuid.UUID],
    *,
    limit: int,
    max_bytes: int,
    f: ReadFilter,
    target_visible: Callable[[str, str], bool],
) -> list[Sized]:
    """RFC 8.3: cut ``ids`` (best first) by rows and running bytes in SQL; hydrate what fits.

    RFC 2.5: relations are kept only to targets the filter shows in full (in SQL) and that
    ``target_visible(scope, sensitivity)`` accepts (in Python).
    """
    if not ids:
        return []
    st = shaped(
        "retrieval_bounded_hydrate",
        {
            "ids": list(ids),
            "limit": limit,
            "max_bytes": max_bytes,
            "max_rank": f.max_rank,
            "all_scopes": f.scopes is None,
            "scopes": f.scopes or [],
            "as_of": f.as_of,
        },
        ints=("max_rank",),
    )
    out = []
    for row in _run(conn, st).fetchall():
        rec = stored(row, target_visible) if row["fits"] and row["id"] is not None else None
        out.append(
            Sized(
                ord=row["ord"],
                id=ids[row["ord"] - 1],
                bytes=row["bytes"],
                running=row["running"],
                fits=row["fits"],
                record=rec,
            )
        )
    return out


def graph_hop(
    conn: psycopg.Connection,
    f: ReadFilter,
    frontier: Sequence[uuid.UUID],
    *,
    expanded: Sequence[uuid.UUID],
    known: Sequence[uuid.UUID],
    max_rows: int,
    max_edges: int,
    max_new: int,
    max_bytes: int,
    target_visible: Callable[[str, str], bool],
) -> Hop:
    """RFC 8.4: one statement per hop: edges touching ``frontier`` whose far end passes the
    filters, and the neighbours they discover hydrated.

    Edges to nodes expanded at an earlier hop were seen then and are skipped. The first
    ``max_new`` nodes not in ``known`` that the first ``max_edges`` distinct edges reach are
    hydrated while their running projected bytes stay within ``max_bytes`` (RFC 8.3), so
    the expansion needs no statement of its own to hydrate them.
    """
    if not frontier or max_rows <= 0:
        return Hop([], {})
    st = shaped(
        "retrieval_graph_hop",
        {
            **f.params(),
            "frontier": list(frontier),
            "expanded": list(expanded),
            "known": list(known),
            "hop_rows": max_rows,
            "hop_edges": max_edges,
            "hop_new": max(0, max_new),
            "hop_bytes": max_bytes,
        },
        ints=("max_rank",),
    )
    return _hop(_run(conn, st).fetchall(), target_visible)


def _hop(rows: Sequence[dict[str, Any]], target_visible: Callable[[str, str], bool]) -> Hop:
    """Hop rows (RFC 8.4) as edges and the neighbours hydrated with them."""
    edges, hydrated = [], {}
    for row in rows:
        edges.append(
            HopRow(
                row["source_id"],
                row["predicate"],
                row["target_id"],
                row["other"],
                row["other_scope"],
                row["other_sensitivity"],
                row["other_status"],
                row["bytes"],
            )
        )
        if row["hydrated"]:
            hydrated[row["other"]] = stored(row, target_visible)
    return Hop(edges, hydrated)


@dataclass(frozen=True, slots=True)
class Access:
    """What a trust check reads of a record: scope, sensitivity, status (as of a time)."""

    scope: str
    sensitivity: Sensitivity
    status: RevisionStatus


def access(
    conn: psycopg.Connection, ids: Sequence[uuid.UUID], *, as_of: datetime | None = None
) -> dict[uuid.UUID, Access]:
    """Records' :class:`Access` by id, for trust checks (RFC 7.3, 5.6)."""
    if not ids:
        return {}
    cur = _run(conn, shaped("retrieval_access", {"ids": list(ids), "as_of": as_of}), tuples=True)
    return {
        rid: Access(scope, Sensitivity(sens), RevisionStatus(status))
        for rid, scope, sens, status in cur.fetchall()
    }
