"""Gymnasium interfaces: the checker, registration, spaces, info, and the native vector env."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch
from gymnasium.utils.env_checker import check_env
from gymnasium.vector import AutoresetMode

from pyskick.envs import GYM_ID, LookAroundEnv
from pyskick.envs.gym import LookAroundGymEnv, LookAroundVectorEnv

n, N, M, C, H, W = 5, 4, 8, 3, 6, 6
MEAN = [119.16, 107.68, 95.12]


def dataset_grids() -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    return torch.randint(0, 256, (n, N, M, C, H, W), dtype=torch.uint8, generator=g)


def dataset_maps() -> torch.Tensor:
    g = torch.Generator().manual_seed(2)
    return torch.rand(n, N, M, generator=g) * 255


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"reward_maps": dataset_maps(), "known_azimuth": True},
        {"T": 2, "grids": dataset_grids()[:, :1]},  # a single elevation ring
        {"T": 6, "action_grid": (1, 3), "wrap_elevation": True, "reward_radius": 2},
    ],
)
def test_made_env_passes_the_gymnasium_checker(kwargs: dict) -> None:
    kwargs = {"grids": dataset_grids(), "channel_mean": MEAN, **kwargs}
    env = gymnasium.make(GYM_ID, **kwargs)
    check_env(env.unwrapped)  # spec set by make: every check (render modes too) runs, no warning
    env.close()


def test_direct_env_passes_the_checker() -> None:
    env = LookAroundGymEnv(grids=dataset_grids(), channel_mean=MEAN, seed=0)
    # A directly built env has no spec to remake it in each declared render mode.
    check_env(env, skip_render_check=True)


def test_registration_is_idempotent() -> None:
    import importlib

    import pyskick.envs

    importlib.reload(pyskick.envs)  # filterwarnings=error: a re-registration would fail here
    spec = gymnasium.spec(GYM_ID)
    # The factories resolve reward names into models, then build the pyskick.envs.gym classes.
    assert spec.entry_point == "pyskick.training.task_models:make_lookaround"
    assert spec.vector_entry_point == "pyskick.training.task_models:make_lookaround_vector"


def test_episode_through_gymnasium_make() -> None:
    maps = dataset_maps()
    env = gymnasium.make(GYM_ID, grids=dataset_grids(), channel_mean=MEAN, reward_maps=maps)
    obs, info = env.reset(seed=3, options={"index": 2, "start": 1 * M + 7})
    assert set(obs) == {"view", "proprio", "time"}  # the full grid is never observed
    assert obs["view"].shape == (C, H, W)
    assert obs["view"].dtype == np.float32
    assert obs["proprio"].tolist() == [0.0, 0.0, 1.0]
    assert obs["time"] == 0
    assert (info["index"], info["start"], info["position"]) == (2, 15, 15)
    assert info["full_viewgrid"].shape == (N, M, C, H, W)
    expected = (dataset_grids()[2].float() - torch.tensor(MEAN)[:, None, None]) / 255
    np.testing.assert_array_equal(info["full_viewgrid"], expected.numpy())
    np.testing.assert_array_equal(info["target"], torch.roll(expected, -7, dims=1).numpy())
    np.testing.assert_array_equal(obs["view"], expected[1, 7].numpy())
    total = 0.0
    # (0, +2) three times: (1, 7) -> (1, 1) -> (1, 3) -> (1, 5)
    for steps, action in enumerate((9, 9, 9), start=1):
        obs, reward, terminated, truncated, info = env.step(action)
        total += reward
        assert isinstance(reward, float)
        assert truncated is False
        assert terminated == (steps == 3)
        assert obs["time"] == steps
    assert info["position"] == 1 * M + 5
    assert total == pytest.approx(float(maps[2, 1, 1] + maps[2, 1, 3] + maps[2, 1, 5]))
    with pytest.raises(RuntimeError, match="budget of T=4"):
        env.step(7)


def test_seeded_resets_draw_the_same_viewgrids_and_starts() -> None:
    draws = []
    for _ in range(2):
        env = LookAroundGymEnv(grids=dataset_grids(), seed=11)
        draws.append(
            [(info["index"], info["start"]) for info in (env.reset()[1] for _ in range(8))]
        )
    assert draws[0] == draws[1]
    assert len(set(draws[0])) > 1
    env = LookAroundGymEnv(grids=dataset_grids())
    assert env.reset(seed=4)[1]["start"] == env.reset(seed=4)[1]["start"]


@pytest.mark.parametrize(
    ("options", "match"),
    [
        ({"index": n}, r"options\['index'\] must lie in \[0, 5\)"),
        ({"start": -1}, r"options\['start'\] must lie in \[0, 32\)"),
        ({"start": 1.5}, r"options\['start'\] must be integers"),
        ({"begin": 0}, r"unknown reset options \['begin'\]"),
    ],
)
def test_bad_reset_options_are_refused(options: dict, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        LookAroundGymEnv(grids=dataset_grids()).reset(options=options)


@pytest.mark.parametrize("action", [15, -1, 2.0, True, np.array([1, 2])])
def test_bad_actions_are_refused(action: object) -> None:
    env = LookAroundGymEnv(grids=dataset_grids())
    env.reset(seed=0)
    with pytest.raises(ValueError, match="action must"):
        env.step(action)  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"dataset": "x.h5"}, ValueError, "either dataset or grids"),
        ({"render_mode": "ansi"}, ValueError, "render_mode must be None or one of rgb_array"),
        ({"obs_dtype": "float64"}, ValueError, "obs_dtype must be one of float32, uint8"),
        ({"T": 1}, ValueError, "T >= 2, got 1"),
        ({"channel_mean": [1.0]}, ValueError, "3 channels but channel_mean has 1"),
        ({"reward_maps": torch.zeros(n, M, N)}, ValueError, r"reward_maps must have shape"),
        ({"reward_maps": torch.zeros(n, N, M, dtype=torch.int64)}, TypeError, "floating"),
    ],
)
def test_bad_construction_is_refused(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        LookAroundGymEnv(grids=dataset_grids(), **kwargs)


def test_bad_grids_are_refused() -> None:
    with pytest.raises(TypeError, match="uint8 or float32"):
        LookAroundGymEnv(grids=torch.zeros(1, N, M, 1, 2, 2, dtype=torch.int16))
    with pytest.raises(ValueError, match=r"\[n, N, M, C, H, W\]"):
        LookAroundGymEnv(grids=np.zeros((N, M, 1, 2, 2), dtype=np.uint8))
    with pytest.raises(ValueError, match=r"raw intensities in \[0, 255\]"):
        LookAroundGymEnv(grids=torch.full((1, N, M, 1, 2, 2), 256.0))


# ------------------------------------------------------------------ vector env
def test_vector_env_spaces_and_shapes() -> None:
    envs = gymnasium.make_vec(GYM_ID, num_envs=3, grids=dataset_grids(), channel_mean=MEAN)
    assert isinstance(envs, LookAroundVectorEnv)
    assert envs.metadata["autoreset_mode"] == AutoresetMode.DISABLED
    assert envs.single_action_space == gymnasium.spaces.Discrete(15)
    assert envs.action_space.shape == (3,)
    obs, info = envs.reset(seed=0)
    assert obs in envs.observation_space
    assert obs["view"].shape == (3, C, H, W)
    assert obs["proprio"].shape == (3, 3)
    assert obs["time"].tolist() == [0, 0, 0]
    assert info["full_viewgrid"].shape == (3, N, M, C, H, W)
    assert info["_full_viewgrid"].tolist() == [True] * 3
    for t in range(1, 4):
        obs, rewards, terminations, truncations, info = envs.step(envs.action_space.sample())
        assert obs in envs.observation_space
        assert rewards.shape == (3,)
        assert rewards.dtype == np.float32
        assert terminations.tolist() == [t == 3] * 3
        assert truncations.tolist() == [False] * 3
    with pytest.raises(RuntimeError, match="call reset"):
        envs.step(np.zeros(3, dtype=np.int64))
    envs.reset()
    envs.close()


def test_vector_rollouts_equal_the_batched_env() -> None:
    grids, maps = dataset_grids(), dataset_maps()
    envs = LookAroundVectorEnv(4, grids=grids, channel_mean=MEAN, reward_maps=maps, T=5)
    obs, info = envs.reset(seed=9)
    batched = LookAroundEnv(5, channel_mean=MEAN)
    rows = torch.from_numpy(info["index"])
    expected = batched.reset(
        grids[rows], starts=torch.from_numpy(info["start"]), reward_maps=maps[rows]
    )
    np.testing.assert_array_equal(info["target"], batched.target.numpy())
    rng = np.random.default_rng(0)
    for _ in range(4):
        np.testing.assert_array_equal(obs["view"], expected.view.numpy())
        np.testing.assert_array_equal(obs["proprio"], expected.proprio.numpy())
        np.testing.assert_array_equal(info["position"], expected.position.numpy())
        actions = rng.integers(15, size=4)
        obs, rewards, terminations, _, info = envs.step(actions)
        expected, reward, done = batched.step(torch.from_numpy(actions))
        np.testing.assert_array_equal(rewards, reward.numpy())
        assert terminations.tolist() == [done] * 4
    assert terminations.all()


def test_vector_env_reset_options() -> None:
    envs = LookAroundVectorEnv(3, grids=dataset_grids())
    obs, info = envs.reset(
        options={"index": [4, 0, 4], "start": 31, "reset_mask": np.ones(3, bool)}
    )
    assert info["index"].tolist() == [4, 0, 4]
    assert info["start"].tolist() == [31, 31, 31]
    assert obs["proprio"][:, 2].tolist() == [3.0, 3.0, 3.0]
    with pytest.raises(ValueError, match="resets all sub-environments together"):
        envs.reset(options={"reset_mask": np.array([True, False, True])})
    with pytest.raises(ValueError, match=r"options\['index'\] must have shape \(3,\)"):
        envs.reset(options={"index": [0, 1]})


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (np.array([0, 1]), r"actions must have shape \(3,\)"),
        (np.array([0.0, 1.0, 2.0]), "actions must be integers"),
        (np.array([0, 1, 15]), r"actions must lie in \[0, 15\)"),
    ],
)
def test_vector_env_refuses_bad_actions(actions: np.ndarray, match: str) -> None:
    envs = LookAroundVectorEnv(3, grids=dataset_grids())
    envs.reset(seed=0)
    with pytest.raises(ValueError, match=match):
        envs.step(actions)


def test_vector_env_refuses_bad_sizes() -> None:
    with pytest.raises(ValueError, match="num_envs must be an int >= 1"):
        LookAroundVectorEnv(0, grids=dataset_grids())
