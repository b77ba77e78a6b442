"""The modules of pyskick.ops import each other without a cycle, imports inside functions
included (a twin importing its wrapper, which imports the twin, is a cycle even when lazy)."""

from __future__ import annotations

import ast
from pathlib import Path

import pyskick.ops

PACKAGE = "pyskick.ops"
FOLDER = Path(pyskick.ops.__file__).parent


def module_name(path: Path) -> str:
    return PACKAGE if path.stem == "__init__" else f"{PACKAGE}.{path.stem}"


def imported_modules(source: str, modules: set[str]) -> set[str]:
    """The modules of ``modules`` that ``source`` imports anywhere, in functions too."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            # `from pyskick.ops import _reference` imports the submodule _reference; a name
            # that is no submodule is an attribute of the module it comes from. (A package's
            # own __init__ runs before any of its submodules: that edge is not counted.)
            for alias in node.names:
                submodule = f"{node.module}.{alias.name}"
                found.add(submodule if submodule in modules else node.module)
    return found & modules


def import_graph() -> dict[str, set[str]]:
    paths = sorted(FOLDER.glob("*.py"))
    modules = {module_name(path) for path in paths}
    graph = {
        module_name(p): imported_modules(p.read_text(encoding="utf-8"), modules) for p in paths
    }
    return {name: targets - {name} for name, targets in graph.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """A cycle of ``graph`` as a list of nodes (first == last), or None."""
    state: dict[str, str] = {}  # "open" while on the DFS stack, then "done"
    stack: list[str] = []

    def visit(node: str) -> list[str] | None:
        state[node] = "open"
        stack.append(node)
        for target in sorted(graph.get(node, ())):
            if state.get(target) == "open":
                return [*stack[stack.index(target) :], target]
            if target not in state and (cycle := visit(target)):
                return cycle
        stack.pop()
        state[node] = "done"
        return None

    for node in sorted(graph):
        if node not in state and (cycle := visit(node)):
            return cycle
    return None


def test_the_ops_package_has_no_import_cycle() -> None:
    graph = import_graph()
    assert f"{PACKAGE}._reference" in graph[f"{PACKAGE}.render"]  # the graph sees imports
    cycle = find_cycle(graph)
    assert cycle is None, "import cycle: " + " -> ".join(cycle or [])


def test_a_function_level_import_makes_a_cycle() -> None:
    """The render <-> _reference cycle this test guards against, as it was."""
    render, reference = f"{PACKAGE}.render", f"{PACKAGE}._reference"
    source = "def render_mesh_views():\n    from pyskick.ops.render import DEFAULT_LIGHTS\n"
    graph = import_graph()
    graph[reference] |= imported_modules(source, set(graph))
    assert render in graph[reference]
    cycle = find_cycle(graph)
    assert cycle is not None
    assert {render, reference} <= set(cycle)
