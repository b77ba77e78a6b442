"""Every plugin distribution under ``plugins/`` is installed and found through its entry points.

`make setup` installs each ``plugins/*/`` folder with a ``pyproject.toml`` (editable); a folder
that is missing from the environment, installed from elsewhere, or fails to load fails here.
"""

from __future__ import annotations

import importlib.metadata
import json
import subprocess
import sys
import tomllib
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

import pytest

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = sorted(path.parent for path in (ROOT / "plugins").glob("*/pyproject.toml"))


def test_the_repository_ships_plugin_distributions() -> None:
    assert FOLDERS, f"no plugins/*/pyproject.toml under {ROOT}"


@pytest.fixture(scope="module")
def listing() -> dict[str, Any]:
    """``pyskick plugins --json`` in a fresh process: what a user's shell would see."""
    result = subprocess.run(
        [sys.executable, "-m", "pyskick_cli", "plugins", "--json"],
        capture_output=True,
        text=True,
        check=True,
    )
    return json.loads(result.stdout)


@pytest.mark.parametrize("folder", FOLDERS, ids=[folder.name for folder in FOLDERS])
def test_plugin_folder_is_installed_and_discovered(folder: Path, listing: dict[str, Any]) -> None:
    project = tomllib.loads((folder / "pyproject.toml").read_text())["project"]
    declared = project.get("entry-points", {}).get("pyskick", {})
    assert declared, f"{folder.name}: no [project.entry-points.pyskick] in pyproject.toml"
    try:
        dist = importlib.metadata.distribution(project["name"])
    except importlib.metadata.PackageNotFoundError:
        pytest.fail(f"{project['name']} is not installed: run `make setup`")
    origin = json.loads(dist.read_text("direct_url.json") or "{}").get("url", "")
    assert Path(unquote(urlparse(origin).path)).resolve() == folder.resolve(), (
        f"{project['name']} is installed from {origin!r}, not from {folder}: run `make setup`"
    )
    installed = {ep.name: ep.value for ep in dist.entry_points if ep.group == "pyskick"}
    assert installed == declared, f"{project['name']}: stale install, run `make setup`"
    plugins = {plugin["name"]: plugin for plugin in listing["plugins"]}
    for name in declared:
        assert name not in listing["failures"], listing["failures"][name]
        assert name in plugins, f"`pyskick plugins` does not list {name}"
        assert plugins[name]["distribution"] == project["name"]
        assert plugins[name]["version"] == dist.version
        assert plugins[name]["registered"], f"plugin {name} registered nothing"
