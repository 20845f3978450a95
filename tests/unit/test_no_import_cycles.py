"""No two modules of rebench_tui import each other, directly or round a longer circle.

The graph is read from the source (every import statement: at the top, inside functions, under
``TYPE_CHECKING``), so an import hidden in a function to dodge a circle still counts. ``from X
import name`` is an arrow to ``X.name`` where that is a module, else to ``X``. Importing a
submodule runs its package's ``__init__`` first, but that is not an arrow: a package whose
``__init__`` re-exports its own modules is not a circle (one of its modules importing the
package back is).
"""

from __future__ import annotations

import ast
from pathlib import Path

import rebench_tui

PKG = Path(rebench_tui.__file__).parent


def module_name(root: Path, path: Path) -> str:
    parts = (root.name,) + path.relative_to(root).with_suffix("").parts
    return ".".join(parts).removesuffix(".__init__")


def _target(importer: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = importer if is_package else importer.rpartition(".")[0]
    for _ in range(node.level - 1):
        base = base.rpartition(".")[0]
    return ".".join(p for p in (base, node.module) if p)


def _arrows(name: str, path: Path, modules: set[str]) -> set[str]:
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name in modules}
        elif isinstance(node, ast.ImportFrom):
            target = _target(name, path.name == "__init__.py", node)
            for a in node.names:
                if f"{target}.{a.name}" in modules:
                    out.add(f"{target}.{a.name}")
                elif target in modules:
                    out.add(target)
    out.discard(name)
    return out


def import_graph(root: Path) -> dict[str, set[str]]:
    """Module -> the modules of the same package it imports."""
    paths = {module_name(root, p): p for p in sorted(root.rglob("*.py")) if "__pycache__" not in p.parts}
    return {name: _arrows(name, path, set(paths)) for name, path in paths.items()}


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One circle for each set of modules that reach each other (a strongly connected component),
    as a path that starts and ends at its first module."""
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
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(_circle(graph, component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def _circle(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """A shortest way from the component's first module back to itself, inside the component."""
    start = min(component)
    paths = {start: [start]}
    queue = [start]
    while queue:
        v = queue.pop(0)
        for w in sorted(graph[v] & component):
            if w == start:
                return paths[v] + [start]
            if w not in paths:
                paths[w] = paths[v] + [w]
                queue.append(w)
    raise AssertionError(f"no way back to {start} in {sorted(component)}")


def test_the_package_has_no_import_cycle():
    graph = import_graph(PKG)
    assert len(graph) > 50, sorted(graph)
    found = cycles(graph)
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_a_cycle_through_a_function_level_or_type_checking_import_is_found(tmp_path):
    """The check on a small package of its own: a circle made by an import inside a function, one
    under TYPE_CHECKING, and a package's __init__ that re-exports its modules (not a circle)."""
    pkg = tmp_path / "demo"
    (pkg / "sub").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    (pkg / "c.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .sub.d import D\n")
    (pkg / "sub" / "__init__.py").write_text("from .d import D\n")
    (pkg / "sub" / "d.py").write_text("import demo.c\n")
    (pkg / "e.py").write_text("from .sub import D\n")
    graph = import_graph(pkg)
    assert graph["demo.a"] == {"demo.b"} and graph["demo.e"] == {"demo.sub"}
    assert cycles(graph) == [["demo.a", "demo.b", "demo.a"], ["demo.c", "demo.sub.d", "demo.c"]]
