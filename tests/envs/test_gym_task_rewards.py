"""Task rewards computed inside the Gymnasium env, checked against pyskick's own rollouts."""

from __future__ import annotations

import gymnasium
import numpy as np
import pytest
import torch

from pyskick import progress
from pyskick.envs import GYM_ID, collect_rollout, make_env
from pyskick.files import cache_root
from pyskick.run_dir import load_policy
from pyskick.sidekicks.coverage import one_view_coverage
from pyskick.training.task_models import cached_random_actions_run

ACTIONS = (8, 2)  # (0, +1), then (-1, 0): T = 3 glimpses
T = 3  # the reward models' (tests/envs/conftest.py)


def lookaround(models, **kwargs) -> gymnasium.Env:
    """LookAround-v0 on the test split of the reward models' data file, T = T."""
    return gymnasium.make(GYM_ID, dataset=models.data_file, split="test", T=T, **kwargs)


def play(env: gymnasium.Env, index: int, start: int, actions=ACTIONS) -> list[float]:
    """Rewards of one episode on viewgrid ``index`` from ``start``."""
    env.reset(seed=0, options={"index": index, "start": start})
    rewards = []
    for action in actions:
        _, reward, terminated, _, _ = env.step(action)
        rewards.append(reward)
    assert terminated
    return rewards


def pyskick_errors(models, index: int, start: int) -> torch.Tensor:
    """``[T]`` MSE after each glimpse of the same episode, by pyskick's evaluation rollout."""
    from pyskick.data import ViewgridFile

    source = ViewgridFile(models.data_file)
    grids = source.split("test").load()[index : index + 1]
    policy = load_policy(models.reconstruction).policy
    env = make_env(policy.config, T, source.spec.channel_mean)
    forced = torch.tensor(ACTIONS)[:, None]
    rollout = collect_rollout(
        policy,
        env,
        grids,
        mode="greedy",
        starts=torch.tensor([start]),
        demonstrations=(forced, torch.ones_like(forced, dtype=torch.bool)),
        paste=True,
    )
    return rollout.rec_errors[:, 0].detach()


@pytest.mark.parametrize("mode", ["final", "improvement"])
def test_reconstruction_reward_is_the_papers_task_loss(reward_models, mode: str) -> None:
    assert reward_models.T == T
    env = lookaround(
        reward_models,
        reward="reconstruction",
        reward_mode=mode,
        reward_training=reward_models.training,
    )
    for index, start in [(0, 0), (5, 13)]:
        rewards = play(env, index, start)
        errors = pyskick_errors(reward_models, index, start)
        if mode == "final":
            assert rewards[:-1] == [0.0] * (T - 2)
            assert rewards[-1] == pytest.approx(-1000 * float(errors[-1]), rel=1e-4)
        else:
            expected = (1000 * (errors[:-1] - errors[1:])).tolist()
            assert rewards == pytest.approx(expected, rel=1e-4, abs=1e-4)
    assert env.unwrapped.task_reward.policy.training is False  # frozen: eval mode


def test_reconstruction_reward_with_an_explicit_model_and_its_picture(reward_models) -> None:
    env = lookaround(
        reward_models,
        reward="reconstruction",
        reward_model=reward_models.reconstruction,
        render_mode="rgb_array",
    )
    rewards = play(env, 2, 4)
    assert rewards[-1] == pytest.approx(-1000 * float(pyskick_errors(reward_models, 2, 4)[-1]))
    picture = env.render()
    # The reconstruction sits to the right of the viewgrid: wider than a viewgrid alone.
    cell = 16 + 4
    assert picture.shape == (3 * cell, 6 * cell + 8 + 6 * cell, 3)


def test_default_model_is_trained_once_into_the_cache(reward_models) -> None:
    class Recorder:
        def __init__(self) -> None:
            self.names: list[str] = []

        def started(self, stage: progress.Stage) -> None:
            self.names.append(stage.name)

        def advanced(self, stage: progress.Stage, n: int) -> None:
            pass

        def finished(self, stage: progress.Stage) -> None:
            pass

    recorder = Recorder()
    assert reward_models.reconstruction.parent == cache_root() / "random-actions"
    before = (reward_models.reconstruction / "latest.pt").stat().st_mtime_ns
    with progress.reporting(recorder):
        again = cached_random_actions_run(reward_models.data_file, T, reward_models.training)
    assert again == reward_models.reconstruction
    assert (again / "latest.pt").stat().st_mtime_ns == before  # reused, not retrained
    # A finished model is reused at once: no stage to show, the data not even loaded (the
    # training's own stage and stderr lines: tests/envs/test_gym_reward_model_notice.py).
    assert recorder.names == []
    saved = load_policy(again)
    assert saved.config.actor == "random"
    assert saved.config.T == T


