"""Release hygiene: the licence, the citation, the changelog and the lint set-up agree with the
package and with each other (read from the repository's files; no network, nothing built)."""

from __future__ import annotations

import importlib.metadata
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
import yaml

import pyskick

ROOT = Path(__file__).resolve().parents[1]

PAPER_TITLE = "Sidekick Policy Learning for Active Visual Exploration"

MIT_GRANT = (
    "Permission is hereby granted, free of charge, to any person obtaining a copy of this "
    'software and associated documentation files (the "Software"), to deal in the Software '
    "without restriction"
)
MIT_WARRANTY = 'THE SOFTWARE IS PROVIDED "AS IS", WITHOUT WARRANTY OF ANY KIND'


def _pyproject() -> dict[str, Any]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))


def _yaml(name: str) -> dict[str, Any]:
    data = yaml.safe_load((ROOT / name).read_text(encoding="utf-8"))
    assert isinstance(data, dict), f"{name} is not a YAML mapping"
    return data


def _words(text: str) -> str:
    """``text`` with every run of white space made one space (licence texts are rewrapped)."""
    return " ".join(text.split())


def test_pyproject_version_is_the_package_version() -> None:
    assert _pyproject()["project"]["version"] == pyskick.__version__


def test_licence_is_mit_as_pyproject_declares_and_ships() -> None:
    project = _pyproject()["project"]
    assert project["license"] == "MIT"
    assert project["license-files"] == ["LICENSE"]
    text = (ROOT / "LICENSE").read_text(encoding="utf-8")
    assert text.splitlines()[0] == "MIT License"
    assert MIT_GRANT in _words(text)
    assert MIT_WARRANTY in _words(text)
    # The holder is the project's author.
    holders = [author["name"] for author in project["authors"]]
    assert re.search(rf"^Copyright \(c\) \d{{4}} {re.escape(holders[0])}$", text, re.M), holders


def test_citation_cites_this_version_and_the_paper() -> None:
    cff = _yaml("CITATION.cff")
    assert cff["cff-version"] == "1.2.0"
    for key in ("message", "title", "authors"):  # required by the format
        assert cff.get(key), key
    assert cff["type"] == "software"
    assert cff["version"] == pyskick.__version__
    assert cff["license"] == _pyproject()["project"]["license"]
    paper = cff["preferred-citation"]
    assert paper["type"] == "conference-paper"
    assert paper["title"] == PAPER_TITLE
    assert [a["family-names"] for a in paper["authors"]] == ["Ramakrishnan", "Grauman"]
    assert paper["year"] == 2018
    assert "ECCV" in paper["conference"]["name"]
    # A DOI, where given, has the DOI form (none is invented: the paper's sources give none).
    for entry in (cff, paper):
        if "doi" in entry:
            assert re.fullmatch(r"10\.\d{4,9}/\S+", str(entry["doi"])), entry["doi"]


def test_changelog_newest_release_is_the_current_version() -> None:
    text = (ROOT / "CHANGELOG.md").read_text(encoding="utf-8")
    releases = re.findall(r"^## \[([^\]]+)\]", text, re.M)
    versions = [name for name in releases if name != "Unreleased"]
    assert versions, "CHANGELOG.md has no release heading"
    assert versions[0] == pyskick.__version__, f"newest release heading: {versions[0]}"
    if "Unreleased" in releases:
        assert releases[0] == "Unreleased", "Unreleased goes above every release"


def test_pre_commit_runs_the_installed_ruff_and_the_venv_mypy() -> None:
    repos = _yaml(".pre-commit-config.yaml")["repos"]
    ruff = [repo for repo in repos if repo["repo"].endswith("/ruff-pre-commit")]
    assert len(ruff) == 1
    assert {hook["id"] for hook in ruff[0]["hooks"]} == {"ruff-check", "ruff-format"}
    # The test extra pins the same ruff, so a fresh `make setup` installs it.
    test_extra = _pyproject()["project"]["optional-dependencies"]["test"]
    assert f"ruff=={ruff[0]['rev'].removeprefix('v')}" in test_extra
    # And a venv that has ruff has that one (a machine that runs the suite without the test
    # extra's linters, as the GPU check's image does, has none to compare).
    try:
        installed = importlib.metadata.version("ruff")
    except importlib.metadata.PackageNotFoundError:
        installed = None
    assert installed in (None, ruff[0]["rev"].removeprefix("v"))
    local = [hook for repo in repos if repo["repo"] == "local" for hook in repo["hooks"]]
    mypy = [hook for hook in local if hook["id"] == "mypy"]
    assert len(mypy) == 1
    assert mypy[0]["language"] == "system"
    assert mypy[0]["entry"] == ".venv/bin/mypy"
    assert mypy[0]["pass_filenames"] is False


def _module_exists(name: str) -> bool:
    parts = name.split(".")
    base = ROOT / "cli" if parts[0] == "pyskick_cli" else ROOT
    path = base.joinpath(*parts)
    return path.with_suffix(".py").is_file() or (path / "__init__.py").is_file()


def test_mypy_is_strict_over_the_package_and_runs_in_lint_and_ci() -> None:
    config = _pyproject()["tool"]["mypy"]
    assert config["strict"] is True
    assert set(config["files"]) == {"pyskick", "cli/pyskick_cli"}
    assert any(
        dep.startswith("mypy") for dep in _pyproject()["project"]["optional-dependencies"]["test"]
    )
    lint = (ROOT / "Makefile").read_text(encoding="utf-8").split("\nlint:", 1)[1].split("\n\n")[0]
    assert "/mypy" in lint
    assert re.search(r"^make lint$", (ROOT / ".ci/run").read_text(encoding="utf-8"), re.M)
    assert ".mypy_cache/" in (ROOT / ".gitignore").read_text(encoding="utf-8").splitlines()


def test_mypy_type_debt_names_existing_modules_and_error_codes_only() -> None:
    """Every module of ours excused from checks exists and is excused from named error codes
    only (never ``ignore_errors`` or a weaker flag, which would hide more than its debt)."""
    for override in _pyproject()["tool"]["mypy"].get("overrides", []):
        modules = override["module"]
        modules = [modules] if isinstance(modules, str) else modules
        if not any(module.split(".")[0] in {"pyskick", "pyskick_cli"} for module in modules):
            continue  # a third-party library's settings
        for module in modules:
            assert _module_exists(module), f"type debt of a module that is gone: {module}"
        assert set(override) == {"module", "disable_error_code"}, override
        assert override["disable_error_code"], override


@pytest.mark.parametrize("state", ["wheel", "sdist", "editable"])
def test_only_editable_installs_build_in_the_source_tree(state: str) -> None:
    """`pip install .` builds in a temporary folder (scikit-build-core's default, an empty
    build-dir); an editable install keeps its CMake tree under build/ for the next rebuild."""
    from scikit_build_core.settings.skbuild_read_settings import SettingsReader

    reader = SettingsReader(_pyproject(), {}, state=state)
    build_dir = reader.settings.build_dir
    if state == "editable":
        assert build_dir.startswith("build/")
    else:
        assert build_dir == "", f"a {state} build would write {build_dir} into the tree"
