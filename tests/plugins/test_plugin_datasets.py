"""A dataset a plugin registers resolves wherever a built-in one does: ``resolve_dataset``, the
Gymnasium environment and ``pyskick data info`` (one resolver, through the registry).

The plugin is a real distribution (a module and a ``.dist-info`` with an entry point on
``sys.path``); its dataset factory writes a small SUN360-shaped file beside the module once.
"""

from __future__ import annotations

import json
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import gymnasium
import numpy as np
import pytest

import pyskick.envs  # noqa: F401  (registers pyskick/LookAround-v0)
from pyskick.data import SUN360, ViewgridFile, resolve_dataset
from pyskick.plugins import get_host
from pyskick.registry import UnknownNameError

MakeDist = Callable[[str, str], Path]
RunCli = Callable[..., subprocess.CompletedProcess[str]]

NAME = "tiny-plugin-scenes"

DATASET_PLUGIN = f"""
from pathlib import Path

import numpy as np
import pyskick
from pyskick.data import SUN360, write_viewgrids


def tiny_scenes():
    "Five random SUN360-shaped viewgrids per split, written beside this module once."
    path = Path(__file__).with_name("tiny-plugin-scenes.h5")
    if not path.is_file():
        rng = np.random.default_rng(7)
        splits = {{
            split: rng.integers(0, 256, (5, *SUN360.view_shape), dtype=np.uint8)
            for split in ("train", "val", "test")
        }}
        write_viewgrids(path, splits, SUN360, source="a plugin's test dataset")
    return path


def nowhere():
    "A factory that gives no file."
    return Path(__file__).with_name("missing.h5")


@pyskick.hookimpl
def pyskick_register_datasets(register):
    register("{NAME}", tiny_scenes)
    register("nowhere-scenes", nowhere)
"""


@pytest.fixture
def site(make_dist: MakeDist) -> Iterator[Path]:
    """The plugin installed; the process-wide plugin host rebuilt so that it is seen."""
    folder = make_dist("pyskick-tiny-data", DATASET_PLUGIN)
    get_host.cache_clear()
    yield folder
    get_host.cache_clear()


def test_resolve_dataset_finds_a_plugin_dataset(site: Path) -> None:
    path = resolve_dataset(NAME)
    assert path == site / "tiny-plugin-scenes.h5"
    assert ViewgridFile(path).num_samples("val") == 5
    assert resolve_dataset(str(path)) == path  # a path is a path
    with pytest.raises(UnknownNameError, match=f"{NAME}.*or give the path"):
        resolve_dataset("no-such-scenes")
    nowhere = r"'nowhere-scenes' \(plugin pyskick-tiny-data\) gave .*, not an existing file"
    with pytest.raises(ValueError, match=nowhere):
        resolve_dataset("nowhere-scenes")
    with pytest.raises(FileNotFoundError, match="does not exist"):
        resolve_dataset(site / "absent.h5")


def test_gymnasium_make_takes_a_plugin_dataset_name(site: Path) -> None:
    env = gymnasium.make("pyskick/LookAround-v0", dataset=NAME, split="val", T=3)
    try:
        obs, info = env.reset(seed=0, options={"index": 4, "start": 0})
        assert obs["view"].shape == (3, 32, 32)
        grids = ViewgridFile(site / "tiny-plugin-scenes.h5").split("val").load()
        mean = np.array(SUN360.channel_mean, np.float32)[:, None, None]
        expected = (grids[4].numpy().astype(np.float32) - mean) / 255
        np.testing.assert_allclose(info["full_viewgrid"], expected, atol=1e-6)
    finally:
        env.close()
    with pytest.raises(ValueError, match=f"unknown dataset 'no-such-scenes'.*{NAME}"):
        gymnasium.make("pyskick/LookAround-v0", dataset="no-such-scenes")


def test_data_info_takes_a_plugin_dataset_name(site: Path, run_cli: RunCli) -> None:
    result = run_cli(site, "data", "info", NAME, "--json")
    assert result.returncode == 0, result.stderr
    report = json.loads(result.stdout)
    assert report["path"] == str(site / "tiny-plugin-scenes.h5")
    assert report["splits"]["val"]["shape"] == [5, 4, 8, 3, 32, 32]
    result = run_cli(site, "data", "info", "no-such-scenes")
    assert result.returncode == 2
    assert "unknown dataset 'no-such-scenes'; valid names: " in result.stderr
    assert NAME in result.stderr
    assert sum(line.startswith("Error:") for line in result.stderr.splitlines()) == 1
