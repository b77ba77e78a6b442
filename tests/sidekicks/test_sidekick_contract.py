"""The sidekick contract in one place: names stamped by make_sidekick (never hand-kept), one
test of "has scores", and the reward-map base class that rew and rnd-rewards share."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import torch
from torch import Tensor

from pyskick.config import TrainConfig
from pyskick.data.spec import GridSpec
from pyskick.plugins import get_registries
from pyskick.sidekicks import (
    HybridSupervision,
    RewardMaps,
    ScoredSidekick,
    Sidekick,
    has_scores,
    make_sidekick,
)
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.sidekicks.scores import load_scores_file, score_key

from .conftest import MEAN, smooth_grids

SPEC = GridSpec(3, 4, 1, 16, (30.0, 0.0, -30.0), (0.0, 90.0, 180.0, 270.0), 45.0, MEAN, "custom")
CPU = torch.device("cpu")


class ConstantMaps(RewardMaps):
    """The smallest reward-map sidekick: every view of every grid pays ``value``."""

    def __init__(self, value: float, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.value = value

    def score_options(self, T: int) -> dict[str, Any]:
        return {"value": self.value}

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        return {"maps": torch.full(grids.shape[:3], self.value)}


def test_every_registered_sidekick_is_named_by_its_registration(one_view_ckpt: Path) -> None:
    config = TrainConfig(epochs=8)
    entries = list(get_registries()["sidekick"])
    assert {"none", "rew", "demo", "rnd-rewards", "expert-clone"} <= {e.name for e in entries}
    for entry in entries:
        sidekick = make_sidekick(entry.name, one_view=one_view_ckpt, spec=SPEC, config=config)
        assert sidekick.name == entry.name
        # No class on the way names itself: the registry is the one source of the name.
        own = [cls.__qualname__ for cls in type(sidekick).__mro__[:-1] if "name" in vars(cls)]
        assert own == ["Sidekick"], (entry.name, own)


def test_a_sidekick_built_by_hand_is_named_by_its_class_and_shares_the_scores(
    one_view_ckpt: Path,
) -> None:
    by_hand = RewardSidekick(one_view_ckpt, channel_mean=MEAN, k=4, radius=1)
    assert by_hand.name == "pyskick.sidekicks.reward.RewardSidekick"
    built = make_sidekick("rew", one_view=one_view_ckpt, spec=SPEC, config=TrainConfig())
    assert built.name == "rew"
    grids = smooth_grids(2)
    # The scores are the class's: its name (registered or not) does not split the cache.
    assert score_key(by_hand, grids, 4) == score_key(built, grids, 4)
    with pytest.raises(ValueError, match="non-empty string"):
        by_hand.name = ""


def test_one_test_of_having_scores(tmp_path: Path) -> None:
    none = make_sidekick("none", one_view=None, spec=None, config=None)
    assert not has_scores(none)
    none.prepare(smooth_grids(2), T=2, device=CPU)  # nothing to load, nothing computed
    with pytest.raises(ValueError, match="sidekick 'none' has no scores"):
        load_scores_file(none, smooth_grids(2), tmp_path / "scores.h5", T=2)  # type: ignore[arg-type]

    # The score trio on a plain Sidekick would never be called: refused when the class is made.
    refusal = (
        r"\.Plain defines score_options, compute_scores: a sidekick with scores subclasses "
        r"pyskick.sidekicks.ScoredSidekick$"
    )
    with pytest.raises(TypeError, match=refusal):

        class Plain(Sidekick):
            def score_options(self, T: int) -> Any:
                return {}

            def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> Any:
                return {}

    class Partial(ScoredSidekick):
        def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> Any:
            return {}

    with pytest.raises(TypeError, match="abstract"):
        Partial()  # type: ignore[abstract]

    class Forgetful(ScoredSidekick):
        """Computes scores but names no options: refused, not keyed by nothing."""

        def score_options(self, T: int) -> Any:
            return None

        def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> Any:
            return {"x": torch.zeros(len(grids))}

        def load_scores(self, scores: dict[str, Tensor], *, T: int, device: torch.device) -> None:
            pass

    assert has_scores(Forgetful())
    assert Forgetful.shardable
    assert Forgetful.scores_file is None
    with pytest.raises(TypeError, match="score_options must return a dict, got NoneType"):
        score_key(Forgetful(), smooth_grids(2), 2)


def test_reward_maps_pay_load_and_decay(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    with pytest.raises(TypeError, match="abstract"):
        RewardMaps(radius=1)  # type: ignore[abstract]
    sidekick = ConstantMaps(0.5, radius=2, scale=0.1, decay_every=2, decay_factor=4.0)
    assert isinstance(sidekick, Sidekick)
    assert not isinstance(sidekick, HybridSupervision)
    assert sidekick.reward_radius == 2  # the environment zeroes the maps' radius
    assert dict(sidekick.options) == {
        "scale": 0.1, "decay_every": 2, "decay_factor": 4.0, "radius": 2,
    }  # fmt: skip
    with pytest.raises(RuntimeError, match=r"ConstantMaps.prepare\(\) must run"):
        sidekick.reward_maps(torch.tensor([0]), 0)
    grids = smooth_grids(3)
    sidekick.prepare(grids, T=4, device=CPU)  # through the score cache
    assert (tmp_path / "cache" / "scores").is_dir()
    maps = sidekick.reward_maps(torch.tensor([2, 0]), 0)
    assert maps.dtype == torch.float32
    assert torch.equal(maps, torch.full((2, 3, 4), 0.5))
    scales = []
    for epoch in range(4):
        scales.append(sidekick.reward_scale(epoch))
        sidekick.on_epoch_end(epoch)
    assert scales == pytest.approx([0.1, 0.1, 0.025, 0.025])
    restored = ConstantMaps(0.5, radius=2, scale=0.1)
    restored.load_state_dict(sidekick.state_dict())
    assert restored.reward_scale(4) == sidekick.reward_scale(4)
    with pytest.raises(ValueError, match="no 'maps' among its scores"):
        restored.load_scores({"nms": torch.zeros(3, 3, 4)}, T=4, device=CPU)
    with pytest.raises(ValueError, match=r"reward maps must be \[n, N, M\], got \[3, 12\]"):
        restored.load_scores({"maps": torch.zeros(3, 12)}, T=4, device=CPU)
    # Checked once when loaded: the environment trusts every batch's maps (no device wait).
    with pytest.raises(ValueError, match="reward maps contain NaN or infinite values"):
        restored.load_scores({"maps": torch.full((3, 3, 4), float("inf"))}, T=4, device=CPU)
    with pytest.raises(ValueError, match="ConstantMaps needs radius >= 0"):
        ConstantMaps(0.5, radius=-1)


def test_the_rew_sidekick_is_a_reward_map_sidekick(one_view_ckpt: Path) -> None:
    rew = make_sidekick("rew", one_view=one_view_ckpt, spec=SPEC, config=TrainConfig())
    assert isinstance(rew, RewardMaps)
    assert rew.maps_score == "nms"  # its maps are the NMS-thinned one-view scores
    nms = torch.rand(2, 3, 4)
    scores = {"normal": torch.rand(2, 3, 4), "nms": nms}  # compute_scores' layout
    rew.load_scores(scores, T=4, device=CPU)
    assert torch.equal(rew.reward_maps(torch.tensor([1]), 0), nms[1:])
