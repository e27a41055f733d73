"""``membrane records`` and ``membrane work``: the lists of RFC 10.7 through the library.

Like ``membrane retrieve``, these read the configured store in-process under the development
policy (RFC 7.5): whoever holds the database credentials sees every scope, redacts nothing
and operates the work queue. ``records`` lists by filter, a page or (``--all``) every page,
and ``records lineage`` shows a record's corrections; ``work`` shows each job's backlog and
the buried items, and ``work requeue`` puts buried items back.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from membrane_core import Membrane, Settings, errors
from membrane_core.listing.results import Lineage, RecordPage, WorkOverview
from membrane_core.results import RecordView
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()

records_app = typer.Typer(help="Records by filter, newest first, and a record's lineage (RFC 10.7).")
work_app = typer.Typer(help="The work queue: each job's backlog and the buried items (RFC 9.4, 10.7).")

Json = Annotated[bool, typer.Option("--json", help="JSON instead of tables.")]
Cursor = Annotated[str | None, typer.Option(help="next_cursor of the previous page.")]
Limit = Annotated[int | None, typer.Option(min=1, max=200, help="Rows a page holds (default 50).")]


def _fail(exc: errors.MembraneError) -> typer.Exit:
    """Print a refusal as ``membrane capture`` does; the caller raises the exit."""
    console.print(f"[red]{exc.code}:[/red] {exc.message}", highlight=False)
    for d in exc.details[:20]:
        console.print(f"  {d.get('field')}: {d.get('message')}", highlight=False)
    return typer.Exit(1)


def _given(**params: Any) -> dict[str, Any]:
    """The options a caller gave: an unset option or an empty repeatable one is left out."""
    return {k: v for k, v in params.items() if v is not None and v != []}


def _when(value: str | None, option: str) -> datetime | None:
    """An ISO 8601 time with its zone: a naive one would be read in no zone at all."""
    if value is None:
        return None
    try:
        when = datetime.fromisoformat(value)
    except ValueError as exc:
        raise typer.BadParameter(f"{value!r} is not an ISO 8601 time", param_hint=option) from exc
    if when.tzinfo is None:
        raise typer.BadParameter(f"{value!r} has no time zone (add Z or +00:00)", param_hint=option)
    return when


def memory(record: RecordView) -> str:
    """What a record says, in one line: its fact, summary or text."""
    if record.redacted:
        return "(redacted)"
    p = record.payload or {}
    if "subject" in p:
        return f"{p['subject']} {p.get('predicate', '')} {p.get('object', '')}"
    return str(record.summary or p.get("text") or p.get("context_summary") or p.get("name") or "")[:90]


def _record_table(records: list[RecordView], title: str = "") -> Table:
    t = Table(title=title or None, title_justify="left")
    for col in ("id", "created", "type", "scope", "status", "sensitivity", "memory"):
        t.add_column(col, no_wrap=col == "id")
    for r in records:
        t.add_row(
            str(r.id),
            r.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            r.type.value,
            r.scope,
            r.status.value,
            r.sensitivity.value,
            memory(r),
        )
    return t


def _pages(m: Membrane, request: dict[str, Any]) -> Iterator[RecordPage]:
    """Every page from the request's cursor on (RFC 10.7 keyset pages)."""
    while True:
        page = m.listing.records(request, DEVELOPMENT_POLICY)
        yield page
        if page.next_cursor is None:
            return
        request = {**request, "cursor": page.next_cursor}


