"""``membrane bench list``: a page of records beside a bare indexed read of the same rows (RFC 10.7, 14.1).

A fresh store (embedded Postgres in a temporary folder) gets ``--records`` synthetic
records over ``--scopes`` scopes with ``COPY``, written as ``bench retrieve`` writes them
(records of each scope interleaved, payloads, tags, provenance, entities and relations;
no embeddings, which a list never reads); the measured scope's records get the create entry
a capture writes (RFC 5.5: a record's console page reads its history); then ANALYZE. For
that scope, the first page and page ``--page`` (its cursor found by paging there once,
before measuring) are read in ``--rounds`` rounds after ``--warmup`` unmeasured ones, every
case once a round in an order drawn per round:

- ``ids``: the page's ids by the listing index alone (``list_records_bare``);
- ``rows``: the same records' columns and payload, by the same index and keyset position;
- ``content``: those rows with everything else a page shows of them (tags, provenance and
  relation targets, as plain arrays): the baseline, the page's content read bare;
- ``list``: ``Membrane.listing.records``: filters, trust checks, byte budget, hydration;
- ``http``: ``GET /v1/records`` over a kept-alive connection of the standard library's
  ``http.client``, which adds about 0.1 ms to a request where httpx added 0.3 to 1 ms: the
  figure is the server's.

Where the API serves the console (RFC 10.8), a record's page ``GET /console/records/{id}``
is measured beside its JSON ``GET /v1/records/{id}`` in the same rounds. Targets are
reported, never asserted: the API's page p99 within 3x of the bare read of its content (its
ratio to the columns and payload alone is printed beside), the console page's p50 within 3x
of the JSON read's. Every bare read is one statement without a transaction around it, as the
list's page is read (RFC 13.2).
"""

from __future__ import annotations

import functools
import http.client
import random
import time
import urllib.parse
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import cycle
from pathlib import Path
from typing import Annotated, Any

import httpx
import psycopg
import typer
from rich.console import Console

from membrane_cli import bench
from membrane_cli.bench import fresh_store
from membrane_cli.bench import load as benchload
from membrane_cli.bench import retrieve as synthetic
from membrane_cli.bench.listing_report import Figures, print_figures, report, write_markdown
from membrane_cli.bench.queries import q
from membrane_cli.bench.served import Served
from membrane_core import Membrane, Settings, errors
from membrane_core.storage import embedded
from membrane_core.storage.listing import Position, bare_page
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()

#: RFC 10.7: the default page size, the one measured.
PAGE = 50

#: A measured case: its kind and the page it reads (``None`` for a single record's read).
Key = tuple[str, int | None]


@dataclass(frozen=True)
class Start:
    """Where each reader starts a page: the list's cursor, the API's cursor, the bare position."""

    page: int
    cursor: str | None = None
    http_cursor: str | None = None
    after: Position | None = None


@dataclass
class Walk:
    """The pages found by paging once, before measuring: where each starts, whether the
    deepest is the scope's last, and the records of the deepest."""

    starts: list[Start] = field(default_factory=list)
    last: bool = False
    record_ids: list[uuid.UUID] = field(default_factory=list)


def _load(dsn: str, size: int, scopes: int, scope: str) -> dict[str, float]:
    """RFC 14.1: the synthetic records of ``bench retrieve``, one COPY per table per chunk,
    without their embeddings; the create entries of ``scope``'s records; then the search
    indexes again and ANALYZE. Seconds per step."""
    # the loader draws a vector for each record, never loaded here: the fewest dimensions
    corpus = synthetic.Corpus(dim=8, clusters=200, scopes=scopes, seed=11)
    benchload.drop_indexes(dsn)
    t0 = time.perf_counter()
    with bench.progress(console) as progress:
        task = progress.add_task("COPY synthetic records", total=size)
        for chunk in synthetic._chunks(corpus, size, 20_000, datetime.now(UTC)):
            benchload.copy_chunk(
                dsn,
                records=chunk["records"],
                payloads=chunk["payloads"],
                embeddings=(),
                relations=chunk["relations"],
                entity_terms=chunk["terms"],
                tags=chunk["tags"],
                provenance=chunk["provenance"],
            )
            progress.advance(task, len(chunk["embeddings"]))
    out = {"copy": time.perf_counter() - t0}
    t0 = time.perf_counter()
    with console.status(f"audit entries of {scope}"), psycopg.connect(dsn) as conn:
        conn.execute(q("bench_list_audit"), {"scope": scope})
    out["audit"] = time.perf_counter() - t0
    with console.status("building the search indexes again, ANALYZE"):
        out.update(benchload.build_indexes(dsn))
    return out


