"""The tiny real dataset and one-view run of pyskick's test kit (``pyskick.testing``), under the
names these tests use."""

from __future__ import annotations

from pathlib import Path

import pytest

from pyskick.testing import tiny_train_config
from pyskick.training import TrainConfig, TrainData


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here on one thread (``one_thread``, pyskick.testing)."""


@pytest.fixture(scope="session")
def scenes(tiny_scenes: Path) -> TrainData:
    """The kit's 40 synthetic scenes (32 train, 4 val, 4 test), loaded."""
    return TrainData.from_file(tiny_scenes)


@pytest.fixture(scope="session")
def config() -> TrainConfig:
    """The kit's test-size ``cpu-demo`` config (batch 8, 2 pretraining epochs, 1 epoch)."""
    return tiny_train_config()


@pytest.fixture(scope="session")
def one_view(tiny_one_view: Path) -> Path:
    """The kit's one-view run, pretrained on those scenes with that config."""
    return tiny_one_view
