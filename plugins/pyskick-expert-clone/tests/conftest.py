"""A tiny real dataset (rendered synthetic scenes in HDF5) and a one-view model trained on it."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pyskick.data.builtin import make_builtin
from pyskick.training import TrainConfig, TrainData, pretrain, train_preset


@pytest.fixture(autouse=True)
def _one_thread():
    """Keep the shared machine responsive and timings stable."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture(scope="session")
def scenes_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """40 synthetic scenes (4 x 8 RGB views of 32 x 32): 32 train, 4 val, 4 test."""
    return make_builtin("synthetic-scenes", tmp_path_factory.mktemp("data") / "s.h5", 40, 1)


@pytest.fixture(scope="session")
def scenes(scenes_file: Path) -> TrainData:
    return TrainData.from_file(scenes_file)


@pytest.fixture(scope="session")
def config() -> TrainConfig:
    return train_preset("cpu-demo").replace(batch_size=8, pretrain_epochs=2, epochs=1)


@pytest.fixture(scope="session")
def one_view(tmp_path_factory: pytest.TempPathFactory, scenes: TrainData, config: TrainConfig):
    """A one-view (T = 1) run folder trained for 2 epochs on :func:`scenes`."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        return pretrain(config, tmp_path_factory.mktemp("one-view"), scenes).run_dir
    finally:
        torch.set_num_threads(threads)