def _walk(m: Membrane, client: httpx.Client, scope: str, deep: int) -> Walk:
    """Page through ``scope`` once, by the library and by the API, up to page ``deep`` (or
    the last page): each reader's start of page 1 and of the deepest page reached. The bare
    position is the last row of the page before it, read by the index alone."""
    body: dict[str, Any] = {"scopes": [scope], "limit": PAGE}
    params: dict[str, Any] = {"scope": scope, "limit": PAGE}
    cursor: str | None = None
    http_cursor: str | None = None
    page = 1
    walk = Walk()
    while True:
        got = m.listing.records({**body, "cursor": cursor} if cursor else body, DEVELOPMENT_POLICY)
        resp = client.get("/v1/records", params={**params, "cursor": http_cursor} if http_cursor else params)
        resp.raise_for_status()
        walk.record_ids = [r.id for r in got.records]
        walk.last = got.next_cursor is None
        if page == deep or walk.last:
            break
        cursor, http_cursor = got.next_cursor, resp.json()["next_cursor"]
        page += 1
    walk.starts = [Start(1)]
    if page > 1:
        with m.db.reader() as conn:
            before = bare_page(conn, scope, (page - 1) * PAGE, None)
        after = Position(before[-1][1], before[-1][0])
        walk.starts.append(Start(page, cursor, http_cursor, after))
    return walk


class Kept:
    """GETs on one kept-alive ``http.client`` connection: the lightest client at hand, so a
    measured request is the server's time (RFC 14.1)."""

    def __init__(self, port: int) -> None:
        self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)

    def get(self, path: str, params: dict[str, Any] | None = None) -> bytes:
        self.conn.request("GET", f"{path}?{urllib.parse.urlencode(params)}" if params else path)
        resp = self.conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            raise errors.MembraneError(f"GET {path} answered {resp.status}: {body[:200]!r}")
        return body

    def close(self) -> None:
        self.conn.close()


def _cases(
    m: Membrane, client: Kept, scope: str, walk: Walk, console_page: bool
) -> dict[Key, Callable[[], object]]:
    """Each measured case as a call without arguments (RFC 14.1)."""
    cases: dict[Key, Callable[[], object]] = {}
    for s in walk.starts:
        request: dict[str, Any] = {"scopes": [scope], "limit": PAGE}
        params: dict[str, Any] = {"scope": scope, "limit": PAGE}
        if s.cursor and s.http_cursor:
            request["cursor"], params["cursor"] = s.cursor, s.http_cursor
        cases[("ids", s.page)] = functools.partial(_bare, m, "ids", scope, s.after)
        cases[("rows", s.page)] = functools.partial(_bare, m, "rows", scope, s.after)
        cases[("content", s.page)] = functools.partial(_bare, m, "content", scope, s.after)
        cases[("list", s.page)] = functools.partial(m.listing.records, request, DEVELOPMENT_POLICY)
        cases[("http", s.page)] = functools.partial(_http, client, "/v1/records", params)
    if console_page and walk.record_ids:
        # a record page reads one record: each round the next record of the deep page, the
        # same one for both (each case is called once a round)
        cases[("get", None)] = functools.partial(_record, client, "/v1/records", cycle(walk.record_ids))
        cases[("console", None)] = functools.partial(
            _record, client, "/console/records", cycle(walk.record_ids)
        )
    return cases


def _http(client: Kept, path: str, params: dict[str, Any]) -> object:
    return client.get(path, params)


def _record(client: Kept, prefix: str, ids: Iterator[uuid.UUID]) -> object:
    return client.get(f"{prefix}/{next(ids)}")


def _bare(m: Membrane, kind: str, scope: str, after: Position | None) -> list[tuple[Any, ...]]:
    """RFC 14.1: the baseline reads on the library's own pool, as the list reads."""
    with m.db.reader(single=True) as conn:  # one statement, as the list's page is read
        if kind == "ids":
            return list(bare_page(conn, scope, PAGE, after))
        params = {
            "scope": scope,
            "limit": PAGE,
            "after_created": after.created_at if after else None,
            "after_id": after.id if after else None,
        }
        return conn.execute(q(f"bench_list_bare_{kind}"), params, prepare=True).fetchall()


