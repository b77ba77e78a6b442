"""README.md's pip instructions stay true: torch first from its own index, then pyskick, which
keeps that torch (its requirement has no upper bound the installed torch misses) and whose build
never downloads one."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

import torch
from packaging.requirements import Requirement
from packaging.version import Version

ROOT = Path(__file__).resolve().parents[2]


def _pip_commands() -> list[str]:
    """The ``pip install`` lines of the README's "Installing with pip" code block."""
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    section = readme.split("### Installing with pip", 1)[1].split("\n## ", 1)[0]
    (block,) = re.findall(r"```bash\n(.*?)```", section, flags=re.S)
    return [line.split("#", 1)[0].strip() for line in block.splitlines() if line.strip()]


def test_the_readme_installs_torch_before_pyskick() -> None:
    torch_line, pyskick_line = _pip_commands()
    assert torch_line == "pip install torch --index-url https://download.pytorch.org/whl/cpu"
    assert pyskick_line == "pip install ."


def test_pyskick_keeps_an_installed_torch_and_builds_without_one() -> None:
    project = tomllib.loads((ROOT / "pyproject.toml").read_text(encoding="utf-8"))
    (spec,) = [
        Requirement(dep) for dep in project["project"]["dependencies"] if dep.startswith("torch")
    ]
    assert spec.name == "torch"
    # The torch this suite runs on (a CPU or a CUDA wheel, local version "+cpu" and all)
    # satisfies the requirement, so installing pyskick after it leaves it in place.
    assert Version(Version(torch.__version__).base_version) in spec.specifier
    assert all(not upper.operator.startswith("<") for upper in spec.specifier)
    build = [Requirement(dep).name for dep in project["build-system"]["requires"]]
    assert "torch" not in build
