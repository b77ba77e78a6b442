"""Fixtures to install throwaway plugin distributions (real entry points, no pip)."""

from __future__ import annotations

import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest


@pytest.fixture
def make_dist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], Path]:
    """Write a module and a ``.dist-info`` with a ``pyskick`` entry point onto ``sys.path``.

    Returns a function ``(name, source) -> site_dir``; the entry point ``name`` loads the
    module ``name.replace('-', '_')`` whose code is ``source``.
    """
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))

    def make(name: str, source: str) -> Path:
        module = name.replace("-", "_")
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[pyskick]\n{name} = {module}\n")
        return site

    return make
