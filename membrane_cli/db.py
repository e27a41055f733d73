"""``membrane db status|stop|start``: the embedded Postgres of ``MEMBRANE_DATA_DIR`` (RFC 11.2, 14.1).

The embedded server outlives the processes that use it, so these commands look at it,
stop it and start it on their own. Each reads the data folder from :class:`Settings`,
as the library does; ``status`` starts nothing.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from membrane_cli.stack import pid_alive
from membrane_core import Settings
from membrane_core.storage import embedded

console = Console()
#: Notes go to stderr, so that ``status --json`` prints only the JSON.
notes = Console(stderr=True)


def _data_dir() -> Path:
    """The data folder, and a note when the library would use a configured server instead."""
    settings = Settings()
    if settings.database_dsn():
        notes.print(
            "[yellow]note:[/yellow] MEMBRANE_DATABASE_URL is set, so the library uses that server; "
            "this is the embedded one of MEMBRANE_DATA_DIR"
        )
    return settings.data_dir


def _size(n: int) -> str:
    value, unit = float(n), "B"
    for bigger in ("kB", "MB", "GB"):
        if value < 1024:
            break
        value, unit = value / 1024, bigger
    return f"{n} B" if unit == "B" else f"{value:.1f} {unit}"


def _as_json(st: embedded.ServerStatus) -> dict[str, Any]:
    pm = st.postmaster
    return {
        "data_dir": str(st.pgdata),
        "running": st.running,
        "pid": pm.pid if pm else None,
        "socket_dir": str(pm.socket_dir) if pm and pm.socket_dir else None,
        "port": pm.port if pm else None,
        "started_at": st.started_at.isoformat() if st.started_at else None,
        "uptime_seconds": round(st.uptime.total_seconds(), 3) if st.uptime is not None else None,
        "databases": {name: size for name, size in st.databases},
        "error": st.error,
    }


def print_status(st: embedded.ServerStatus) -> None:
    """The table of ``membrane db status``."""
    pm = st.postmaster
    t = Table(show_header=False, box=None, pad_edge=False)
    t.add_row("Data folder", str(st.pgdata))
    if pm is not None:
        t.add_row("Socket", f"{pm.socket_dir}   (port {pm.port})")
    if st.running:
        assert pm is not None and st.uptime is not None and st.started_at is not None
        t.add_row("Status", f"[green]running[/green], pid {pm.pid}")
        t.add_row("Started", f"{st.started_at.isoformat(timespec='seconds')}   (up {_uptime(st)})")
        total = sum(size for _, size in st.databases)
        sizes = ", ".join(f"{name} {_size(size)}" for name, size in st.databases)
        t.add_row("Databases", f"{_size(total)}   ({escape(sizes)})")
    elif pm is not None and not pid_alive(pm.pid):
        t.add_row("Status", f"[red]not running[/red]: {_stale(pm)}")
    elif pm is not None:
        why = escape(st.error or "no answer")
        t.add_row("Status", f"[red]not answering[/red]: pid {pm.pid}, {why}")
    else:
        t.add_row("Status", "[red]not running[/red]   (membrane db start starts it)")
    console.print(t)


def _stale(pm: embedded.Postmaster) -> str:
    return f"postmaster.pid names pid {pm.pid}, which is gone (a crash); membrane db start recovers it"


def _uptime(st: embedded.ServerStatus) -> str:
    assert st.uptime is not None
    return str(st.uptime).split(".")[0]  # whole seconds


def status(
    as_json: Annotated[bool, typer.Option("--json", help="Print the status as JSON.")] = False,
) -> None:
    """Show the embedded Postgres (folder, socket, pid, sizes, uptime); exit 1 unless it runs (RFC 11.2)."""
    st = embedded.status(_data_dir())
    if as_json:
        console.print_json(json.dumps(_as_json(st)))
    else:
        print_status(st)
    if not st.running:
        raise typer.Exit(1)


def stop() -> None:
    """Stop the embedded Postgres (pg_ctl stop -m fast); nothing to do if it does not run (RFC 11.2)."""
    data_dir = _data_dir()
    pm = embedded.postmaster(data_dir)
    if pm is not None and not pid_alive(pm.pid):  # pg_ctl stop would fail to signal it
        console.print(f"the embedded Postgres of {data_dir / 'pg'} does not run: {_stale(pm)}")
        return
    try:
        stopped = embedded.stop(data_dir)
    except subprocess.SubprocessError as exc:
        console.print(f"[red]pg_ctl stop failed:[/red] {escape(str(exc))}")
        console.print(f"its log: {data_dir / 'pg' / 'log'}")
        raise typer.Exit(1) from exc
    if stopped:
        console.print(f"stopped the embedded Postgres{f' (pid {pm.pid})' if pm else ''} of {data_dir / 'pg'}")
    else:
        console.print(f"the embedded Postgres of {data_dir / 'pg'} does not run")


def start() -> None:
    """Start the embedded Postgres (its first start creates the data folder) and show it (RFC 11.2)."""
    data_dir = _data_dir()
    try:
        embedded.start(data_dir)
    except (subprocess.SubprocessError, OSError, RuntimeError) as exc:
        console.print(f"[red]cannot start the embedded Postgres:[/red] {escape(str(exc))}")
        console.print(f"its log: {data_dir / 'pg' / 'log'}")
        raise typer.Exit(1) from exc
    st = embedded.status(data_dir)
    print_status(st)
    if not st.running:
        raise typer.Exit(1)


def register(app: typer.Typer) -> None:
    """Add ``status``, ``stop`` and ``start`` to the ``membrane db`` group (RFC 14.1)."""
    app.command("status")(status)
    app.command("stop")(stop)
    app.command("start")(start)
