"""A plugin sidekick's score cache key follows its source code, not only its version: editing
a throwaway plugin distribution's sidekick (or a helper module of its package) recomputes its
scores, unchanged code reuses them, and a score file computed before the edit is stale."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from types import ModuleType

import pytest
import torch

from pyskick.sidekicks.scores import (
    ScoreMeta,
    cached_scores,
    code_digest,
    code_files,
    load_scores_file,
    score_key,
    write_scores,
)

CPU = torch.device("cpu")

PLUGIN = """
from pathlib import Path

import torch

from pyskick.sidekicks.base import ScoredSidekick

BRIGHTNESS = 1.0


class Brightness(ScoredSidekick):
    \"\"\"Scores every view by its mean intensity; appends a line to ``log`` per computation.\"\"\"

    def __init__(self, log: Path) -> None:
        self.log = log

    def score_options(self, T):
        return {}

    def compute_scores(self, grids, *, T, device):
        with self.log.open("a") as handle:
            handle.write("computed\\n")
        return {"means": grids.float().mean((3, 4, 5)) * BRIGHTNESS}

    def load_scores(self, scores, *, T, device):
        self.loaded = scores
"""


def _grids() -> torch.Tensor:
    """``[5, 2, 3, 1, 4, 4]`` uint8 viewgrids."""
    return torch.arange(5 * 2 * 3 * 16, dtype=torch.int64).reshape(5, 2, 3, 1, 4, 4).to(torch.uint8)


def _fresh(module: str) -> ModuleType:
    """``module`` imported again from its (edited) file, as the next process would."""
    sys.modules.pop(module, None)
    importlib.invalidate_caches()
    return importlib.import_module(module)


def _computations(log: Path) -> int:
    return len(log.read_text().splitlines()) if log.exists() else 0


def test_editing_a_plugin_sidekick_recomputes_its_cached_scores(
    make_dist: Callable[[str, str], Path], tmp_path: Path
) -> None:
    site = make_dist("pyskick-brightness", PLUGIN)
    source, log, grids = site / "pyskick_brightness.py", tmp_path / "log", _grids()
    cache = tmp_path / "cache"

    def score() -> dict[str, torch.Tensor]:
        sidekick = _fresh("pyskick_brightness").Brightness(log)
        return cached_scores(sidekick, grids, T=2, device=CPU, cache_dir=cache)

    first = score()
    assert _computations(log) == 1
    assert torch.equal(score()["means"], first["means"])  # unchanged code: a cache hit
    assert _computations(log) == 1

    # The same version (0.1), other code: recomputed, and the new code's scores are used.
    source.write_text(source.read_text().replace("BRIGHTNESS = 1.0", "BRIGHTNESS = 2.0"))
    assert torch.equal(score()["means"], 2 * first["means"])
    assert _computations(log) == 2
    score()
    assert _computations(log) == 2  # the edited code is cached in turn
    assert len(list((cache / "scores").glob("*.h5"))) == 2

    # A comment is an edit too (the digest is of the file, not of the bytecode) ...
    source.write_text(source.read_text() + "# tuned\n")
    score()
    assert _computations(log) == 3
    # ... but line endings are not: the same code checked out on Windows keys the same.
    source.write_bytes(source.read_bytes().replace(b"\n", b"\r\n"))
    score()
    assert _computations(log) == 3


def test_a_score_file_of_edited_plugin_code_is_stale(
    make_dist: Callable[[str, str], Path], tmp_path: Path
) -> None:
    site = make_dist("pyskick-brightness", PLUGIN)
    source, grids = site / "pyskick_brightness.py", _grids()
    sidekick = _fresh("pyskick_brightness").Brightness(tmp_path / "log")
    key = score_key(sidekick, grids, 2)
    path = write_scores(
        tmp_path / "s.h5",
        {"train": sidekick.compute_scores(grids, T=2, device=CPU)},
        meta=ScoreMeta.of(sidekick, 2, {"train": key}),
    )
    assert load_scores_file(sidekick, grids, path, T=2)["means"].shape == (5, 2, 3)
    source.write_text(source.read_text().replace("BRIGHTNESS = 1.0", "BRIGHTNESS = 3.0"))
    edited = _fresh("pyskick_brightness").Brightness(tmp_path / "log")
    # The error says what changed: the plugin's code, not the data, model or options.
    with pytest.raises(
        ValueError, match=r"^stale scores in .*: the code of pyskick_brightness.Brightness changed"
    ):
        load_scores_file(edited, grids, path, T=2)


def test_a_plugin_packages_helper_modules_are_part_of_its_digest(
    make_dist: Callable[[str, str], Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    site = make_dist("pyskick-brightness", PLUGIN)  # puts ``site`` on sys.path
    package = site / "brightness_pkg"
    (package / "nested").mkdir(parents=True)
    (package / "__init__.py").write_text("")
    (package / "nested" / "__init__.py").write_text("")
    (package / "nested" / "gain.py").write_text("GAIN = 1.0\n")
    (package / "sidekick.py").write_text(
        PLUGIN.replace("BRIGHTNESS = 1.0", "from brightness_pkg.nested.gain import GAIN")
    )
    for module in ("brightness_pkg", "brightness_pkg.nested", "brightness_pkg.nested.gain"):
        monkeypatch.delitem(sys.modules, module, raising=False)
    importlib.invalidate_caches()
    sidekick = importlib.import_module("brightness_pkg.sidekick").Brightness(tmp_path / "log")
    try:
        labels = set(code_files(sidekick))
        # The package's every file, named independently of where it lies; pyskick's Sidekick
        # base (generic machinery) is not part of it.
        assert labels == {
            "brightness_pkg/__init__.py",
            "brightness_pkg/sidekick.py",
            "brightness_pkg/nested/__init__.py",
            "brightness_pkg/nested/gain.py",
        }
        digest = code_digest(sidekick)
        (package / "nested" / "gain.py").write_text("GAIN = 0.5\n")
        assert code_digest(sidekick) != digest
    finally:
        for module in [name for name in sys.modules if name.startswith("brightness_pkg")]:
            del sys.modules[module]


def test_pyskicks_own_sidekicks_are_keyed_by_their_modules() -> None:
    from pyskick_rnd_rewards.sidekick import RandomRewardSidekick

    from pyskick.sidekicks.demo import DemoSidekick
    from pyskick.sidekicks.reward import RewardSidekick

    rew = RewardSidekick.__new__(RewardSidekick)
    assert set(code_files(rew)) == {
        "pyskick.sidekicks.reward:reward.py",
        "pyskick.sidekicks.reward_maps:reward_maps.py",
    }
    assert set(code_files(DemoSidekick.__new__(DemoSidekick))) == {
        "pyskick.sidekicks.demo:demo.py",
        "pyskick.sidekicks.hybrid:hybrid.py",
    }
    # A shipped plugin: its whole package, plus the pyskick base it builds on.
    rnd = set(code_files(RandomRewardSidekick.__new__(RandomRewardSidekick)))
    assert {"pyskick_rnd_rewards/__init__.py", "pyskick_rnd_rewards/sidekick.py"} <= rnd
    assert "pyskick.sidekicks.reward_maps:reward_maps.py" in rnd
    assert all(label.startswith(("pyskick_rnd_rewards/", "pyskick.")) for label in rnd)
