"""A reward model and the views it is fed are normalised alike, both ways (issue 25, item 16).

A model that subtracts its data's channel mean, in an env whose views have no mean subtracted
(``channel_mean=[0, 0, 0]``, or grids given without one), was accepted and paid rewards
computed from views off by the mean (≈ 100 of 255). Only the other direction (a model without
mean subtraction fed mean-subtracted views) was refused. Both are refused now, before any
coverage is scored.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import gymnasium
import pytest
import torch

from pyskick.checkpoint import save_checkpoint
from pyskick.envs import GYM_ID
from pyskick.models import PRESETS, CompletionPolicy
from pyskick.sidekicks.coverage import one_view_coverage

GRIDS = torch.randint(
    0, 256, (2, 3, 6, 1, 16, 16), dtype=torch.uint8, generator=torch.Generator().manual_seed(0)
)


def _model(tmp_path: Path, mean_subtract: bool) -> Path:
    config = dataclasses.replace(
        PRESETS["cpu-demo"],
        n_elevations=3,
        n_azimuths=6,
        channels=1,
        view_size=16,
        mean_subtract=mean_subtract,
    )
    path = tmp_path / f"model-{mean_subtract}.pt"
    torch.manual_seed(0)
    save_checkpoint(
        path, {"model": CompletionPolicy(config).state_dict(), "model_config": config.to_dict()}
    )
    return path


@pytest.mark.parametrize("reward", ["reconstruction", "coverage"])
@pytest.mark.parametrize("mean", [None, [0.0]])
def test_a_mean_subtracting_model_is_not_fed_views_without_a_mean(tmp_path, reward, mean):
    model = _model(tmp_path, mean_subtract=True)
    given = {} if mean is None else {"channel_mean": mean}
    with pytest.raises(
        ValueError,
        match=r"^the reward model was trained with mean subtraction but no channel mean is",
    ):
        gymnasium.make(GYM_ID, grids=GRIDS, T=3, reward=reward, reward_model=model, **given)
    # With its mean the same model pays rewards.
    env = gymnasium.make(
        GYM_ID, grids=GRIDS, T=3, reward=reward, reward_model=model, channel_mean=[110.0]
    )
    env.reset(seed=0)
    _, paid, *_ = env.step(0)
    assert isinstance(paid, float)


def test_a_model_without_mean_subtraction_is_not_fed_mean_subtracted_views(tmp_path):
    model = _model(tmp_path, mean_subtract=False)
    with pytest.raises(
        ValueError, match="trained without mean subtraction but the environment subtracts"
    ):
        gymnasium.make(
            GYM_ID,
            grids=GRIDS,
            T=3,
            reward="reconstruction",
            reward_model=model,
            channel_mean=[110.0],
        )
    gymnasium.make(GYM_ID, grids=GRIDS, T=3, reward="reconstruction", reward_model=model)


def test_coverage_scoring_refuses_a_missing_mean_for_a_mean_subtracting_model(tmp_path):
    model = _model(tmp_path, mean_subtract=True)
    for mean in (None, [0.0]):
        with pytest.raises(ValueError, match="no channel mean is subtracted from the views"):
            one_view_coverage(model, GRIDS, channel_mean=mean)
    assert one_view_coverage(model, GRIDS, channel_mean=[110.0]).shape == (2, 18, 18)
    # A model that subtracts nothing ignores any mean it is given: the same coverage.
    plain = _model(tmp_path, mean_subtract=False)
    assert torch.equal(
        one_view_coverage(plain, GRIDS, channel_mean=None),
        one_view_coverage(plain, GRIDS, channel_mean=[110.0]),
    )
