"""A tiny dataset file and its default task-reward models, trained once per session."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest
import torch

from pyskick.data import GridSpec, write_viewgrids
from pyskick.training.data import TrainData
from pyskick.training.one_view_cache import cached_one_view
from pyskick.training.task_models import cached_random_actions_run, reward_config

N, M, C, VIEW = 3, 6, 1, 16
T = 3
SPEC = GridSpec(
    n_elevations=N,
    n_azimuths=M,
    channels=C,
    view_size=VIEW,
    elevations_deg=(30.0, 0.0, -30.0),
    azimuths_deg=tuple(60.0 * m for m in range(M)),
    fov_deg=45.0,
    channel_mean=(120.0,),
    preset="custom",
)
TINY_TRAINING = {"batch_size": 8, "epochs": 3, "pretrain_epochs": 3, "eval_batch_size": 64}
"""Config overrides of the default reward models: seconds on one CPU core."""


def smooth_grids(n: int, seed: int) -> torch.Tensor:
    """``[n, N, M, C, VIEW, VIEW]`` uint8 grids of smooth random fields (learnable)."""
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, N * M * C, 4, 4, generator=generator)
    fine = torch.nn.functional.interpolate(coarse, size=VIEW, mode="bilinear", align_corners=False)
    return (fine.view(n, N, M, C, VIEW, VIEW) * 255).round().to(torch.uint8)


@dataclass(frozen=True)
class RewardModels:
    """The tiny dataset and the default models trained for it in the session's cache."""

    data_file: Path
    reconstruction: Path  # the random-motions run at T
    one_view: Path
    T: int = T
    training: dict = field(default_factory=lambda: dict(TINY_TRAINING))


@pytest.fixture(scope="session")
def reward_models(tmp_path_factory: pytest.TempPathFactory) -> RewardModels:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        splits = {
            "train": smooth_grids(24, seed=1),
            "val": smooth_grids(6, seed=2),
            "test": smooth_grids(12, seed=3),
        }
        path = write_viewgrids(
            tmp_path_factory.mktemp("env-data") / "tiny.h5", splits, SPEC, source="smooth fields"
        )
        run = cached_random_actions_run(path, T, TINY_TRAINING)
        one_view = cached_one_view(path, reward_config(T, TINY_TRAINING), TrainData.from_file(path))
    finally:
        torch.set_num_threads(threads)
    return RewardModels(path, run, one_view)
