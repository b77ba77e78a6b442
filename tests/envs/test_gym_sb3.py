"""Stable-Baselines3's PPO learns the look-around task from the env's reconstruction reward.

PPO (``MultiInputPolicy``) trains for a couple of thousand steps on CPU against the default
reward model of tests/envs/conftest.py (trained tiny in the session's cache); then it and
uniformly random motions play the same held-out viewgrids from the same starts, and the paired
differences of their final reconstruction errors must favour PPO (sign-flip p < 0.05, the
paired statistics of ``pyskick compare``).
"""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from pyskick.envs import GYM_ID
from pyskick.evaluation.compare import paired_samples

TIMESTEPS = 2000


def final_errors(env: gymnasium.Env, choose, pairs: list[tuple[int, int]]) -> np.ndarray:
    """Final reconstruction MSE (×1) of one episode per ``(index, start)``."""
    errors = []
    for index, start in pairs:
        obs, _ = env.reset(options={"index": index, "start": start})
        terminated = False
        while not terminated:
            obs, reward, terminated, _, _ = env.step(int(choose(obs)))
        errors.append(-reward / 1000.0)  # "final": -1000 · MSE on the last move
    return np.asarray(errors)


@pytest.mark.parametrize("seed", [0])
def test_ppo_beats_random_motions_on_held_out_viewgrids(
    reward_models, seed: int, tmp_path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from stable_baselines3 import PPO
    from stable_baselines3.common.env_util import make_vec_env

    # SB3 makes a log folder for every learn() even when it logs nothing: not in the real /tmp.
    monkeypatch.setenv("SB3_LOGDIR", str(tmp_path / "sb3"))
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        settings = {
            "dataset": reward_models.data_file,
            "T": reward_models.T,
            "reward": "reconstruction",
            "reward_training": reward_models.training,  # the cached default model
        }
        train_envs = make_vec_env(
            GYM_ID, n_envs=8, seed=seed, env_kwargs={**settings, "split": "train"}
        )
        model = PPO(
            "MultiInputPolicy",
            train_envs,
            n_steps=32,
            batch_size=64,
            n_epochs=10,
            learning_rate=3e-3,
            gamma=1.0,  # the episode's return is its final reward
            policy_kwargs={"net_arch": [64, 64]},
            seed=seed,
            device="cpu",
        )
        model.learn(total_timesteps=TIMESTEPS)
        train_envs.close()

        test_env = gymnasium.make(GYM_ID, split="test", **settings)
        n_test = test_env.unwrapped.grids.shape[0]
        n_views = test_env.unwrapped.grids.shape[1] * test_env.unwrapped.grids.shape[2]
        pairs = [(index, start) for index in range(n_test) for start in range(n_views)]
        rng = np.random.default_rng(seed)
        n_actions = test_env.action_space.n
        ppo = final_errors(test_env, lambda obs: model.predict(obs, deterministic=True)[0], pairs)
        random = final_errors(test_env, lambda obs: rng.integers(n_actions), pairs)
    finally:
        torch.set_num_threads(threads)

    stat = paired_samples(random, ppo)  # positive: PPO's error is lower
    assert stat.n == len(pairs) == 12 * 18
    assert stat.diff_x1000 > 0, stat
    assert stat.p < 0.05, stat
    assert stat.sign_flip_p is not None
    assert stat.sign_flip_p < 0.05, stat
