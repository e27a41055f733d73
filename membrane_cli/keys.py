"""``membrane keys``: the configured API keys by id, never a key (RFC 10.3, 10.6, 14.1)."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.table import Table

from api.auth import key_from_config
from api.keyfile import configured_keys, default_limits, keys_file
from membrane_core import Settings, errors

console = Console()


def describe(settings: Settings, now: datetime | None = None) -> list[dict[str, Any]]:
    """RFC 10.3: each configured key as the API reads it: id, fingerprint, policy, limits, expiry.

    Raises ``InvalidInput`` as the API's start would (both variables set, a broken file).
    """
    when = now or datetime.now(UTC)
    rows = []
    for key, config in configured_keys(settings).items():
        entry = key_from_config(key, config, default_limits(settings))
        p = entry.policy
        rows.append(
            {
                "id": p.actor,
                "fingerprint": entry.fingerprint,
                "read_scopes": sorted(p.read_scopes),
                "write_scopes": sorted(p.write_scopes),
                "max_sensitivity": p.max_sensitivity.value,
                "operator": p.operator,
                "requests_per_second": entry.limits.requests_per_second,
                "captures_per_second": entry.limits.captures_per_second,
                "burst": entry.limits.burst,
                "not_after": entry.not_after.isoformat() if entry.not_after else None,
                "expired": entry.expired(when),
            }
        )
    return sorted(rows, key=lambda r: (r["id"], r["fingerprint"]))


def _table(rows: list[dict[str, Any]]) -> Table:
    t = Table(title="API keys (RFC 10.3)", show_lines=True)
    t.add_column("id", no_wrap=True)
    t.add_column("policy")
    t.add_column("rate limits")
    t.add_column("not after")
    for r in rows:
        # a configured actor hides which key it is: the fingerprint tells rotated keys apart
        name = r["id"] if r["id"] == f"key:{r['fingerprint']}" else f"{r['id']}\n({r['fingerprint']})"
        policy = (
            f"read: {', '.join(r['read_scopes']) or '-'}\nwrite: {', '.join(r['write_scopes']) or '-'}"
            f"\nmax: {r['max_sensitivity']}" + ("\noperator" if r["operator"] else "")
        )
        limits = (
            f"{r['requests_per_second']:g} requests/s\n{r['captures_per_second']:g} captures/s"
            f"\nburst {r['burst']:g} s"
        )
        expiry = r["not_after"] or "-"
        t.add_row(name, policy, limits, f"{expiry}\nexpired" if r["expired"] else expiry)
    return t


def keys(
    as_json: Annotated[bool, typer.Option("--json", help="one JSON array instead of a table")] = False,
) -> None:
    """List the configured API keys by id and policy, never a key (RFC 10.3)."""
    settings = Settings()
    try:
        rows = describe(settings)
    except errors.MembraneError as exc:
        console.print(f"[red]membrane keys:[/red] {exc.message}")
        raise typer.Exit(2) from exc
    if as_json:
        typer.echo(json.dumps(rows, indent=2))
        return
    path = keys_file(settings)
    source = f"MEMBRANE_API_KEYS_FILE={path}" if path else "MEMBRANE_API_KEYS"
    if not rows:
        console.print(f"no API keys in {source}: the development policy, loopback only (RFC 7.5)")
        return
    console.print(f"{len(rows)} key(s) from {source}")
    console.print(_table(rows))


def register(app: typer.Typer) -> None:
    """Add ``membrane keys`` to ``app``."""
    app.command("keys")(keys)
