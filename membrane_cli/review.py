"""``membrane review``: the queue of proposed memories and the decisions on them (RFC 5.7).

Like ``membrane records``, it works on the configured store in-process under the development
policy (RFC 7.5), which is a reviewer: whoever holds the database credentials decides. The
queue lists what a reviewed key or the extraction pool proposed; ``approve``, ``reject`` and
``amend`` decide one proposal each, audited with the development actor. A refused decision
prints its code and message and exits with status 1.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Annotated, Any, Literal

import typer
from rich.console import Console
from rich.table import Table

from membrane_cli.lists import memory
from membrane_core import Membrane, Settings, errors
from membrane_core.review.results import DecisionResult, ReviewEntry, ReviewPage
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()

review_app = typer.Typer(help="Proposed memories awaiting a reviewer: the queue and the decisions (RFC 5.7).")

ProposalId = Annotated[str, typer.Argument(help="The proposal's id (membrane review).")]
Rationale = Annotated[str | None, typer.Option(help="Why: written to the audit of every record.")]
Json = Annotated[bool, typer.Option("--json", help="JSON instead of text.")]


def _fail(exc: errors.MembraneError) -> typer.Exit:
    """Print a refusal as ``membrane records`` does; the caller raises the exit."""
    console.print(f"[red]{exc.code}:[/red] {exc.message}", highlight=False)
    for d in exc.details[:20]:
        console.print(f"  {d.get('field')}: {d.get('message')}", highlight=False)
    return typer.Exit(1)


def age(created_at: datetime, now: datetime) -> str:
    """How long a proposal has waited, in its largest unit."""
    seconds = max(0.0, (now - created_at).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size:.0f} {unit}"
    return f"{seconds:.0f} s"


def proposed(entry: ReviewEntry) -> str:
    """What a proposal says: its fact's triple, else its first record's text."""
    if entry.fact is not None:
        return memory(entry.fact)
    return memory(entry.records[0]) if entry.records else ""


def _queue_table(entries: list[ReviewEntry], now: datetime) -> Table:
    t = Table(title_justify="left")
    for col in ("proposal", "scope", "source", "proposed by", "corroborations", "age", "memory", "conflicts"):
        t.add_column(
            col,
            no_wrap=col == "proposal",
            justify="right" if col in {"corroborations", "conflicts"} else "left",
        )
    for e in entries:
        t.add_row(
            str(e.proposal_id),
            e.scope,
            e.source,
            e.proposed_by,
            str(e.corroborations),
            age(e.created_at, now),
            proposed(e),
            str(len(e.conflicts)),
        )
    return t


def _pages(m: Membrane, request: dict[str, Any]) -> Iterator[ReviewPage]:
    """Every page of the queue from the request's cursor on (RFC 10.7 keyset pages)."""
    while True:
        page = m.review.queue(request, DEVELOPMENT_POLICY)
        yield page
        if page.next_cursor is None:
            return
        request = {**request, "cursor": page.next_cursor}


@review_app.callback(invoke_without_command=True)
def review(
    ctx: typer.Context,
    scope: Annotated[list[str] | None, typer.Option("--scope", "-s", help="Scope (repeatable).")] = None,
    order: Annotated[
        Literal["age", "corroboration"], typer.Option(help="Oldest first, or most corroborated first.")
    ] = "age",
    limit: Annotated[
        int | None, typer.Option(min=1, max=200, help="Proposals a page holds (default 50).")
    ] = None,
    cursor: Annotated[str | None, typer.Option(help="next_cursor of the previous page.")] = None,
    every: Annotated[bool, typer.Option("--all", help="Follow next_cursor to the last page.")] = False,
    as_json: Annotated[
        bool, typer.Option("--json", help="The page as JSON; with --all, one proposal a line.")
    ] = False,
) -> None:
    """The pending proposals: who proposed what, its corroborations, age and conflicting facts
    (RFC 5.7)."""
    if ctx.invoked_subcommand is not None:
        return
    given = {"scopes": scope or None, "order": order, "limit": limit, "cursor": cursor}
    request = {k: v for k, v in given.items() if v is not None}
    with Membrane(Settings()) as m:
        try:
            pages = list(_pages(m, request)) if every else [m.review.queue(request, DEVELOPMENT_POLICY)]
            now = m.clock()
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    entries = [e for page in pages for e in page.entries]
    if as_json:
        if every:
            for e in entries:
                typer.echo(e.model_dump_json())
        else:
            typer.echo(pages[0].model_dump_json(indent=2))
        return
    if not entries:
        console.print("no proposals await a decision", highlight=False)
        return
    console.print(_queue_table(entries, now))
    last = pages[-1].next_cursor
    more = f"; the next page: --cursor {last}" if last else ""
    console.print(f"{len(entries)} proposals{more}", highlight=False, soft_wrap=True)


