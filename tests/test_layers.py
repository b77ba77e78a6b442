"""Imports point down: no import cycle, between modules or packages, and no package importing a
higher layer (docs/architecture.md).

Every module of ``pyskick/``, ``cli/pyskick_cli/`` and ``plugins/*/src/*`` is parsed with
:mod:`ast` (nothing is imported). Every import counts, those inside functions included,
except those under ``if TYPE_CHECKING:``, which never run (the ``else`` branch of such an
``if`` does count). ``from package import name`` is an import of the submodule
``package.name`` when there is one, else of ``package``; an import of a submodule does not
count as an import of its parent packages' ``__init__`` (which Python runs first).

A *package* is ``pyskick.X`` (a subpackage, or a top-level module such as
``pyskick.run_dir``), ``pyskick`` itself (its ``__init__``), or a top-level package of the
command line or of a plugin distribution.
"""

from __future__ import annotations

import ast
import itertools
import textwrap
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]

PLUGIN_PACKAGES = tuple(
    sorted(init.parent.name for init in ROOT.glob("plugins/*/src/*/__init__.py"))
)
"""The packages of the plugin distributions under ``plugins/``: applications, like the CLI."""

LAYERS: tuple[tuple[str, tuple[str, ...]], ...] = (
    (
        "foundation",
        (
            "pyskick",
            "pyskick._io",
            "pyskick.errors",
            "pyskick.progress",
            "pyskick.metrics",
            "pyskick.methods",
            "pyskick.files",
            "pyskick.distributed",
            "pyskick.timing",
            "pyskick.hookspecs",
            "pyskick.options",
            "pyskick.registry",
            "pyskick.plugins",
            "pyskick.overrides",
            "pyskick.memory",
        ),
    ),
    ("kernels and networks", ("pyskick.ops", "pyskick.kernel_bench", "pyskick.models")),
    ("data", ("pyskick.data",)),
    ("environment", ("pyskick.envs",)),
    ("runs", ("pyskick.config", "pyskick.checkpoint", "pyskick.run_dir")),
    ("actors", ("pyskick.actors",)),
    ("evaluation", ("pyskick.evaluation",)),
    ("sidekicks", ("pyskick.sidekicks",)),
    ("training", ("pyskick.training",)),
    ("figures and built-in plugins", ("pyskick.viz", "pyskick.builtins")),
    ("experiments", ("pyskick.experiments",)),
    ("applications", ("pyskick_cli", "pyskick.__main__", "pyskick.testing", *PLUGIN_PACKAGES)),
)
"""The layers, bottom first: a package may import its own layer's packages and lower ones."""

KNOWN_CYCLES: tuple[frozenset[str], ...] = ()
"""Module cycles that exist today and are being removed elsewhere; nothing else may cycle."""


# -- the checker ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Import:
    """One import of one of our modules by another."""

    source: str
    target: str
    path: Path
    line: int

    def where(self, root: Path) -> str:
        path = self.path.relative_to(root) if self.path.is_relative_to(root) else self.path
        return f"{path}:{self.line}"


def source_roots(root: Path) -> list[Path]:
    """The folders whose children are top-level packages: ``.`` (``pyskick``), ``cli`` and
    each plugin's ``src``."""
    return [root, root / "cli", *sorted(root.glob("plugins/*/src"))]


def find_modules(roots: Iterable[Path], packages: Iterable[str] | None = None) -> dict[str, Path]:
    """Module name -> file for every ``.py`` file of the top-level packages under ``roots``
    (``packages`` selects them by name; default: every folder with an ``__init__.py``)."""
    wanted = None if packages is None else set(packages)
    modules: dict[str, Path] = {}
    for root in roots:
        for init in sorted(root.glob("*/__init__.py")):
            top = init.parent
            if wanted is not None and top.name not in wanted:
                continue
            for path in sorted(top.rglob("*.py")):
                parts = [top.name, *path.relative_to(top).with_suffix("").parts]
                if parts[-1] == "__init__":
                    parts.pop()
                modules[".".join(parts)] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


