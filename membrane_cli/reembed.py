"""``membrane reembed``: embed again what the configured provider would store differently (RFC 12.5).

The command writes an ``embed`` work item for each record with text whose vector is missing,
was made by another model, lacks the token signs the provider gives, or is stored out of
line though it fits in the row (``--all``: every record with text), then has the embedding
pool embed them in bounded batches (``--inline``: this process does), and reports what is
left. Embedding again writes the row in the current layout (RFC 8.2.3, migration 0014).
"""

from __future__ import annotations

import time
from typing import Annotated

import typer
from pydantic import ValidationError
from rich.console import Console

from membrane_core import Membrane, Settings

console = Console()

#: Seconds between two looks at the progress while waiting.
POLL_SECONDS = 2.0
#: A batch that saw no progress for this long is asked for again.
REPUBLISH_SECONDS = 20.0
#: After this long without progress the command says that no pool may be running.
IDLE_HINT_SECONDS = 60.0


def _summary(progress: dict[str, int]) -> str:
    return (
        f"records without a vector {progress['without_vector']}, vectors of another model "
        f"{progress['other_model']}, without token signs {progress['without_signs']}, "
        f"out of the row {progress['out_of_line']}; "
        f"embed items pending {progress['pending']}, failed {progress['dead']}"
    )


def _publish(settings: Settings, batch: int) -> bool:
    """Ask the embedding pool for a batch now (beat asks on its own schedule too); False when
    the broker is down."""
    from workers.app import make_app  # the CLI reaches the pool through the broker

    try:
        make_app(settings).send_task("membrane.embed_batch", kwargs={"limit": batch}, retry=False)
    except Exception as exc:  # kombu and redis raise many classes for one outage
        console.print(
            f"[yellow]the broker did not take the embed batch ({type(exc).__name__}): {exc}[/yellow]"
        )
        return False
    return True


def _embed_inline(m: Membrane, batch: int, deadline: float) -> None:
    """Run embed batches in this process until nothing due is left (or the deadline)."""
    while time.monotonic() < deadline:
        result = m.embedding.run_batch(batch)
        if not result.get("claimed"):
            return  # what is left is not due yet (a failed item waits for its retry)
        console.print(
            f"  embedded {result.get('embedded', 0)}, without text {result.get('missing', 0)}",
            highlight=False,
        )


def _wait_for_pool(m: Membrane, settings: Settings, batch: int, deadline: float) -> None:
    """Watch the embedding pool work; ask it again when the items stop moving."""
    last, asked, moved, hinted = -1, time.monotonic(), time.monotonic(), False
    while time.monotonic() < deadline:
        pending = m.embedding.progress()["pending"]
        if pending == 0:
            return
        now = time.monotonic()
        if pending != last:
            last, asked, moved = pending, now, now
            console.print(f"  {pending} records left to embed", highlight=False)
        elif now - asked > REPUBLISH_SECONDS:
            _publish(settings, batch)
            asked = now
        if not hinted and now - moved > IDLE_HINT_SECONDS:
            hinted = True
            console.print(
                f"[yellow]no progress for {IDLE_HINT_SECONDS:.0f} s: is an embedding pool running "
                "(membrane run, or the worker-embedding service)? --inline embeds here[/yellow]"
            )
        time.sleep(POLL_SECONDS)


def reembed(
    every: Annotated[
        bool, typer.Option("--all", help="Every record with text, not only those the provider would change.")
    ] = False,
    scope: Annotated[list[str] | None, typer.Option(help="Only this scope (repeatable).")] = None,
    inline: Annotated[
        bool, typer.Option(help="Embed in this process instead of on the embedding pool.")
    ] = False,
    wait: Annotated[bool, typer.Option(help="Wait until no embed item is left.")] = True,
    batch: Annotated[int, typer.Option(min=1, max=10000, help="Records per embed batch.")] = 500,
    timeout: Annotated[float, typer.Option(min=1, help="Longest wait, in seconds.")] = 3600.0,
) -> None:
    """Embed again every record whose vector is missing, of another model, or without the
    token signs the provider gives (--all: every record), in bounded batches (RFC 12.5)."""
    try:
        settings = Settings()
    except ValidationError as exc:
        console.print(f"[red]membrane reembed:[/red] {exc.errors()[0]['msg']}")
        raise typer.Exit(2) from exc
    with Membrane(settings) as m:
        try:
            provider = m.embedding.provider
        except ValueError as exc:
            console.print(f"[red]membrane reembed:[/red] {exc}")
            raise typer.Exit(2) from exc
        if provider is None:
            console.print(
                "[red]membrane reembed:[/red] no embedding provider configured (MEMBRANE_EMBEDDING_PROVIDER)"
            )
            raise typer.Exit(2)
        console.print(f"before: {_summary(m.embedding.progress())}", highlight=False)
        read = 0

        def chunk(n: int, queued: int) -> None:
            nonlocal read
            read += n
            console.print(f"  read {read} records, {queued} to embed in this chunk", highlight=False)

        queued = m.embedding.enqueue_stale(every=every, scopes=scope or None, on_chunk=chunk)
        console.print(f"{queued} records to embed with {provider.name}:{provider.model}", highlight=False)
        deadline = time.monotonic() + timeout
        if inline:
            _embed_inline(m, batch, deadline)
        elif queued and _publish(settings, batch) and wait:
            _wait_for_pool(m, settings, batch, deadline)
        progress = m.embedding.progress()
        console.print(f"after: {_summary(progress)}", highlight=False)
        if (wait or inline) and progress["pending"]:
            console.print(
                "[yellow]not done: embed items are left (run it again, or wait for the pool)[/yellow]"
            )
            raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``membrane reembed`` to ``app``."""
    app.command("reembed")(reembed)