@records_app.callback(invoke_without_command=True)
def records(
    ctx: typer.Context,
    scope: Annotated[list[str] | None, typer.Option("--scope", "-s", help="Scope (repeatable).")] = None,
    memory_type: Annotated[list[str] | None, typer.Option("--type", "-t", help="Type (repeatable).")] = None,
    status: Annotated[
        list[str] | None,
        typer.Option(help="active, contested, retracted (repeatable; default the first two)."),
    ] = None,
    max_sensitivity: Annotated[str | None, typer.Option(help="Redact one level above, hide beyond.")] = None,
    tag: Annotated[list[str] | None, typer.Option(help="Tag (repeatable).")] = None,
    entity: Annotated[str | None, typer.Option(help="Records related to this entity record's id.")] = None,
    subject: Annotated[str | None, typer.Option(help="Facts about this subject.")] = None,
    predicate: Annotated[str | None, typer.Option(help="Facts with this predicate.")] = None,
    created_after: Annotated[str | None, typer.Option(help="ISO 8601 with a time zone.")] = None,
    created_before: Annotated[str | None, typer.Option(help="ISO 8601 with a time zone.")] = None,
    as_of: Annotated[str | None, typer.Option(help="As believed then (ISO 8601).")] = None,
    limit: Limit = None,
    cursor: Cursor = None,
    every: Annotated[bool, typer.Option("--all", help="Follow next_cursor to the last page.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="The page as JSON; with --all, one record a line.")
    ] = False,
) -> None:
    """List records newest first by scope, type, status, tag, subject and time (RFC 10.7)."""
    if ctx.invoked_subcommand is not None:
        return
    request = _given(
        scopes=scope,
        types=memory_type,
        statuses=status,
        max_sensitivity=max_sensitivity,
        tags=tag,
        entity=entity,
        subject=subject,
        predicate=predicate,
        created_after=created_after,
        created_before=created_before,
        as_of=as_of,
        limit=limit,
        cursor=cursor,
    )
    with Membrane(Settings()) as m:
        try:
            if every:
                _print_every(_pages(m, request), as_json=as_json)
                return
            page = m.listing.records(request, DEVELOPMENT_POLICY)
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    if as_json:
        typer.echo(page.model_dump_json(indent=2))
        return
    console.print(_record_table(page.records))
    d = page.diagnostics
    cut = " (the byte budget ended the page)" if d.byte_limit_applied else ""
    more = f"; the next page: --cursor {page.next_cursor}" if page.next_cursor else ""
    console.print(f"{d.returned} records, {d.bytes} bytes{cut}{more}", highlight=False, soft_wrap=True)


def _print_every(pages: Iterator[RecordPage], *, as_json: bool) -> None:
    """Every page's records: JSON lines as each page comes, or one table at the end."""
    shown: list[RecordView] = []
    for page in pages:
        if as_json:
            for r in page.records:
                typer.echo(r.model_dump_json())
        else:
            shown.extend(page.records)
    if not as_json:
        console.print(_record_table(shown))
        console.print(f"{len(shown)} records", highlight=False)


@records_app.command("lineage")
def lineage(
    record_id: Annotated[str, typer.Argument(help="The record's id.")],
    as_of: Annotated[str | None, typer.Option(help="As believed then (ISO 8601).")] = None,
    as_json: Json = False,
) -> None:
    """A record's corrections: what it superseded, was merged into, forked from, contests (RFC 10.7)."""
    with Membrane(Settings()) as m:
        try:
            found = m.listing.lineage(record_id, DEVELOPMENT_POLICY, as_of=_when(as_of, "--as-of"))
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    if as_json:
        typer.echo(found.model_dump_json(indent=2))
        return
    _print_lineage(found)


def _print_lineage(found: Lineage) -> None:
    console.print(_record_table(found.nodes, title=f"lineage of {found.record_id}"))
    t = Table(title="corrections", title_justify="left")
    for col in ("kind", "from", "to", "at", "actor", "rationale"):
        t.add_column(col, no_wrap=col in {"from", "to"})
    for e in found.edges:
        at = e.at.strftime("%Y-%m-%d %H:%M:%S") if e.at else ""
        t.add_row(e.kind, str(e.source_id), str(e.target_id), at, e.actor or "", e.rationale or "")
    console.print(t)
    if found.truncated:
        console.print("[yellow]the walk stopped at its node bound: the lineage goes on[/yellow]")


@work_app.callback(invoke_without_command=True)
def work(
    ctx: typer.Context,
    kind: Annotated[list[str] | None, typer.Option(help="Buried items of this job (repeatable).")] = None,
    limit: Limit = None,
    cursor: Cursor = None,
    as_json: Json = False,
) -> None:
    """Each job's due, claimed, retrying and buried items, the inbox, and the buried items with
    their last error (RFC 10.7)."""
    if ctx.invoked_subcommand is not None:
        return
    with Membrane(Settings()) as m:
        try:
            overview = m.listing.work(_given(kinds=kind, limit=limit, cursor=cursor), DEVELOPMENT_POLICY)
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    if as_json:
        typer.echo(overview.model_dump_json(indent=2))
        return
    _print_work(overview)


def _print_work(overview: WorkOverview) -> None:
    jobs = Table(title="jobs", title_justify="left")
    for col in ("job", "due", "claimed", "retrying", "buried", "pending", "oldest due"):
        jobs.add_column(col, justify="left" if col == "job" else "right")
    for j in overview.jobs:
        oldest = f"{j.oldest_due_seconds:.0f} s" if j.oldest_due_seconds is not None else ""
        jobs.add_row(
            j.kind.value, *(str(n) for n in (j.due, j.claimed, j.retrying, j.buried, j.pending)), oldest
        )
    console.print(jobs)
    inbox = ", ".join(f"{c.kind.value} {c.status.value} {c.count}" for c in overview.inbox)
    console.print(f"inbox: {inbox or 'empty'}", highlight=False)
    if overview.embedding_lag_seconds is not None:
        console.print(f"embedding lag: {overview.embedding_lag_seconds:.0f} s", highlight=False)
    if not overview.buried:
        console.print("no buried items", highlight=False)
        return
    buried = Table(title="buried items (membrane work requeue <id>...)", title_justify="left")
    for col in ("id", "job", "record", "attempts", "last error"):
        buried.add_column(col, no_wrap=col == "record")
    for b in overview.buried:
        buried.add_row(str(b.id), b.kind.value, str(b.target_id), str(b.attempts), b.last_error or "")
    console.print(buried)
    if overview.next_cursor:
        console.print(f"more: --cursor {overview.next_cursor}", highlight=False, soft_wrap=True)


@work_app.command("requeue")
def requeue(
    ids: Annotated[list[int], typer.Argument(help="Ids of buried items (membrane work).")],
    rationale: Annotated[str | None, typer.Option(help="Written to each item's record's audit.")] = None,
    as_json: Json = False,
) -> None:
    """Put buried items back, due now; each is audited on its record (RFC 10.7)."""
    with Membrane(Settings()) as m:
        try:
            result = m.listing.requeue(_given(ids=ids, rationale=rationale), DEVELOPMENT_POLICY)
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
        return
    requeued = " ".join(map(str, result.requeued)) or "none"
    console.print(f"requeued: {requeued}", highlight=False)
    if result.unchanged:
        unchanged = " ".join(map(str, result.unchanged))
        console.print(f"unchanged (not buried, or gone): {unchanged}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``membrane records`` and ``membrane work`` to ``app``."""
    app.add_typer(records_app, name="records")
    app.add_typer(work_app, name="work")