def _check(m: Membrane, scope: str, walk: Walk) -> None:
    """The list and the bare rows read the same records at each start (every synthetic record
    is visible to the development policy), so the baseline is the same work without the rest."""
    for s in walk.starts:
        request: dict[str, Any] = {"scopes": [scope], "limit": PAGE}
        if s.cursor:
            request["cursor"] = s.cursor
        listed = [r.id for r in m.listing.records(request, DEVELOPMENT_POLICY).records]
        bare = [row[0] for row in _bare(m, "rows", scope, s.after)]
        content = [row[0] for row in _bare(m, "content", scope, s.after)]
        if not listed == bare == content:
            raise errors.MembraneError(f"page {s.page}: the list and the bare rows read different records")


def _measure(cases: dict[Key, Callable[[], object]], rounds: int, warmup: int) -> dict[Key, list[float]]:
    """Every case once a round, in an order drawn per round; the first ``warmup`` rounds unmeasured."""
    times: dict[Key, list[float]] = {k: [] for k in cases}
    keys = list(cases)
    order = random.Random(rounds)  # the same orders in every run of a size
    with bench.progress(console) as progress:
        task = progress.add_task(f"rounds ({len(keys)} cases each)", total=warmup + rounds)
        for n in range(warmup + rounds):
            order.shuffle(keys)
            for k in keys:
                t = time.perf_counter()
                cases[k]()
                ms = (time.perf_counter() - t) * 1000
                if n >= warmup:
                    times[k].append(ms)
            progress.advance(task)
    return times


def _console(client: httpx.Client, ids: list[uuid.UUID]) -> tuple[bool, str]:
    """RFC 10.8: whether the API serves a record's console page (an HTML page, open without
    sign-in where no key is configured), and why not when it does not."""
    if not ids:
        return False, "no record to read"
    resp = client.get(f"/console/records/{ids[0]}")
    if resp.status_code == 200 and resp.headers.get("content-type", "").startswith("text/html"):
        return True, ""
    return False, f"`GET /console/records/{{id}}` answered {resp.status_code}: not measured"


def _settings(folder: Path) -> Settings:
    """RFC 14.1: a store of the benchmark's own, without providers or keys (the console
    opens without sign-in where no key is configured, RFC 10.8)."""
    s = fresh_store(Settings(embedding_provider="none", llm_provider="none"), folder)
    return s.model_copy(update={"api_keys": {}, "api_keys_file": None})


def _run(folder: Path, records: int, scopes: int, deep: int, rounds: int, warmup: int) -> Figures:
    f = Figures(records=records, scopes=scopes, rounds=rounds, warmup=warmup)
    scope = synthetic._scope(0)
    with Membrane(_settings(folder)) as m:
        dsn = embedded.dsn(folder)
        f.load = _load(dsn, records, scopes, scope)
        with console.status("reading the database files into the OS page cache"):
            benchload.warm_os_cache(dsn)
        with Served(m) as served, httpx.Client(base_url=served.url, timeout=30) as client:
            walk = _walk(m, client, scope, deep)
            _check(m, scope, walk)
            f.deep, f.deep_is_last = walk.starts[-1].page, walk.last
            f.console, f.console_note = _console(client, walk.record_ids)
            kept = Kept(served.port)
            try:
                cases = _cases(m, kept, scope, walk, f.console)
                f.loadavg.append(synthetic.loadavg())
                f.times = _measure(cases, rounds, warmup)
                f.loadavg.append(synthetic.loadavg())
            finally:
                kept.close()
    return f


def list_records(
    records: Annotated[int, typer.Option(min=1000, help="Synthetic records to load.")] = 1_000_000,
    scopes: Annotated[int, typer.Option(min=1, help="Scopes the records spread over.")] = 20,
    page: Annotated[
        int, typer.Option(min=2, help="The deep page measured beside the first (or the scope's last).")
    ] = 100,
    rounds: Annotated[int, typer.Option(min=10, help="Measured rounds (every case once each).")] = 1000,
    warmup: Annotated[int, typer.Option(min=0, help="Unmeasured rounds first.")] = 200,
    markdown: Annotated[Path | None, typer.Option(help="Write the result block into this file.")] = None,
) -> None:
    """RFC 10.7, 14.1: a page of records (first and deep) beside a bare indexed read of the same rows."""
    try:
        with bench.temp_store("list") as folder:
            figures = _run(folder, records, scopes, page, rounds, warmup)
    except errors.MembraneError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(1) from exc
    argv = (
        f"membrane bench list --records {records} --scopes {scopes} --page {page} "
        f"--rounds {rounds} --warmup {warmup}"
    )
    print_figures(console, figures)
    if markdown:
        write_markdown(markdown, report(figures, argv))
        console.print(f"wrote {markdown}")


def register(app: typer.Typer) -> None:
    """Add ``list`` to the ``bench`` group (RFC 14.1)."""
    app.command("list")(list_records)
