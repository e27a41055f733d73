"""The Mem0 side of ``membrane import --from mem0`` (RFC 15.3): reading the memories from a
file, a Mem0 configuration (Mem0's Python API) or Mem0's REST server, and the migration's
report as a line of text."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx

from membrane_core import Membrane, Settings, errors
from membrane_core.transfer import mem0 as source
from membrane_core.transfer.mem0_migration import Mem0Report, ReplayClock, ScopeMapping, Target, migrate
from membrane_core.trust import DEVELOPMENT_POLICY

#: the actor of the migration's audit entries
ACTOR = "import:mem0"
INSTALL_HINT = "reading a Mem0 store needs Mem0: pip install 'membrane[mem0]'"


def read(
    file: Path | None, config: Path | None, url: str | None, entities: source.Entities
) -> list[source.Mem0Memory]:
    """The memories of the one source given (``InvalidInput`` for none or several)."""
    given = [
        name for name, value in (("a file", file), ("--mem0-config", config), ("--mem0-url", url)) if value
    ]
    if len(given) != 1:
        raise errors.InvalidInput("name one Mem0 source: a file, --mem0-config or --mem0-url")
    if file is not None:
        return source.read_file(file)
    if config is not None:
        return _from_config(config, entities)
    assert url is not None
    return _from_rest(url, entities)


def run(memories: list[source.Mem0Memory], mapping: ScopeMapping) -> Mem0Report:
    """RFC 15.3: migrate into the configured store, at Mem0's times."""
    trust = DEVELOPMENT_POLICY.model_copy(update={"actor": ACTOR})
    clock = ReplayClock()
    with Membrane(Settings(), clock=clock) as m:
        return migrate(target(m, clock), memories, trust, mapping)


def target(m: Membrane, clock: ReplayClock) -> Target:
    """The services of ``m``, which was built with ``clock``, as a migration writes through them."""
    return Target(m.captures, m.revisions, m.listing, m.db, m.work.sealer, clock)


def _from_config(path: Path, entities: source.Entities) -> list[source.Mem0Memory]:
    """Mem0's Python API on the configuration of ``path`` (the dict ``Memory.from_config``
    takes, as JSON). Reading asks Mem0's LLM and embedder nothing."""
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise errors.InvalidInput(f"cannot read the Mem0 configuration {path}: {exc}") from exc
    # Mem0 reads this once, on import: a migration sends no usage events unless asked to
    os.environ.setdefault("MEM0_TELEMETRY", "False")
    try:
        from mem0 import Memory
    except ImportError as exc:
        raise errors.InvalidInput(INSTALL_HINT) from exc
    memory = Memory.from_config(config)
    try:
        return source.read_memory(memory, entities)
    finally:
        memory.close()
        client = getattr(memory.vector_store, "client", None)
        if client is not None and hasattr(client, "close"):
            client.close()  # a local Qdrant holds its folder until closed


def _from_rest(url: str, entities: source.Entities) -> list[source.Mem0Memory]:
    with httpx.Client(base_url=url, timeout=60) as client:

        def get(path: str, params: Mapping[str, str]) -> Any:
            try:
                return client.get(path, params=dict(params)).raise_for_status().json()
            except (httpx.HTTPError, ValueError) as exc:
                raise errors.InvalidInput(f"Mem0 at {url} answered {path} with: {exc}") from exc

        return source.read_rest(get, entities)
