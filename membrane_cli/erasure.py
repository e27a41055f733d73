"""``membrane erase``: forget a scope, an entity and what names it, or records (RFC 15.4).

It works on the configured store in-process under the development policy (RFC 7.5), which
may erase: whoever holds the database credentials erases. It always runs the dry run first
and prints what would go, by table; it erases only after a yes (``--yes`` answers it).
"""

from __future__ import annotations

import uuid
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from membrane_core import Membrane, Settings, errors
from membrane_core.transfer.erasure import ErasureResult
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()


def _counts(result: ErasureResult) -> Table:
    t = Table(title_justify="left")
    t.add_column("table")
    t.add_column("rows", justify="right")
    for name, n in result.counts.items():
        t.add_row(name, str(n))
    return t


def erase(
    reason: Annotated[str, typer.Option(help="Why: kept with the erasure (never the content).")],
    scope: Annotated[str | None, typer.Option(help="Erase every record of this scope.")] = None,
    entity: Annotated[
        str | None, typer.Option(help="Erase this entity and every record that names it.")
    ] = None,
    record: Annotated[list[str] | None, typer.Option(help="Erase this record; repeat for several.")] = None,
    yes: Annotated[bool, typer.Option("--yes", help="Erase without asking, after the dry run.")] = False,
) -> None:
    """RFC 15.4: remove a target's content from every table; a dry run first, then a yes."""
    request: dict[str, Any] = {"reason": reason}
    try:
        if scope is not None:
            request["scope"] = scope
        if entity is not None:
            request["entity"] = uuid.UUID(entity)
        if record:
            request["records"] = [uuid.UUID(r) for r in record]
    except ValueError as exc:
        console.print(f"[red]invalid_input:[/red] not a record id: {exc}", highlight=False)
        raise typer.Exit(1) from exc
    with Membrane(Settings()) as m:
        try:
            dry = m.erasure.erase(request, DEVELOPMENT_POLICY)
            console.print(_counts(dry))
            if dry.outside_scopes:
                console.print(f"{dry.outside_scopes} connected records in other scopes stay")
            if not yes and not typer.confirm("Erase these rows? This cannot be undone", default=False):
                console.print("nothing erased")
                raise typer.Exit(1)
            done = m.erasure.erase({**request, "dry_run": False, "confirm": dry.confirm}, DEVELOPMENT_POLICY)
        except errors.MembraneError as exc:
            console.print(f"[red]{exc.code}:[/red] {exc.message}", highlight=False, soft_wrap=True)
            raise typer.Exit(1) from exc
    console.print(
        f"erased {done.counts['memory_records']} records (erasure {done.erasure_id}); the write-ahead log, "
        "replicas until they replay and backups still hold what they held (rfc.md 15.4)",
        highlight=False,
        soft_wrap=True,
    )


def register(app: typer.Typer) -> None:
    """Add ``membrane erase`` to ``app``."""
    app.command("erase")(erase)
