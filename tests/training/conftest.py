"""Small smooth viewgrids and a tiny run config shared by the training tests."""

from __future__ import annotations

from contextlib import nullcontext

import pytest
import torch

from pyskick.config import TrainConfig, train_preset
from pyskick.training import step as step_module
from pyskick.training.data import TrainData
from pyskick.training.losses import completion_loss
from pyskick.training.syncs import no_host_syncs
from pyskick.training.trainer import Trainer, pretrain

STEP_METRICS = ("rec_error", "loss", "policy_loss", "entropy", "critic_loss")


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


def first_step(config, folder, data, init, *, guarded: bool = True):
    """A run's first training step, the update left out: the trainer, holding the step's
    gradients, and its metrics. ``guarded``: inside ``no_host_syncs()`` (which compiled
    networks cannot run in: dynamo would trace the mode)."""
    trainer = Trainer(config, folder, data, stage="train", init=init).setup()
    trainer.optimizer.step = lambda: None  # the gradients, before the update
    with no_host_syncs() if guarded else nullcontext():
        metrics = trainer.train_step(next(trainer.batches(0)), 0)
    return trainer, metrics


def assert_same_step(got, expected, params_a, params_b, *, grad_atol: float = 1e-4) -> None:
    """Two steps' metrics within 1e-5 relative, and their gradients within 1e-4 relative and
    ``grad_atol`` of the largest gradient of ``params_a``: the same arithmetic, summed in
    another order (a switch of where and how a step computes)."""
    for name in STEP_METRICS:
        torch.testing.assert_close(
            getattr(got, name), getattr(expected, name), rtol=1e-5, atol=1e-7
        )
    scale = max(float(p.grad.abs().max()) for p in params_a if p.grad is not None)
    for a, b in zip(params_a, params_b, strict=True):
        assert (a.grad is None) == (b.grad is None)
        if a.grad is not None:
            torch.testing.assert_close(b.grad, a.grad, rtol=1e-4, atol=grad_atol * scale)


@pytest.fixture(name="first_step")
def _first_step_fixture():
    """:func:`first_step` (test modules cannot import conftest)."""
    return first_step


@pytest.fixture(name="assert_same_step")
def _assert_same_step_fixture():
    """:func:`assert_same_step`."""
    return assert_same_step