class _Collector(ast.NodeVisitor):
    """The imports of one module, at any depth, skipping ``if TYPE_CHECKING:`` bodies."""

    def __init__(self, module: str, is_package: bool, type_checking: bool = False) -> None:
        self.package = module if is_package else module.rpartition(".")[0]
        self.found: list[tuple[str, int]] = []
        self.type_checking = type_checking

    def visit_If(self, node: ast.If) -> None:
        if _is_type_checking(node.test) and not self.type_checking:
            for child in node.orelse:
                self.visit(child)
        else:
            self.generic_visit(node)

    def visit_Import(self, node: ast.Import) -> None:
        self.found += [(alias.name, node.lineno) for alias in node.names]

    def visit_ImportFrom(self, node: ast.ImportFrom) -> None:
        if node.level:
            parts = self.package.split(".")
            base = ".".join(parts[: len(parts) - node.level + 1])
            base = f"{base}.{node.module}" if node.module else base
        else:
            base = node.module or ""
        # Either a submodule (``from pkg import mod``) or a name of ``base``: resolved later.
        self.found += [(f"{base}\0{alias.name}", node.lineno) for alias in node.names]


def _known(name: str, modules: Mapping[str, Path]) -> str | None:
    """The longest prefix of dotted ``name`` that is one of ``modules``."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def collect_imports(modules: Mapping[str, Path], *, type_checking: bool = False) -> list[Import]:
    """Every import among ``modules`` (imports of other libraries are left out); those under
    ``if TYPE_CHECKING:`` too when ``type_checking``."""
    imports = []
    for module, path in modules.items():
        collector = _Collector(module, path.name == "__init__.py", type_checking)
        collector.visit(ast.parse(path.read_text(), filename=str(path)))
        for name, line in collector.found:
            base, _, member = name.partition("\0")
            if member and f"{base}.{member}" in modules:
                target = f"{base}.{member}"
            else:
                target = _known(base, modules)
            if target is not None and target != module:
                imports.append(Import(module, target, path, line))
    return imports


def package_of(module: str) -> str:
    """``pyskick.X`` for anything under it, ``pyskick`` for its ``__init__``, else the
    top-level package."""
    parts = module.split(".")
    return ".".join(parts[:2]) if parts[0] == "pyskick" else parts[0]


def package_imports(imports: Iterable[Import]) -> list[Import]:
    """The imports that cross packages, as package -> package edges."""
    return [
        Import(package_of(i.source), package_of(i.target), i.path, i.line)
        for i in imports
        if package_of(i.source) != package_of(i.target)
    ]


def _components(graph: Mapping[str, set[str]]) -> list[set[str]]:
    """Strongly connected components (iterative Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            for child in children:
                if child not in index:
                    index[child] = low[child] = len(index)
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            else:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.add(member)
                        if member == node:
                            break
                    found.append(component)
    return found


def _shortest_cycle(graph: Mapping[str, set[str]], members: set[str]) -> list[str]:
    """A shortest cycle through the first of ``members``, staying inside them."""
    start = min(members)
    paths = {start: [start]}
    queue = [start]
    while queue:
        node = queue.pop(0)
        for child in sorted(graph[node] & members):
            if child == start:
                return [*paths[node], start]
            if child not in paths:
                paths[child] = [*paths[node], child]
                queue.append(child)
    raise AssertionError(f"no cycle through {start}")  # a component always has one


@dataclass(frozen=True)
class Cycle:
    """A group of mutually importing nodes and one shortest cycle through them."""

    path: list[str]
    """``[a, b, ..., a]``."""
    members: frozenset[str]
    """Every node of the group (the cycle may pass through some of them only)."""


def find_cycles(imports: Iterable[Import]) -> list[Cycle]:
    """One :class:`Cycle` per group of mutually importing nodes."""
    graph: dict[str, set[str]] = {}
    for i in imports:
        graph.setdefault(i.source, set()).add(i.target)
        graph.setdefault(i.target, set())
    return [
        Cycle(_shortest_cycle(graph, c), frozenset(c)) for c in _components(graph) if len(c) > 1
    ]


def describe_cycle(cycle: Cycle, imports: Iterable[Import], root: Path) -> str:
    """``a -> b -> a`` with, for each arrow, where the first such import is, and the rest of
    the group when the cycle does not pass through all of it."""
    first: dict[tuple[str, str], Import] = {}
    for i in imports:
        first.setdefault((i.source, i.target), i)
    path = cycle.path
    lines = [" -> ".join(path)]
    lines += [f"  {a} -> {b}   ({first[a, b].where(root)})" for a, b in itertools.pairwise(path)]
    others = sorted(cycle.members - set(path))
    if others:
        lines.append(f"  and, importing each other with them: {', '.join(others)}")
    return "\n".join(lines)


def upward_imports(imports: Iterable[Import], layers: Mapping[str, int]) -> list[Import]:
    """Package imports that point to a higher layer."""
    return [i for i in imports if layers[i.target] > layers[i.source]]


# -- the repository ------------------------------------------------------------------------


def _layer_of() -> dict[str, int]:
    return {package: level for level, (_, packages) in enumerate(LAYERS) for package in packages}


@pytest.fixture(scope="module")
def imports() -> list[Import]:
    return collect_imports(find_modules(source_roots(ROOT)))


def test_every_package_has_a_layer(imports: list[Import]) -> None:
    packages = {package_of(m) for m in find_modules(source_roots(ROOT))}
    unplaced = sorted(packages - set(_layer_of()))
    assert not unplaced, (
        f"packages without a layer: {', '.join(unplaced)}; add them to LAYERS here and to "
        "docs/architecture.md"
    )
    gone = sorted(set(_layer_of()) - packages)
    assert not gone, f"LAYERS names packages that do not exist: {', '.join(gone)}"


def test_no_module_imports_form_a_cycle(imports: list[Import]) -> None:
    cycles = [c for c in find_cycles(imports) if c.members not in KNOWN_CYCLES]
    assert not cycles, "import cycles between modules:\n" + "\n".join(
        describe_cycle(c, imports, ROOT) for c in cycles
    )


def test_known_cycles_still_exist(imports: list[Import]) -> None:
    present = {c.members for c in find_cycles(imports)}
    fixed = [sorted(c) for c in KNOWN_CYCLES if c not in present]
    assert not fixed, f"these cycles are gone: delete them from KNOWN_CYCLES: {fixed}"


def test_no_package_imports_form_a_cycle(imports: list[Import]) -> None:
    between = package_imports(imports)
    cycles = find_cycles(between)
    assert not cycles, "import cycles between packages:\n" + "\n".join(
        describe_cycle(c, between, ROOT) for c in cycles
    )


def test_no_cycle_even_with_type_checking_imports() -> None:
    """Annotations are dependencies too (issue 24): counting ``if TYPE_CHECKING:`` imports, no
    modules and no packages import each other in a circle."""
    imports = collect_imports(find_modules(source_roots(ROOT)), type_checking=True)
    between = package_imports(imports)
    cycles = [*find_cycles(imports), *find_cycles(between)]
    assert not cycles, "import cycles, TYPE_CHECKING imports counted:\n" + "\n".join(
        describe_cycle(c, [*imports, *between], ROOT) for c in cycles
    )


def test_imports_point_down_the_layers(imports: list[Import]) -> None:
    layers = _layer_of()
    names = [name for name, _ in LAYERS]
    wrong = upward_imports(package_imports(imports), layers)
    assert not wrong, "imports of a higher layer (see docs/architecture.md):\n" + "\n".join(
        f"  {i.source} ({names[layers[i.source]]}) -> {i.target} ({names[layers[i.target]]})"
        f"   ({i.where(ROOT)})"
        for i in wrong
    )


def test_the_architecture_doc_names_every_layer_and_package() -> None:
    text = (ROOT / "docs" / "architecture.md").read_text()
    missing = [name for name, _ in LAYERS if name not in text.lower()]
    named = [p for _, packages in LAYERS for p in packages if p not in PLUGIN_PACKAGES]
    missing += [f"`{p}`" for p in named if f"`{p}`" not in text]
    assert not missing, f"docs/architecture.md does not mention: {', '.join(missing)}"


# -- the checker on a tree of its own ------------------------------------------------------


def _tree(tmp_path: Path, files: Mapping[str, str]) -> dict[str, Path]:
    for name, text in files.items():
        path = tmp_path / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text))
    return find_modules([tmp_path])


