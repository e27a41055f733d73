"""``membrane export`` and ``membrane import``: a store's memories out as a bundle and back in
(RFC 15.1, 15.2).

Like ``membrane records``, they work on the configured store in-process under the development
policy (RFC 7.5), an operator's: whoever holds the database credentials exports every scope
and imports. A refusal prints its code and message and exits with status 1.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime
from enum import StrEnum
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TaskID, TextColumn, TimeElapsedColumn

from membrane_cli import from_mem0
from membrane_core import Membrane, Settings, errors
from membrane_core.transfer.mem0 import Entities
from membrane_core.transfer.mem0_migration import ScopeMapping
from membrane_core.trust import DEVELOPMENT_POLICY

console = Console()


class Conflict(StrEnum):
    """RFC 15.2: what an import does with a record id the store holds."""

    skip = "skip"
    overwrite = "overwrite"
    fail = "fail"


def _fail(exc: errors.MembraneError) -> typer.Exit:
    console.print(f"[red]{exc.code}:[/red] {exc.message}", highlight=False, soft_wrap=True)
    return typer.Exit(1)


def export(
    target: Annotated[
        Path, typer.Argument(help="A folder (new, empty, or a stopped export's), or a .tar file.")
    ],
    scope: Annotated[
        list[str] | None, typer.Option(help="A scope to export; repeat for several (default: all).")
    ] = None,
    type: Annotated[
        list[str] | None, typer.Option(help="A record type; repeat for several (default: all).")
    ] = None,
    created_after: Annotated[
        datetime | None, typer.Option(help="Records created at or after (ISO 8601, UTC if no zone).")
    ] = None,
    created_before: Annotated[
        datetime | None, typer.Option(help="Records created before (ISO 8601).")
    ] = None,
    with_vectors: Annotated[
        bool, typer.Option("--with-vectors", help="Write the embeddings, naming their model.")
    ] = False,
    open_sealed: Annotated[
        bool, typer.Option("--open-sealed", help="Write sealed records as plain ones (needs the keys).")
    ] = False,
) -> None:
    """RFC 15.1: write records with their history, corrections and audit as NDJSON files and a
    manifest; an export stopped part-way resumes when run again with the same target."""
    request = {
        "scopes": scope,
        "types": type,
        "created_after": _aware(created_after),
        "created_before": _aware(created_before),
        "with_vectors": with_vectors,
        "open_sealed": open_sealed,
    }
    tar = target.suffix == ".tar"
    with Membrane(Settings()) as m, _progress("exporting records") as (progress, task):
        try:
            manifest = m.transfer.export(
                {k: v for k, v in request.items() if v is not None},
                DEVELOPMENT_POLICY,
                target,
                tar=tar,
                progress=lambda done, total: progress.update(task, completed=done, total=total),
            )
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    counts = ", ".join(f"{n} {kind}" for kind, n in manifest.counts.items())
    console.print(f"wrote {target}: {counts or 'nothing'}", highlight=False, soft_wrap=True)
    if manifest.withheld:
        console.print(f"{manifest.withheld} records above the exporter's sensitivity were left out")


class Origin(StrEnum):
    """What ``membrane import`` reads: a Membrane bundle (RFC 15.2) or a Mem0 store (RFC 15.3)."""

    membrane = "membrane"
    mem0 = "mem0"


def import_(
    source: Annotated[
        Path | None,
        typer.Argument(help="A bundle (a folder or a .tar); with --from mem0, a Mem0 JSON file."),
    ] = None,
    on_conflict: Annotated[Conflict, typer.Option(help="For record ids the store holds.")] = Conflict.skip,
    origin: Annotated[Origin, typer.Option("--from", help="What the source is.")] = Origin.membrane,
    mem0_config: Annotated[
        Path | None, typer.Option(help="Mem0: a JSON file of Memory.from_config's configuration.")
    ] = None,
    mem0_url: Annotated[str | None, typer.Option(help="Mem0: the address of its REST server.")] = None,
    user: Annotated[list[str] | None, typer.Option(help="Mem0: a user id to read; repeat.")] = None,
    agent: Annotated[list[str] | None, typer.Option(help="Mem0: an agent id to read; repeat.")] = None,
    run: Annotated[list[str] | None, typer.Option(help="Mem0: a run id to read; repeat.")] = None,
    scope: Annotated[
        str | None, typer.Option(help="Mem0: one scope for every memory (default: user:<id>, ...).")
    ] = None,
    unowned_scope: Annotated[
        str | None, typer.Option(help="Mem0: the scope of deleted memories whose owner Mem0 forgot.")
    ] = None,
) -> None:
    """RFC 15.2: import a bundle, checked whole before anything is written. With --from mem0
    (RFC 15.3): replay a Mem0 store's memories and their history at Mem0's times."""
    if origin is Origin.mem0:
        entities = Entities(users=tuple(user or ()), agents=tuple(agent or ()), runs=tuple(run or ()))
        mapping = ScopeMapping(scope=scope, unowned=unowned_scope)
        try:
            mem0_report = from_mem0.run(from_mem0.read(source, mem0_config, mem0_url, entities), mapping)
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
        console.print(mem0_report.summary(), highlight=False, soft_wrap=True)
        for memory_id, reason in mem0_report.failed.items():
            console.print(f"[red]{memory_id}:[/red] {reason}", highlight=False, soft_wrap=True)
        return
    if any((mem0_config, mem0_url, user, agent, run, scope, unowned_scope)):
        raise _fail(errors.InvalidInput("the Mem0 options go with --from mem0"))
    if source is None:
        raise _fail(errors.InvalidInput("name the bundle to import"))
    with Membrane(Settings()) as m:
        try:
            report = m.transfer.import_bundle(source, DEVELOPMENT_POLICY, on_conflict=on_conflict.value)
        except errors.MembraneError as exc:
            raise _fail(exc) from exc
    console.print(
        f"{report.records_written} records written, {report.records_overwritten} overwritten, "
        f"{report.records_skipped} skipped; {report.audit_appended} audit entries appended; "
        f"{report.relations_dangling} relations to records not here left out; "
        f"{report.embeddings_queued} embeddings queued",
        highlight=False,
        soft_wrap=True,
    )


def _aware(value: datetime | None) -> datetime | None:
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


@contextlib.contextmanager
def _progress(label: str) -> Iterator[tuple[Progress, TaskID]]:
    """A progress bar over records, as ``membrane bench`` draws its own."""
    columns = (TextColumn("{task.description:<20}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console) as bar:
        yield bar, bar.add_task(label, total=None)


def register(app: typer.Typer) -> None:
    """Add ``membrane export`` and ``membrane import`` to ``app``."""
    app.command("export")(export)
    app.command("import")(import_)
