"""``membrane rotate-encryption-key``: seal every record under the current key (RFC 7.6, 14.1).

The command writes a ``seal`` work item for each record still to seal (sealed under another
key, or plain at or above ``MEMBRANE_ENCRYPT_AT_OR_ABOVE``), then has the maintenance pool
seal them in bounded batches (``--inline``: this process does), and reports when no record
needs a key other than the current one.
"""

from __future__ import annotations

import time
from typing import Annotated, Any

import typer
from pydantic import ValidationError
from rich.console import Console

from membrane_core import Membrane, Settings
from membrane_core.enums import Job

console = Console()

#: Seconds between two looks at the progress while waiting.
POLL_SECONDS = 2.0
#: A drain lasts at most 20 s (RFC 6.5): one more is asked for after this long.
REPUBLISH_SECONDS = 20.0


def _summary(m: Membrane, progress: dict[str, Any]) -> str:
    current = m.sealing.sealer.current_key
    keys = ", ".join(f"{k}: {n}" for k, n in sorted(progress["by_key"].items())) or "none"
    return (
        f"sealed records by key ({keys}); plain at {m.sealing.sealer.at_or_above.value} or above: "
        f"{progress['plain']}; seal items pending {progress['pending']}, failed {progress['dead']}; "
        f"current key {current}"
    )


def _publish(settings: Settings, batch: int) -> bool:
    """Ask the maintenance pool for a drain of the seal job; False when the broker is down."""
    from workers.app import make_app  # the CLI reaches the pool through the broker

    try:
        make_app(settings).send_task(
            "membrane.maintenance_job", kwargs={"job": Job.SEAL.value, "limit": batch}, retry=False
        )
    except Exception as exc:  # kombu and redis raise many classes for one outage
        console.print(f"[yellow]the broker did not take the seal job ({type(exc).__name__}): {exc}[/yellow]")
        return False
    return True


def _seal_inline(m: Membrane, batch: int, deadline: float) -> None:
    """Drain the seal job in this process until nothing due is left (or the deadline)."""
    while m.sealing.progress()["pending"] and time.monotonic() < deadline:
        result = m.maintenance.drain(Job.SEAL, limit=batch)
        console.print(
            f"  sealed {result.get('sealed', 0)}, re-encrypted {result.get('resealed', 0)}, "
            f"failed {result.get('failed', 0)}",
            highlight=False,
        )
        if not result.get("claimed"):
            return  # what is left is not due yet (a failed item waits for its retry)


def _wait_for_pool(m: Membrane, settings: Settings, batch: int, deadline: float) -> None:
    """Watch the maintenance pool seal; ask it again when a drain ended with items left."""
    last, asked = -1, time.monotonic()
    while time.monotonic() < deadline:
        pending = m.sealing.progress()["pending"]
        if pending == 0:
            return
        if pending != last:
            last, asked = pending, time.monotonic()
            console.print(f"  {pending} records left to seal", highlight=False)
        elif time.monotonic() - asked > REPUBLISH_SECONDS:
            _publish(settings, batch)
            asked = time.monotonic()
        time.sleep(POLL_SECONDS)


def _settings() -> Settings:
    try:
        settings = Settings()
    except ValidationError as exc:
        console.print(f"[red]membrane rotate-encryption-key:[/red] {exc.errors()[0]['msg']}")
        raise typer.Exit(2) from exc
    if settings.encryption_ring() is None:
        console.print("[red]membrane rotate-encryption-key:[/red] no MEMBRANE_ENCRYPTION_KEYS configured")
        raise typer.Exit(2)
    return settings


def rotate_encryption_key(
    inline: Annotated[
        bool, typer.Option(help="Seal in this process instead of on the maintenance pool.")
    ] = False,
    wait: Annotated[
        bool, typer.Option(help="Wait until every record is sealed under the current key.")
    ] = True,
    batch: Annotated[int, typer.Option(min=1, max=10000, help="Records per seal batch.")] = 200,
    timeout: Annotated[float, typer.Option(min=1, help="Longest wait, in seconds.")] = 3600.0,
) -> None:
    """Seal every record under the current encryption key, and every plain one at or above the
    sealed level, in bounded batches while traffic goes on (RFC 7.6)."""
    settings = _settings()
    with Membrane(settings) as m:
        current = m.sealing.sealer.current_key
        console.print(f"before: {_summary(m, m.sealing.progress())}")
        read = 0

        def chunk(n: int, queued: int) -> None:
            nonlocal read
            read += n
            console.print(f"  read {read} records, {queued} to seal in this chunk", highlight=False)

        queued = m.sealing.enqueue(on_chunk=chunk)
        console.print(f"{queued} records to seal under key {current}")
        deadline = time.monotonic() + timeout
        if inline:
            _seal_inline(m, batch, deadline)
        elif queued and _publish(settings, batch) and wait:
            _wait_for_pool(m, settings, batch, deadline)
        progress = m.sealing.progress()
        console.print(f"after: {_summary(m, progress)}")
        if m.sealing.done(progress):
            others = [k for k in settings_keys(settings) if k != current]
            tail = f"; {', '.join(others)} may leave the key ring" if others else ""
            console.print(f"[green]every record is sealed under {current}{tail}[/green]")
            return
        if wait or inline:
            console.print("[yellow]not done: keep every key of the ring until it is (run it again)[/yellow]")
            raise typer.Exit(1)


def settings_keys(settings: Settings) -> list[str]:
    """The key ids of the configured ring."""
    ring = settings.encryption_ring()
    return sorted(ring.keys) if ring else []


def register(app: typer.Typer) -> None:
    """Add ``membrane rotate-encryption-key`` to ``app``."""
    app.command("rotate-encryption-key")(rotate_encryption_key)
