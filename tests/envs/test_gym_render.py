"""Gymnasium render modes and uint8 observations, and Stable-Baselines3's env builder."""

from __future__ import annotations

from pathlib import Path

import gymnasium
import matplotlib
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env

from pyskick.data.builtin import BUILTIN_DATASETS, cache_file_name, make_builtin
from pyskick.envs import GYM_ID
from pyskick.envs.gym import LookAroundGymEnv, LookAroundVectorEnv
from pyskick.envs.render import CURRENT_COLOUR, VISITED_COLOUR

n, N, M, C, H, W = 3, 2, 6, 3, 5, 5
CELL = H + 4  # a 2-pixel frame around each view
STAY = 7  # action (0, 0)
RIGHT = 8  # action (0, +1)


def grids() -> torch.Tensor:
    g = torch.Generator().manual_seed(4)
    return torch.randint(0, 256, (n, N, M, C, H, W), dtype=torch.uint8, generator=g)


def cell(image: np.ndarray, view: int) -> np.ndarray:
    """The framed cell of ``view`` in a rendered viewgrid."""
    row, col = divmod(view, M)
    return image[row * CELL : (row + 1) * CELL, col * CELL : (col + 1) * CELL]


def test_rgb_array_frames_the_visited_and_current_views() -> None:
    data = grids()
    env = gymnasium.make(GYM_ID, grids=data, render_mode="rgb_array")
    env.reset(seed=0, options={"index": 1, "start": 2})
    env.step(RIGHT)  # view 3
    image = env.render()
    assert image.dtype == np.uint8
    assert image.shape == (N * CELL, M * CELL, 3)
    for view in range(N * M):
        framed = cell(image, view)
        n_, m_ = divmod(view, M)
        # Every view is drawn in its cell, whatever its frame.
        assert np.array_equal(framed[2:-2, 2:-2], data[1, n_, m_].permute(1, 2, 0).numpy())
        expected = {2: VISITED_COLOUR, 3: CURRENT_COLOUR}.get(view, (255, 255, 255))
        assert tuple(framed[0, 0]) == expected, view
    env.close()


def test_human_mode_draws_in_a_matplotlib_window() -> None:
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.close("all")
    env = gymnasium.make(GYM_ID, grids=grids(), render_mode="human", T=2)
    env.reset(seed=0)
    assert len(plt.get_fignums()) == 1  # drawn at reset, without a render() call
    shown = plt.gcf().axes[0].images[0].get_array()
    assert np.array_equal(np.asarray(shown), env.unwrapped._episodes.frame(0))
    env.step(STAY)
    assert env.render() is None
    env.close()
    assert plt.get_fignums() == []


def test_vector_env_renders_one_picture_per_agent() -> None:
    envs = gymnasium.make_vec(GYM_ID, num_envs=3, grids=grids(), render_mode="rgb_array")
    assert envs.render() is None  # nothing before the first reset
    envs.reset(seed=1, options={"start": [0, 5, 11]})
    pictures = envs.render()
    assert len(pictures) == 3
    for picture, start in zip(pictures, [0, 5, 11], strict=True):
        assert tuple(cell(picture, start)[0, 0]) == CURRENT_COLOUR
    with pytest.raises(ValueError, match="renders only 'rgb_array'"):
        LookAroundVectorEnv(2, grids=grids(), render_mode="human")


def test_uint8_views_are_the_raw_channel_first_views() -> None:
    data = grids()
    env = gymnasium.make(GYM_ID, grids=data, obs_dtype="uint8", channel_mean=[100.0] * C)
    space = env.observation_space["view"]
    assert (space.low.min(), space.high.max(), space.shape, space.dtype) == (
        0,
        255,
        (C, H, W),
        np.uint8,
    )
    obs, _ = env.reset(seed=0, options={"index": 2, "start": 7})
    assert np.array_equal(obs["view"], data[2, 1, 1].numpy())
    obs, *_ = env.step(RIGHT)
    assert np.array_equal(obs["view"], data[2, 1, 2].numpy())
    assert env.observation_space.contains(obs)
    check_env(env.unwrapped)

    vector = LookAroundVectorEnv(2, grids=data.float(), obs_dtype="uint8")
    obs, _ = vector.reset(seed=0, options={"index": [0, 1], "start": [0, 1]})
    assert obs["view"].dtype == np.uint8
    assert np.array_equal(obs["view"][1], data[1, 0, 1].numpy())
    assert vector.observation_space.contains(obs)


def test_stable_baselines3_builds_the_env_with_its_defaults() -> None:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.preprocessing import is_image_space

    # SB3 asks for render_mode="rgb_array" (retrying without it only on TypeError).
    vec = make_vec_env(GYM_ID, n_envs=2, env_kwargs={"grids": grids(), "obs_dtype": "uint8"})
    obs = vec.reset()
    assert obs["view"].shape == (2, C, H, W)
    assert is_image_space(vec.observation_space["view"])
    obs, rewards, dones, _ = vec.step(np.array([STAY, RIGHT]))
    assert not dones.any()  # T = 4: the episodes go on
    assert rewards.tolist() == [0.0, 0.0]  # no reward maps: the maps reward pays nothing
    assert vec.get_images()[0].shape == (N * CELL, M * CELL, 3)
    vec.close()


def test_stable_baselines3_with_no_arguments_at_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stable_baselines3.common.env_util import make_vec_env

    # The default dataset is the built-in synthetic-scenes, read from the dataset cache: a
    # small one is put where the cache keeps it, so the test does not generate 2000 viewgrids.
    monkeypatch.setenv("PYSKICK_DATA_DIR", str(tmp_path))
    generate, num, seed = BUILTIN_DATASETS["synthetic-scenes"]
    make_builtin(
        "synthetic-scenes", tmp_path / cache_file_name("synthetic-scenes", generate, num, seed), 8
    )

    vec = make_vec_env(GYM_ID)  # float views, the maps reward (0), render_mode="rgb_array"
    obs = vec.reset()
    assert obs["view"].dtype == np.float32
    assert vec.render().ndim == 3
    vec.close()


def test_direct_env_checks_render_mode() -> None:
    env = LookAroundGymEnv(grids=grids(), render_mode="rgb_array")
    assert env.render() is None  # before the first reset
    env.reset(seed=0)
    assert env.render().shape == (N * CELL, M * CELL, 3)
