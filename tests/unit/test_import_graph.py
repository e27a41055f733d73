"""The core's import graph: no cycles, and each outside library in its one layer (RFC 1.2).

Every import counts, those under ``TYPE_CHECKING`` and inside functions included: a cycle
hidden from the interpreter is still a cycle a reader has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

CORE = Path(__file__).resolve().parents[2] / "membrane_core"


def _module_name(path: Path) -> str:
    rel = path.relative_to(CORE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


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
