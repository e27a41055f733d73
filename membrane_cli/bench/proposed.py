"""The store with a share of its records proposed, for ``membrane bench retrieve --proposed-share``
(RFC 5.7, 14.1).

After the load, the benchmark database is copied on the same server (``CREATE DATABASE ...
TEMPLATE``); in the copy a share of the records, chosen by a hash of their ids, becomes
``proposed``. Both stores' records table is then vacuumed and analysed, so that the copy
carries no dead row versions of the update and both plan on fresh statistics. Before
measuring, a few retrievals on the copy check that its proposed records stay hidden and
that ``include_proposed`` returns them.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass

import psycopg

from membrane_cli.bench import load as benchload
from membrane_cli.bench.queries import q
from membrane_core import errors
from membrane_core.enums import RevisionStatus
from membrane_core.requests import RetrieveRequest, parse
from membrane_core.retrieval.retriever import Retriever
from membrane_core.trust import DEVELOPMENT_POLICY

#: RFC 5.7, 14.1: hybrid p99 with a share of the store proposed within 10 % of none proposed.
TARGET_RATIO = 1.1
#: Queries of the check before measuring, and the rows each asks for (the most a retrieve
#: returns: proposed records rank below every active one, RFC 5.7).
CHECK_QUERIES, CHECK_LIMIT = 5, 200


@dataclass(frozen=True)
class Copy:
    """The copy with a share proposed: its URL, how many of its records are proposed, of
    how many, and seconds per step of making it."""

    dsn: str
    proposed: int
    records: int
    seconds: dict[str, float]


@dataclass(frozen=True)
class Check:
    """What the check before measuring read on the copy: records returned (roots and
    neighbours) without ``include_proposed`` and, with it, how many of them were proposed."""

    queries: int
    hidden_returned: int
    shown_returned: int
    shown_proposed: int


def copy_name(name: str, share: float) -> str:
    """The database of the copy of ``name`` with ``share`` of its records proposed."""
    return f"{name}_proposed{round(100 * share)}"


def _vacuum(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as conn:
        conn.execute(q("bench_vacuum_records"))


def build(admin_dsn: str, name: str, dsn: str, share: float) -> Copy:
    """RFC 5.7: vacuum and analyse the records of ``name`` (at ``dsn``), copy it on the server
    of ``admin_dsn`` and mark ``share`` of the copy's records proposed; nobody may be connected
    to ``name`` meanwhile."""
    seconds: dict[str, float] = {}
    t = time.perf_counter()
    _vacuum(dsn)
    seconds["vacuum"] = time.perf_counter() - t
    t = time.perf_counter()
    copy_dsn = benchload.create_database(admin_dsn, copy_name(name, share), drop=True, template=name)
    seconds["template copy"] = time.perf_counter() - t
    t = time.perf_counter()
    records = benchload.loaded(copy_dsn)
    with psycopg.connect(copy_dsn) as conn:
        proposed = conn.execute(q("bench_propose"), {"n": round(share * records)}).rowcount
    _vacuum(copy_dsn)
    seconds["propose + vacuum"] = time.perf_counter() - t
    return Copy(copy_dsn, proposed, records, seconds)


def proposed_ids(dsn: str) -> set[uuid.UUID]:
    """The ids of the proposed records of the store at ``dsn``."""
    with psycopg.connect(dsn) as conn:
        return {row[0] for row in conn.execute(q("bench_proposed_ids"))}


def check(retriever: Retriever, ids: set[uuid.UUID], queries: Sequence[tuple[str, str]]) -> Check:
    """RFC 5.7: on the copy, no record a retrieve returns (roots and one-hop neighbours) is
    proposed, and with ``include_proposed: true`` at least one proposed record comes back,
    flagged ``proposed`` (the control: the store has proposed records where the queries
    look). Raises :class:`errors.MembraneError` otherwise."""
    hidden = shown = shown_proposed = 0
    for scope, text in queries[:CHECK_QUERIES]:
        base = {
            "query": text,
            "scopes": [scope],
            "limit": CHECK_LIMIT,
            "expand": {"hops": 1, "max_nodes": 25, "max_edges": 100},
        }
        got = retriever.retrieve(parse(RetrieveRequest, base), DEVELOPMENT_POLICY)
        views = [*got.records, *got.neighbors]
        hidden += len(views)
        leaked = [v.id for v in views if v.id in ids or v.status is RevisionStatus.PROPOSED]
        if leaked:
            raise errors.MembraneError(
                f"the store with proposed records returned {len(leaked)} proposed record(s) "
                f"for {text!r} without include_proposed (first {leaked[0]})"
            )
        got = retriever.retrieve(
            parse(RetrieveRequest, {**base, "include_proposed": True}), DEVELOPMENT_POLICY
        )
        views = [*got.records, *got.neighbors]
        shown += len(views)
        for v in views:
            if v.id in ids:
                if v.status is not RevisionStatus.PROPOSED:
                    raise errors.MembraneError(
                        f"proposed record {v.id} came back with status {v.status.value!r}"
                    )
                shown_proposed += 1
    if not shown_proposed:
        raise errors.MembraneError(
            f"no proposed record came back with include_proposed in {min(CHECK_QUERIES, len(queries))} "
            f"queries ({shown} records returned): the check cannot tell that they are hidden"
        )
    return Check(min(CHECK_QUERIES, len(queries)), hidden, shown, shown_proposed)