def test_coverage_reward_pays_the_gain_in_saturated_coverage(reward_models) -> None:
    from pyskick.data import ViewgridFile

    source = ViewgridFile(reward_models.data_file)
    env = lookaround(
        reward_models,
        reward="coverage",
        reward_model=reward_models.one_view,
    )
    grids = source.split("test").load()
    U = one_view_coverage(
        reward_models.one_view, grids, channel_mean=list(source.spec.channel_mean)
    ).double()
    M = grids.shape[2]
    for index, start in [(1, 0), (7, 10)]:
        rewards = play(env, index, start)
        env_views = [start]
        position = start
        for action in ACTIONS:
            d_elev, d_azim = divmod(action, 5)
            n = min(max(position // M + d_elev - 1, 0), grids.shape[1] - 1)
            m = (position % M + d_azim - 2) % M
            position = n * M + m
            env_views.append(position)

        def cov(views: list[int], index: int = index) -> float:
            summed = U[index, sorted(set(views))].sum(0)
            return float(summed.clamp(max=1).sum() / U.shape[1])

        expected = [cov(env_views[: k + 2]) - cov(env_views[: k + 1]) for k in range(T - 1)]
        assert rewards == pytest.approx(expected, abs=1e-6)
        assert all(r >= 0 for r in rewards)


def test_coverage_reward_repeats_pay_nothing(reward_models) -> None:
    env = lookaround(
        reward_models,
        reward="coverage",
        reward_model=reward_models.one_view,
    )
    assert play(env, 3, 7, actions=(7, 7)) == [0.0, 0.0]  # staying sees nothing new


def test_maps_reward_is_the_default() -> None:
    grids = torch.randint(0, 256, (2, 2, 4, 1, 4, 4), dtype=torch.uint8)
    maps = torch.arange(16, dtype=torch.float32).view(2, 2, 4)
    env = gymnasium.make(GYM_ID, grids=grids, reward_maps=maps, T=2)
    env.reset(options={"index": 1, "start": 0})
    _, reward, *_ = env.step(8)  # to view 1
    assert reward == 9.0
    named = gymnasium.make(GYM_ID, grids=grids, reward_maps=maps, T=2, reward="maps")
    named.reset(options={"index": 1, "start": 0})
    assert named.step(8)[1] == 9.0


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"reward": "curiosity"}, "reward must be one of maps, reconstruction, coverage"),
        ({"reward": "reconstruction"}, "with grids needs reward_model"),
        ({"reward": "coverage"}, "with grids needs reward_model"),
        ({"reward": "reconstruction", "reward_mode": "best"}, "reward_mode must be one of"),
    ],
)
def test_bad_rewards_are_refused(kwargs: dict, match: str) -> None:
    grids = torch.randint(0, 256, (2, 3, 6, 1, 16, 16), dtype=torch.uint8)
    with pytest.raises(ValueError, match=match):
        gymnasium.make(GYM_ID, grids=grids, T=T, **kwargs)


def test_a_model_for_other_grids_is_refused(reward_models) -> None:
    grids = np.zeros((2, 2, 6, 1, 16, 16), dtype=np.uint8)
    with pytest.raises(ValueError, match=r"reconstructs \[N, M, C, H, W\] = \[3, 6, 1, 16, 16\]"):
        gymnasium.make(
            GYM_ID,
            grids=grids,
            T=T,
            reward="reconstruction",
            reward_model=reward_models.reconstruction,
        )


def test_reward_model_and_env_must_normalise_alike() -> None:
    import dataclasses

    from pyskick.envs.task_rewards import ReconstructionReward
    from pyskick.models import PRESETS, CompletionPolicy

    config = dataclasses.replace(
        PRESETS["cpu-demo"],
        n_elevations=3,
        n_azimuths=6,
        channels=1,
        view_size=16,
        mean_subtract=False,
    )
    task = ReconstructionReward(CompletionPolicy(config))
    shape = (2, 3, 6, 1, 16, 16)
    with pytest.raises(ValueError, match="trained without mean subtraction"):
        task.check_grids(shape, known_azimuth=False, mean_subtracted=True)
    with pytest.raises(ValueError, match="known_azimuth=False but the environment"):
        task.check_grids(shape, known_azimuth=True, mean_subtracted=False)
    task.check_grids(shape, known_azimuth=False, mean_subtracted=False)  # a fit: no error


def test_reconstruction_reward_from_an_export_folder(reward_models, tmp_path) -> None:
    """`pyskick export` of the reward model loads in the env like the run (safetensors)."""
    import subprocess
    import sys

    export = tmp_path / "export"
    proc = subprocess.run(
        [
            sys.executable, "-m", "pyskick", "export", str(reward_models.reconstruction),
            "--out", str(export), "--dataset", str(reward_models.data_file),
        ],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert (export / "model.safetensors").is_file()
    paid = {}
    for name, model in (("run", reward_models.reconstruction), ("export", export)):
        env = lookaround(
            reward_models,
            reward="reconstruction",
            reward_model=model,
        )
        paid[name] = play(env, 2, 4)
    assert paid["export"] == paid["run"]
    assert paid["export"][-1] < 0
