"""Issue 24: a plugin's row of role ``"sidekick"`` gets the paper's claims in the report, as a
plugin author would test it with the kit (``pyskick.testing``): a sidekick and its method row
registered by a plugin object, a real ``pyskick reproduce`` on the kit's tiny scenes, and the
claims read from ``table.json``.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pyskick import hookimpl
from pyskick.sidekicks import RewardMaps


class BrightMaps(RewardMaps):
    """Pays for the brightest views: each grid's per-view mean intensity, scaled to [0, 1]."""

    def score_options(self, T: int) -> dict[str, Any]:
        return {}

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        means = grids.float().mean(dim=(3, 4, 5))  # [n, N, M]
        return {self.maps_score: means / 255.0}


class BrightPlugin:
    """A plugin: the ``bright`` sidekick and its Table 1 row, a proposed method."""

    @hookimpl
    def pyskick_register_sidekicks(self, register: Any) -> None:
        register("bright", lambda **_: BrightMaps(radius=1))

    @hookimpl
    def pyskick_register_methods(self, register: Any) -> None:
        register("ours(bright)", label="Rewards for bright views", sidekick="bright",
                 role="sidekick")  # fmt: skip


def test_a_plugin_sidekick_row_gets_the_papers_claims(
    tmp_path: Path, tiny_scenes: Path, cli_runner: Any, install_plugin: Any, one_thread: None
) -> None:
    install_plugin(BrightPlugin(), "bright-plugin")
    out = tmp_path / "table"
    code, _, err = cli_runner(
        "reproduce", "--dataset", tiny_scenes, "--out", out, "--preset", "cpu-demo",
        "--methods", "rnd-actions,ltla,ours(bright)", "--seeds", "2", "--epochs", "1",
        "--pretrain-epochs", "1", "--batch-size", "8", "--device", "cpu", "--no-report",
    )  # fmt: skip
    assert code == 0, err
    table = json.loads((out / "table.json").read_text())
    rows = {row["method"]: row for row in table["rows"]}
    assert rows["ours(bright)"]["role"] == "sidekick"
    assert rows["ltla"]["role"] == "reference"
    # Paired with every reference row, chosen by role.
    assert set(rows["ours(bright)"]["paired"]) == {"ltla", "rnd-actions", "one-view"}
    names = [claim["name"] for claim in table["claims"]]
    assert names == [
        "learning works",
        "ours(bright) beats ltla",
        "ours(bright) learns faster than ltla",
    ]
    checks = {(c["better"], c["worse"]) for c in table["ordering"]}
    assert {("ours(bright)", "ltla"), ("ours(bright)", "rnd-actions")} <= checks
    assert "**ours(bright) beats ltla: " in (out / "table.md").read_text()