def _decide(decision: dict[str, Any], *, as_json: bool) -> DecisionResult:
    """Apply one decision; a refused one prints its error and exits 1."""
    with Membrane(Settings()) as m:
        try:
            result = m.review.decide({"decisions": [decision]}, DEVELOPMENT_POLICY).results[0]
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    if as_json:
        typer.echo(result.model_dump_json(indent=2))
    if result.error is not None:
        if not as_json:
            console.print(f"[red]{result.error.code}:[/red] {result.error.message}", highlight=False)
            for d in result.error.details[:20]:
                console.print(f"  {d.get('field')}: {d.get('message')}", highlight=False)
        raise typer.Exit(1)
    if not as_json:
        ids = " ".join(str(r) for r in result.record_ids)
        console.print(
            f"{result.outcome} proposal {result.proposal_id}: {ids}", highlight=False, soft_wrap=True
        )
    return result


@review_app.command("approve")
def approve(
    proposal_id: ProposalId,
    mode: Annotated[
        Literal["replace", "beside"] | None,
        typer.Option(
            help="Beside an active fact of the same subject and predicate: supersede it or keep both."
        ),
    ] = None,
    rationale: Rationale = None,
    as_json: Json = False,
) -> None:
    """Approve a proposal: its records become active (RFC 5.7)."""
    _decide(
        {"proposal_id": proposal_id, "decision": "approve", "mode": mode, "rationale": rationale},
        as_json=as_json,
    )


@review_app.command("reject")
def reject(proposal_id: ProposalId, rationale: Rationale = None, as_json: Json = False) -> None:
    """Reject a proposal: its records are retracted and its fact is never proposed again (RFC 5.7)."""
    _decide({"proposal_id": proposal_id, "decision": "reject", "rationale": rationale}, as_json=as_json)


@review_app.command("amend")
def amend(
    proposal_id: ProposalId,
    subject: Annotated[str | None, typer.Option(help="The fact's subject, when it changes.")] = None,
    predicate: Annotated[str | None, typer.Option(help="The fact's predicate, when it changes.")] = None,
    obj: Annotated[str | None, typer.Option("--object", help="The fact's object, when it changes.")] = None,
    rationale: Rationale = None,
    as_json: Json = False,
) -> None:
    """Amend a proposed fact: the corrected fact becomes active and supersedes it; the proposal's
    other records are approved (RFC 5.7)."""
    record = {
        k: v for k, v in (("subject", subject), ("predicate", predicate), ("object", obj)) if v is not None
    }
    if not record:
        raise typer.BadParameter("give --subject, --predicate or --object", param_hint="--object")
    result = _decide(
        {"proposal_id": proposal_id, "decision": "amend", "record": record, "rationale": rationale},
        as_json=as_json,
    )
    if not as_json and result.record_ids:
        console.print(f"the amended fact: {result.record_ids[-1]}", highlight=False)


def register(app: typer.Typer) -> None:
    """Add ``membrane review`` to ``app``."""
    app.add_typer(review_app, name="review")
