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

from membrane_core import Membrane, Settings, errors
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
) -> None:
    """RFC 15.1: write records with their history, corrections and audit as NDJSON files and a
    manifest; an export stopped part-way resumes when run again with the same target."""
    request = {
        "scopes": scope,
        "types": type,
        "created_after": _aware(created_after),
        "created_before": _aware(created_before),
        "with_vectors": with_vectors,
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


def import_(
    source: Annotated[Path, typer.Argument(help="A bundle: a folder or a .tar.")],
    on_conflict: Annotated[Conflict, typer.Option(help="For record ids the store holds.")] = Conflict.skip,
) -> None:
    """RFC 15.2: import a bundle, checked whole before anything is written."""
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
