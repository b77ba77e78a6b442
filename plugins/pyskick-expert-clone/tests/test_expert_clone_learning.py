"""The expert learns: on its training grids its greedy motions beat uniform random ones."""

from __future__ import annotations

from pathlib import Path

import torch
from pyskick_expert_clone.training import (
    ExpertSettings,
    expert_trajectories,
    load_one_view,
    train_expert,
)

from pyskick.actors import Actor
from pyskick.evaluation import evaluate_policy
from pyskick.training import TrainData

CPU = torch.device("cpu")


def test_greedy_expert_beats_random_motions(one_view: Path, scenes: TrainData) -> None:
    policy = load_one_view(one_view, CPU)
    grids, mean, T = scenes.train[:8], scenes.channel_mean, 3
    settings = ExpertSettings(
        epochs=80, batch_size=8, lr=3e-3, weight_decay=1e-6, grad_clip=10.0,
        lambda_entropy=1e-4, seed=0,
    )  # fmt: skip
    expert, history = train_expert(
        policy, grids, T=T, channel_mean=mean, settings=settings, device=CPU
    )
    assert len(history) == 80
    assert history[-1].entropy < history[0].entropy  # it commits to motions
    _, expert_errors = expert_trajectories(
        policy, expert, grids, T=T, channel_mean=mean, device=CPU
    )
    _, random_errors = expert_trajectories(
        policy, expert, grids, T=T, channel_mean=mean, device=CPU, mode="random"
    )
    # Same grids, same 32 starts each: the expert is better on average and on most episodes.
    assert expert_errors.mean() < 0.98 * random_errors.mean()
    assert (expert_errors < random_errors).float().mean() > 0.6


def test_random_episodes_match_the_library_evaluation(one_view: Path, scenes: TrainData) -> None:
    """The episode runner (agent order, pasting, error) is the library's: replaying its random
    motions, ``evaluate_policy`` gives the same per-start errors."""
    policy = load_one_view(one_view, CPU)
    grids, mean = scenes.train[:2], scenes.channel_mean
    settings = ExpertSettings(
        epochs=1, batch_size=2, lr=1e-3, weight_decay=0.0, grad_clip=10.0, lambda_entropy=0.0,
        seed=0,
    )  # fmt: skip
    expert, _ = train_expert(policy, grids, T=3, channel_mean=mean, settings=settings, device=CPU)
    actions, errors = expert_trajectories(
        policy, expert, grids, T=3, channel_mean=mean, device=CPU, mode="random", seed=4
    )
    assert actions.shape == (2, 32, 2)
    reference = evaluate_policy(
        policy, grids, channel_mean=mean, T=3, metric="adv", actor=Replay(actions)
    )
    torch.testing.assert_close(errors.double(), reference.per_start, rtol=1e-5, atol=1e-7)


class Replay(Actor):
    """Forces the motions of ``trajectories`` ``[n, V, T-1]`` (adv: start s is view s)."""

    name = "replay"

    def __init__(self, trajectories: torch.Tensor) -> None:
        self.trajectories = trajectories

    def mode(self, *, training: bool) -> str:
        return "greedy"  # unused: every motion is forced

    def forced_actions(self, indices: torch.Tensor, starts: torch.Tensor) -> torch.Tensor:
        return self.trajectories[indices, starts].T
