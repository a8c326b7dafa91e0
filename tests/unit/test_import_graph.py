"""runner's imports form no cycle: every `import runner...` and `from runner... import ...` of every module, at
the top, under `if TYPE_CHECKING:` and inside functions alike (a lazy import is still a dependency).

A package's `__init__` re-exporting its modules is not counted as their importer's dependency on it: an edge goes
to the module named (`from runner.report import formatting` is an edge to runner.report.formatting)."""

from __future__ import annotations

import ast
from pathlib import Path

from runner.paths import PROJECT_ROOT

RUNNER = PROJECT_ROOT / "runner"


def import_graph(root: Path = RUNNER) -> dict[str, set[str]]:
    """Each module of the package at `root` -> the modules of the same package it imports."""
    modules: dict[str, Path] = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root.parent).with_suffix("").parts
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph: dict[str, set[str]] = {}
    for name, path in modules.items():
        imported: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                imported |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    imported.add(submodule if submodule in modules else node.module)
        graph[name] = {m for m in imported if m in modules and m != name}
    return graph


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for other in sorted(graph[node]):
            if other not in index:
                visit(other)
                low[node] = min(low[node], low[other])
            elif other in stack:
                low[node] = min(low[node], index[other])
        if low[node] == index[node]:
            component = []
            while True:
                member = stack.pop()
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_runner_imports_form_no_cycle():
    graph = import_graph()
    assert len(graph) > 50 and graph["runner.sweep"], "the walk found runner's modules and their imports"
    assert not cycles(graph), cycles(graph)


def test_the_walk_finds_a_cycle_through_a_type_checking_import(tmp_path):
    package = tmp_path / "runner"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text("from runner.b import B\n")
    (package / "b.py").write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from runner.c import C\nB = 1\n"
    )
    (package / "c.py").write_text("def f():\n    import runner.a\n")
    (package / "d.py").write_text("from runner import a\n")
    assert cycles(import_graph(package)) == [["runner.a", "runner.b", "runner.c"]]
