"""The kit's tiny scenes and one finished reproduce folder shared by the tests."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pyskick.experiments import reproduce

FAST = {
    "preset": "cpu-demo",
    "epochs": 1,
    "pretrain_epochs": 1,
    "batch_size": 8,
    "device": "cpu",
    "seeds": 1,
}
METHODS = ["rnd-actions", "ltla", "ours(rew)"]


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here on one thread (``one_thread``, pyskick.testing)."""


@pytest.fixture(scope="session")
def scenes(tiny_scenes: Path) -> Path:
    """The kit's 40 scenes (32 train, 4 val, 4 test): ``tiny_scenes``, pyskick.testing."""
    return tiny_scenes


@pytest.fixture(scope="session")
def finished(scenes: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A reproduce folder of one-view, rnd-actions, ltla and ours(rew), one epoch each."""
    out = tmp_path_factory.mktemp("table") / "out"
    torch.set_num_threads(1)
    reproduce(scenes, out, methods=METHODS, report=False, **FAST)
    return out
