"""Tiny trained runs, their data file, and PNG checks shared by the visualisation tests."""

from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

import numpy as np
import pytest
import torch
from PIL import Image

from pyskick.config import train_preset
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.spec import GridSpec
from pyskick.run_dir import RunDir
from pyskick.training.data import TrainData
from pyskick.training.trainer import pretrain, train

N, M, C, H = 3, 4, 1, 16
MEAN = (120.0,)


def smooth_grids(n: int, seed: int, size: int = H) -> torch.Tensor:
    """``[n, 3, 4, 1, size, size]`` uint8 smooth random fields (learnable reconstructions)."""
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, N * M * C, 4, 4, generator=generator)
    fine = torch.nn.functional.interpolate(coarse, size=size, mode="bilinear", align_corners=False)
    return (fine.view(n, N, M, C, size, size) * 255).round().to(torch.uint8)


def tiny_spec(size: int = H) -> GridSpec:
    """The geometry of :func:`smooth_grids`."""
    return GridSpec(
        n_elevations=N,
        n_azimuths=M,
        channels=C,
        view_size=size,
        elevations_deg=(30.0, 0.0, -30.0),
        azimuths_deg=(0.0, 90.0, 180.0, 270.0),
        fov_deg=45.0,
        channel_mean=MEAN,
        preset="custom",
    )


def write_tiny_dataset(path: Path, size: int = H) -> Path:
    """A viewgrid file of smooth fields: 16 train, 6 val (the runs' data), 5 test."""
    splits = {
        "train": smooth_grids(16, seed=1, size=size),
        "val": smooth_grids(6, seed=2, size=size),
        "test": smooth_grids(5, seed=3, size=size),
    }
    return write_viewgrids(path, splits, tiny_spec(size), source="tests/viz smooth random fields")


class TinyRuns(NamedTuple):
    one_view: Path
    ltla: Path
    data: TrainData
    dataset: Path


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """Every test here on one thread (``one_thread``, pyskick.testing)."""


@pytest.fixture(scope="session")
def tiny_runs(tmp_path_factory: pytest.TempPathFactory) -> TinyRuns:
    """A one-view run and a T = 3 learned-actor run started from it (2 epochs each)."""
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("viz-runs")
    data = TrainData(smooth_grids(16, seed=1), smooth_grids(6, seed=2), MEAN)
    config = train_preset("cpu-demo").replace(
        batch_size=8, epochs=2, pretrain_epochs=2, T=3, eval_batch_size=64
    )
    one_view = pretrain(config, root / "one", data).run_dir
    ltla = train(config, root / "ltla", data, init=one_view).run_dir
    dataset = write_tiny_dataset(root / "tiny.h5")
    # Runs trained from grids in memory: the file they stand for is recorded by hand.
    with RunDir(one_view).locked() as run:
        run.record_dataset(dataset)
    with RunDir(ltla).locked() as run:
        run.record_dataset(dataset, init=one_view)
    torch.set_num_threads(threads)
    return TinyRuns(one_view, ltla, data, dataset)


def _assert_real_png(path: Path, *, min_size: tuple[int, int] = (200, 150)) -> np.ndarray:
    """The PNG exists, is at least ``min_size`` (width, height) and is not one flat colour."""
    assert path.is_file(), path
    with Image.open(path) as image:
        assert image.format == "PNG"
        assert image.width >= min_size[0], image.size
        assert image.height >= min_size[1], image.size
        pixels = np.asarray(image.convert("RGB"))
    assert pixels.std() > 5.0, f"{path} looks blank"
    return pixels


@pytest.fixture(name="assert_real_png")
def _assert_real_png_fixture():
    """The PNG check (test modules cannot import conftest)."""
    return _assert_real_png


@pytest.fixture(name="write_tiny_dataset")
def _write_tiny_dataset_fixture():
    """The :func:`write_tiny_dataset` factory."""
    return write_tiny_dataset
