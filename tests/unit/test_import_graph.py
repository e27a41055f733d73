"""The import graph: no cycles in the core, each outside library in its one layer (RFC 1.2),
and the repository's packages in the layers of the style guide's table (its habit 22).

Every import counts, those under ``TYPE_CHECKING`` and inside functions included: a cycle
hidden from the interpreter is still a cycle a reader has to untangle.
"""

from __future__ import annotations

import ast
import functools
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "membrane_core"
ROOT = CORE.parent

#: Style 22, the layer table: each package of the repository (where its sources live) and the
#: first-party packages it may import. Workers never import ``api``: the listen and TLS guard
#: both entry points share is ``membrane_core.listen``, below both. The API publishes through
#: ``workers.dispatch``; the CLI, on top, starts everything and drives the client (``bench``);
#: the client imports no server package.
LAYERS: dict[str, tuple[Path, frozenset[str]]] = {
    "membrane_core": (CORE, frozenset({"membrane_core"})),
    "beat_schedule": (ROOT / "beat_schedule.py", frozenset({"beat_schedule", "membrane_core"})),
    "workers": (ROOT / "workers", frozenset({"workers", "beat_schedule", "membrane_core"})),
    "api": (ROOT / "api", frozenset({"api", "workers", "membrane_core"})),
    "membrane_cli": (
        ROOT / "membrane_cli",
        frozenset({"membrane_cli", "api", "workers", "beat_schedule", "membrane_core", "membrane_client"}),
    ),
    "membrane_client": (ROOT / "clients" / "python" / "membrane_client", frozenset({"membrane_client"})),
}

#: Style 22: the core's capability packages (a service each, or the provider adapters).
#: Storage imports none of them, save these modules of data types and pure functions.
CAPABILITIES = (
    "capture",
    "inbox",
    "jobs",
    "listing",
    "providers",
    "retrieval",
    "review",
    "revision",
    "transfer",
)
STORAGE_SHARES = frozenset(
    {
        "membrane_core.capture.plan",
        "membrane_core.capture.mentions",
        "membrane_core.providers.base",
        "membrane_core.retrieval.fusion",
    }
)