CLEAN = {
    "app/__init__.py": "from app.low import helper\n",
    "app/low/__init__.py": "def helper(): ...\n",
    "app/low/util.py": "import os\n",
    "app/high/__init__.py": "",
    "app/high/main.py": """
        from typing import TYPE_CHECKING

        from app.low import util
        from . import helpers

        if TYPE_CHECKING:
            from app.top import Thing  # annotations only: never runs
        """,
    "app/high/helpers.py": "from ..low.util import os\n",
    "app/top.py": "from app.high.main import helpers\nThing = object\n",
}


def test_the_checker_reads_every_kind_of_import(tmp_path: Path) -> None:
    modules = _tree(tmp_path, CLEAN)
    edges = {(i.source, i.target) for i in collect_imports(modules)}
    assert edges == {
        ("app", "app.low"),
        ("app.high.main", "app.low.util"),
        ("app.high.main", "app.high.helpers"),
        ("app.high.helpers", "app.low.util"),
        ("app.top", "app.high.main"),
    }
    assert find_cycles(collect_imports(modules)) == []


@pytest.mark.parametrize(
    ("planted", "cycle"),
    [
        # An import inside a function closes a module cycle.
        (
            {"app/low/util.py": "def late():\n    from app.high import main\n"},
            ["app.high.helpers", "app.low.util", "app.high.main", "app.high.helpers"],
        ),
        # The else branch of ``if TYPE_CHECKING`` runs: it counts.
        (
            {
                "app/low/util.py": """
                    import typing
                    if typing.TYPE_CHECKING:
                        pass
                    else:
                        import app.top
                    """
            },
            ["app.high.helpers", "app.low.util", "app.top", "app.high.main", "app.high.helpers"],
        ),
    ],
    ids=["in-function", "type-checking-else"],
)
def test_the_checker_finds_a_planted_module_cycle(
    tmp_path: Path, planted: dict[str, str], cycle: list[str]
) -> None:
    modules = _tree(tmp_path, {**CLEAN, **planted})
    imports = collect_imports(modules)
    [found] = find_cycles(imports)
    assert found.path == cycle
    message = describe_cycle(found, imports, tmp_path)
    assert message.startswith(" -> ".join(cycle))
    assert "app/low/util.py:" in message


def test_the_checker_finds_a_package_cycle_without_a_module_cycle(tmp_path: Path) -> None:
    # low.util -> high.helpers and high.main -> low.util: no module imports itself back, but
    # the packages do.
    modules = _tree(
        tmp_path,
        {
            "pyskick/__init__.py": "",
            "pyskick/low/__init__.py": "",
            "pyskick/low/util.py": "from pyskick.high import helpers\n",
            "pyskick/high/__init__.py": "",
            "pyskick/high/helpers.py": "",
            "pyskick/high/main.py": "from pyskick.low import util\n",
        },
    )
    imports = collect_imports(modules)
    assert find_cycles(imports) == []
    between = package_imports(imports)
    assert [c.path for c in find_cycles(between)] == [
        ["pyskick.high", "pyskick.low", "pyskick.high"]
    ]
    layers = {"pyskick.low": 0, "pyskick.high": 1}
    wrong = upward_imports(between, layers)
    assert [(i.source, i.target, i.where(tmp_path)) for i in wrong] == [
        ("pyskick.low", "pyskick.high", "pyskick/low/util.py:1")
    ]
