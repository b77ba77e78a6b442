"""A pytest plugin for the GPU check's whole-suite step: the slowest test modules first
(``-p order``; the list in ``slowest_modules.txt`` beside this file, slowest first), the others
in their collection order after them.

Under ``--dist loadscope`` xdist hands whole modules to its workers in collection order, so a
slow module collected late runs while the others are done and sets the step's wall time; first,
it runs beside them. Every worker collects the same order (it depends on the list alone), as
xdist requires."""

from __future__ import annotations

from pathlib import Path

import pytest

SLOWEST = Path(__file__).with_name("slowest_modules.txt")


def slowest_modules() -> list[str]:
    """The modules of ``slowest_modules.txt``, slowest first (``# ...`` comments dropped)."""
    names = (line.split("#", 1)[0].strip() for line in SLOWEST.read_text().splitlines())
    return [name for name in names if name]


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    rank = {name: i for i, name in enumerate(slowest_modules())}
    last = len(rank)
    # sorted() is stable: within a module, and among the modules not listed, the order stays.
    items[:] = sorted(items, key=lambda item: rank.get(item.nodeid.split("::", 1)[0], last))