def _module_name(path: Path) -> str:
    rel = path.relative_to(CORE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@functools.cache  # parsed once for every test of the run
def _modules() -> dict[str, ast.Module]:
    return {
        _module_name(p): ast.parse(p.read_text(encoding="utf-8"), str(p)) for p in sorted(CORE.rglob("*.py"))
    }


def _imports(name: str, tree: ast.Module, is_package: bool) -> set[str]:
    """Every module ``name`` imports, relative imports resolved."""
    out: set[str] = set()
    package = name if is_package else name.rpartition(".")[0]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")
                base = base[: len(base) - node.level + 1]
                mod = ".".join([*base, node.module] if node.module else base)
            else:
                mod = node.module or ""
            out.add(mod)
            # ``from package import module`` imports the module
            out.update(f"{mod}.{alias.name}" for alias in node.names)
    return out


def _ancestors(module: str) -> list[str]:
    parts = module.split(".")
    return [".".join(parts[:i]) for i in range(1, len(parts))]


def _graph() -> dict[str, set[str]]:
    mods = _modules()
    packages = {_module_name(p) for p in CORE.rglob("__init__.py")}
    graph: dict[str, set[str]] = {}
    for name, tree in mods.items():
        deps = _imports(name, tree, name in packages)
        # importing a.b.c runs the package a.b first (the root package, which re-exports the
        # facade for users, is left out: every module's import starts there)
        deps |= {p for d in deps for p in _ancestors(d) if p != "membrane_core"}
        deps = {d for d in deps if d in mods and d != name}
        # importing a.b.c runs a and a.b first; a package's own __init__ is not a cycle
        graph[name] = {d for d in deps if not name.startswith(d + ".")}
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _third_party(prefix: str) -> dict[str, set[str]]:
    """Modules of the core importing ``prefix`` (or a submodule of it)."""
    mods = _modules()
    packages = {_module_name(p) for p in CORE.rglob("__init__.py")}
    out: dict[str, set[str]] = {}
    for name, tree in mods.items():
        hits = {
            d for d in _imports(name, tree, name in packages) if d == prefix or d.startswith(prefix + ".")
        }
        if hits:
            out[name] = hits
    return out


def test_the_graph_is_read_whole() -> None:
    graph = _graph()
    assert "membrane_core.facade" in graph and len(graph) > 40
    # the facade composes the services, so it imports them
    assert "membrane_core.storage.db" in graph["membrane_core.facade"]


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []


def test_no_cycle_inside_the_core() -> None:
    assert _cycles(_graph()) == []


@pytest.mark.parametrize(
    ("library", "home"),
    [
        ("psycopg", "membrane_core.storage"),
        ("httpx", "membrane_core.providers"),
        ("cryptography", "membrane_core.sealing"),
    ],
)
def test_a_library_is_imported_only_in_its_layer(library: str, home: str) -> None:
    users = _third_party(library)
    assert users, f"nothing imports {library}: the check would pass vacuously"
    outside = sorted(m for m in users if m != home and not m.startswith(home + "."))
    assert outside == []


@pytest.mark.parametrize("library", ["celery", "fastapi", "uvicorn", "kombu"])
def test_no_queue_or_web_framework_in_the_core(library: str) -> None:
    assert _third_party(library) == {}


def test_only_the_facade_refers_to_membrane() -> None:
    users = []
    for name, tree in _modules().items():
        names = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
        names |= {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
        if "Membrane" in names:
            users.append(name)
    assert "membrane_core.facade" in users  # positive control: the facade defines and uses it
    assert [u for u in users if u not in ("membrane_core.facade", "membrane_core")] == []


@functools.cache
def _sources(package: str) -> dict[str, set[str]]:
    """What each module of one package of :data:`LAYERS` imports, by dotted module name."""
    where = LAYERS[package][0]
    paths = [where] if where.suffix == ".py" else sorted(where.rglob("*.py"))
    out = {}
    for path in paths:
        parts = [package, *path.relative_to(where).with_suffix("").parts] if where.is_dir() else [package]
        if parts[-1] == "__init__":
            parts.pop()
        name = ".".join(parts)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        out[name] = _imports(name, tree, path.name == "__init__.py")
    return out


def _layer_breaches(package: str, modules: dict[str, set[str]]) -> list[tuple[str, str]]:
    """``(module, import)`` pairs of ``package`` that reach a first-party package it may not."""
    allowed = LAYERS[package][1]
    return sorted(
        (name, dep)
        for name, deps in modules.items()
        for dep in deps
        if dep.split(".")[0] in LAYERS and dep.split(".")[0] not in allowed
    )


@pytest.mark.parametrize("package", sorted(LAYERS))
def test_each_package_imports_only_the_layers_below_it(package: str) -> None:
    modules = _sources(package)
    assert modules, f"no sources for {package}: the check would pass vacuously"
    assert _layer_breaches(package, modules) == []


def test_the_layer_check_reads_imports_and_catches_a_breach() -> None:
    # the edges the table allows are found where they exist ...
    edges = {
        package: {dep.split(".")[0] for deps in _sources(package).values() for dep in deps}
        for package in ("api", "workers", "membrane_cli")
    }
    assert {"workers", "membrane_core"} <= edges["api"] and "membrane_core" in edges["workers"]
    assert {"api", "workers"} <= edges["membrane_cli"]
    # ... and one it forbids is reported, inside a function too
    late = _imports("workers.x", ast.parse("def f():\n    from api import auth\n"), False)
    assert _layer_breaches("workers", {"workers.x": late}) == [
        ("workers.x", "api"),
        ("workers.x", "api.auth"),
    ]
    assert _layer_breaches("membrane_client", {"membrane_client.x": {"membrane_core"}}) != []


def test_the_shared_listen_guard_lives_below_both_entry_points() -> None:
    users = {
        package
        for package in ("api", "workers", "membrane_cli")
        if any("membrane_core.listen" in deps for deps in _sources(package).values())
    }
    assert {"api", "workers"} <= users
    # and it needs nothing of the core but its errors (no settings, no storage)
    assert _graph()["membrane_core.listen"] == {"membrane_core.errors"}


def test_storage_imports_no_capability_package() -> None:
    graph = _graph()
    storage = {n for n in graph if n == "membrane_core.storage" or n.startswith("membrane_core.storage.")}
    assert len(storage) > 10  # positive control: the storage modules are in the graph
    capability = tuple(f"membrane_core.{c}" for c in CAPABILITIES)
    shared = STORAGE_SHARES | {m.rpartition(".")[0] for m in STORAGE_SHARES}  # running a share's package
    reached = {
        (name, dep)
        for name in storage
        for dep in graph[name]
        if (dep in capability or dep.startswith(tuple(c + "." for c in capability)))
    }
    assert {dep for _, dep in reached} <= shared, sorted(p for p in reached if p[1] not in shared)
    assert ("membrane_core.storage.records", "membrane_core.capture.plan") in reached  # the check sees them
