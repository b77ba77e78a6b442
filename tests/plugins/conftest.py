"""Fixtures to install throwaway plugin distributions (real entry points, no pip) and to run
``pyskick`` in a fresh process that sees them."""

from __future__ import annotations

import importlib
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

RunCli = Callable[..., subprocess.CompletedProcess[str]]


@pytest.fixture
def make_dist(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[Callable[[str, str], Path]]:
    """Write a module and a ``.dist-info`` with a ``pyskick`` entry point onto ``sys.path``.

    Returns a function ``(name, source) -> site_dir``; the entry point ``name`` loads the
    module ``name.replace('-', '_')`` whose code is ``source``. Plugins load as the environment
    says: the variables that select or disable them are unset here, and each generated module
    is imported afresh (another test's module of the same name is not reused) and forgotten
    afterwards.
    """
    for variable in ("PYSKICK_LOAD_PLUGINS", "PYSKICK_DISABLE_PLUGIN_AUTOLOAD"):
        monkeypatch.delenv(variable, raising=False)
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.syspath_prepend(str(site))
    modules: list[str] = []

    def make(name: str, source: str) -> Path:
        module = name.replace("-", "_")
        monkeypatch.delitem(sys.modules, module, raising=False)
        modules.append(module)
        (site / f"{module}.py").write_text(textwrap.dedent(source))
        info = site / f"{module}-0.1.dist-info"
        info.mkdir()
        (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[pyskick]\n{name} = {module}\n")
        importlib.invalidate_caches()  # the folder changed after it was put on sys.path
        return site

    yield make
    for module in modules:  # before monkeypatch restores what was there before the test
        sys.modules.pop(module, None)


def _run_cli(site: Path, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(
        [sys.executable, "-m", "pyskick_cli", *args],
        capture_output=True,
        text=True,
        env=env,
        cwd=cwd,
        check=False,
    )


@pytest.fixture
def run_cli() -> RunCli:
    """``(site, *args, cwd=None) -> CompletedProcess``: ``pyskick ARGS`` in a fresh process
    that sees the distributions under ``site``."""
    return _run_cli
