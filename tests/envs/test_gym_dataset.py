"""The Gymnasium env over an HDF5 dataset in the authors' layout, read through pyskick.data."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from pyskick.envs.gym import LookAroundGymEnv, LookAroundVectorEnv

pytest.importorskip("pyskick.data", reason="pyskick.data (the dataset readers) is not installed")

N, M, C, S = 4, 8, 3, 32
MEAN = [119.16, 107.68, 95.12]


@pytest.fixture
def scenes_file(tmp_path: Path) -> tuple[Path, dict[str, np.ndarray]]:
    """A small SUN360-shaped file: uint8 [n, 4, 8, 3, 32, 32] splits with pyskick's attributes."""
    rng = np.random.default_rng(0)
    splits = {
        name: rng.integers(0, 256, (count, N, M, C, S, S), dtype=np.uint8)
        for name, count in (("train", 3), ("val", 2), ("test", 2))
    }
    path = tmp_path / "scenes.h5"
    with h5py.File(path, "w") as f:
        for name, data in splits.items():
            f.create_dataset(name, data=data)
        f.attrs["n_elevations"] = N
        f.attrs["n_azimuths"] = M
        f.attrs["fov_deg"] = 60.0
        f.attrs["elevations_deg"] = np.linspace(45.0, -45.0, N)
        f.attrs["azimuths_deg"] = np.arange(M) * 45.0
        f.attrs["channel_mean"] = np.array(MEAN)
        f.attrs["source"] = "test"
    return path, splits


def normalised(data: np.ndarray) -> np.ndarray:
    return ((data.astype(np.float32) - np.array(MEAN, np.float32)[:, None, None]) / 255).astype(
        np.float32
    )


def test_gym_env_reads_the_split_and_the_files_channel_mean(scenes_file: tuple) -> None:
    path, splits = scenes_file
    env = LookAroundGymEnv(str(path), split="val", seed=0)
    assert env.observation_space["view"].shape == (C, S, S)
    for index in range(2):
        obs, info = env.reset(options={"index": index, "start": 3})
        np.testing.assert_allclose(
            info["full_viewgrid"], normalised(splits["val"][index]), rtol=0, atol=1e-6
        )
        np.testing.assert_allclose(obs["view"], normalised(splits["val"][index][0, 3]), atol=1e-6)


def test_vector_env_draws_rows_of_the_split(scenes_file: tuple) -> None:
    path, splits = scenes_file
    envs = LookAroundVectorEnv(4, path, split="train", seed=0)
    _, info = envs.reset()
    assert set(info["index"].tolist()) <= {0, 1, 2}
    np.testing.assert_allclose(
        info["full_viewgrid"], normalised(splits["train"][info["index"]]), atol=1e-6
    )
