"""Tiny one-view checkpoints and viewgrids shared by the sidekick tests."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
import torch

from pyskick.checkpoint import save_checkpoint
from pyskick.models import CompletionPolicy, ModelConfig, preset

N, M, C, H = 3, 4, 1, 16
MEAN = (110.0,)


def smooth_grids(n: int, *, seed: int = 0) -> torch.Tensor:
    """``[n, N, M, C, H, H]`` uint8 smooth random fields: views differ, neighbours agree."""
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, N * M * C, 4, 4, generator=generator)
    fine = torch.nn.functional.interpolate(coarse, size=H, mode="bilinear", align_corners=False)
    return (fine.view(n, N, M, C, H, H) * 255).round().to(torch.uint8)


def save_one_view(path: Path, *, known_azimuth: bool = False, seed: int = 0) -> Path:
    """Save a freshly initialised tiny CompletionPolicy as a pretrain checkpoint at ``path``.

    Its BatchNorm running statistics are set from a few training-mode passes, so eval mode
    differs from train mode (a test using the wrong mode fails).
    """
    config = ModelConfig.from_dict(
        {
            **preset("cpu-demo").to_dict(),
            "n_elevations": N,
            "n_azimuths": M,
            "channels": C,
            "view_size": H,
            "known_azimuth": known_azimuth,
        }
    )
    with torch.random.fork_rng():
        torch.manual_seed(seed)
        policy = CompletionPolicy(config)
        views = (smooth_grids(4, seed=seed + 100).float().flatten(0, 2) - MEAN[0]) / 255
        proprio = torch.zeros(views.shape[0], config.proprio_size)
        with torch.no_grad():
            for _ in range(3):
                policy(views, proprio, 0)
    state = {"stage": "pretrain", "model": policy.state_dict(), "model_config": config.to_dict()}
    return save_checkpoint(path, state)


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here on one thread (``one_thread``, pyskick.testing)."""


@pytest.fixture(scope="session")
def one_view_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny one-view checkpoint (azimuth unknown, the paper's setting)."""
    return save_one_view(tmp_path_factory.mktemp("one-view") / "best.pt")


@pytest.fixture(name="smooth_grids")
def _smooth_grids_fixture() -> Callable[..., torch.Tensor]:
    """The :func:`smooth_grids` factory (test modules cannot import conftest)."""
    return smooth_grids


@pytest.fixture(name="save_one_view")
def _save_one_view_fixture() -> Callable[..., Path]:
    """The :func:`save_one_view` factory."""
    return save_one_view
