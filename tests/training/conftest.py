"""Small smooth viewgrids and a tiny run config shared by the training tests."""

from __future__ import annotations

import pytest
import torch

from pyskick.config import TrainConfig, train_preset
from pyskick.training import step as step_module
from pyskick.training.data import TrainData
from pyskick.training.losses import completion_loss
from pyskick.training.trainer import pretrain


def smooth_grids(n: int, *, N: int = 3, M: int = 4, C: int = 1, H: int = 16, seed: int = 0):
    """``[n, N, M, C, H, W]`` uint8 grids of smooth random fields (learnable reconstructions)."""
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, N * M * C, 4, 4, generator=generator)
    fine = torch.nn.functional.interpolate(coarse, size=H, mode="bilinear", align_corners=False)
    return (fine.view(n, N, M, C, H, H) * 255).round().to(torch.uint8)


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here on one thread (``one_thread``, pyskick.testing)."""


@pytest.fixture
def tiny_data() -> TrainData:
    return TrainData(smooth_grids(16, seed=1), smooth_grids(6, seed=2), (120.0,))


@pytest.fixture
def tiny_config() -> TrainConfig:
    # On the CPU on every machine: tests that compare runs bit for bit need it.
    return train_preset("cpu-demo").replace(
        batch_size=8, epochs=2, pretrain_epochs=2, T=3, eval_batch_size=64, device="cpu"
    )


@pytest.fixture(name="smooth_grids")
def _smooth_grids_fixture():
    """The :func:`smooth_grids` factory (test modules cannot import conftest)."""
    return smooth_grids


@pytest.fixture
def pretrained(tmp_path, tiny_config, tiny_data):
    """A one-view run of ``tiny_config`` (test files may define their own)."""
    return pretrain(tiny_config, tmp_path / "pre", tiny_data).run_dir


@pytest.fixture
def recorded(monkeypatch):
    """The (rollout, kwargs) of every ``completion_loss`` call the trainer makes."""
    calls = []

    def recording(rollout, **kwargs):
        calls.append((rollout, kwargs))
        return completion_loss(rollout, **kwargs)

    monkeypatch.setattr(step_module, "completion_loss", recording)
    return calls
