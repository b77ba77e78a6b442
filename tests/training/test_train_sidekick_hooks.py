"""The two sidekick extension points change training as they should."""

from __future__ import annotations

import itertools
from typing import Any

import torch

from pyskick.envs import LookAroundEnv
from pyskick.sidekicks import NoSidekick, Sidekick
from pyskick.training.loggers import read_metrics
from pyskick.training.trainer import Trainer

UP = list(range(5))  # actions with d_elev = -1 (3 x 5 grid, row-major over d_elev)


class TopRowRewards(Sidekick):
    """Pays 255 for every view of the top elevation row; the scale halves every epoch."""

    name = "top-row"

    def __init__(self, scale: float) -> None:
        self.scale = scale
        self.halvings = 0

    def prepare(self, grids, *, T, device):
        self.shape = grids.shape[1:3]
        self.device = device

    def reward_maps(self, indices, epoch):
        maps = torch.zeros(indices.shape[0], *self.shape, device=self.device)
        maps[:, 0] = 255.0
        return maps

    def reward_scale(self, epoch):
        return self.scale / 2**self.halvings

    def on_epoch_end(self, epoch):
        self.halvings += 1

    def state_dict(self) -> dict[str, Any]:
        return {"halvings": self.halvings}

    def load_state_dict(self, state):
        self.halvings = state["halvings"]


class AlwaysDemonstrate(Sidekick):
    """Demonstrates one fixed action at every step."""

    name = "fixed-demo"

    def __init__(self, action: int) -> None:
        self.action = action
        self.seen: list[torch.Tensor] = []

    def prepare(self, grids, *, T, device):
        self.T = T

    def demonstrations(self, indices, starts, epoch):
        self.seen.append(starts.clone())
        B = indices.shape[0]
        actions = torch.full((self.T - 1, B), self.action, dtype=torch.int64)
        return actions, torch.ones(self.T - 1, B, dtype=torch.bool)


@torch.no_grad()
def _first_step_probs(trainer: Trainer) -> torch.Tensor:
    # Batch statistics, as in training: a few epochs leave BN running statistics unsettled.
    policy = trainer.policy.train()
    env = LookAroundEnv(trainer.T, channel_mean=list(trainer.data.channel_mean))
    grids = trainer.data.train.repeat_interleave(12, 0)
    obs = env.reset(grids, starts=torch.arange(12).repeat(trainer.data.train.shape[0]))
    out = policy.step(obs.view, obs.proprio, 0, azimuth=obs.position % 4)
    return out.probs.mean(0)


def _fit(tmp_path, config, data, sidekick, name):
    trainer = Trainer(config, tmp_path / name, data, stage="train", sidekick=sidekick)
    trainer.fit()
    return trainer


def test_reward_maps_pull_the_policy_towards_rewarding_views(tmp_path, tiny_config, tiny_data):
    config = tiny_config.replace(T=2, epochs=6, lr=3e-3, reward_radius=0)
    plain = _fit(tmp_path, config, tiny_data, NoSidekick(), "plain")
    sidekick = TopRowRewards(scale=0.1)
    shaped = _fit(tmp_path, config, tiny_data, sidekick, "shaped")
    up_plain = float(_first_step_probs(plain)[UP].sum())
    up_shaped = float(_first_step_probs(shaped)[UP].sum())
    assert up_shaped > up_plain + 0.1
    records = read_metrics(tmp_path / "shaped" / "metrics.jsonl")
    assert [r["sidekick/reward_scale"] for r in records[:3]] == [0.1, 0.05, 0.025]
    assert records[0]["baseline/intrinsic_mean"] > 0
    assert sidekick.halvings == 6


def test_demonstrations_are_imitated_without_policy_gradient(tmp_path, tiny_config, tiny_data):
    config = tiny_config.replace(T=3, epochs=6, lr=1e-2, supervised_scale=1.0)
    sidekick = AlwaysDemonstrate(action=12)
    trainer = _fit(tmp_path, config, tiny_data, sidekick, "demo")
    assert float(_first_step_probs(trainer)[12]) > 3 / 15  # from uniform to > 3x uniform
    records = read_metrics(tmp_path / "demo" / "metrics.jsonl")
    assert all(r["train/policy_loss"] == 0.0 and r["train/entropy"] > 0 for r in records)
    nll = [r["train/supervised_loss"] for r in records]
    assert all(a > b for a, b in itertools.pairwise(nll))
    assert len(sidekick.seen) == 6 * 2  # 6 epochs x 2 batches, starts passed every batch


def test_sidekick_state_survives_resume(tmp_path, tiny_config, tiny_data):
    config = tiny_config.replace(T=2, epochs=1)
    _fit(tmp_path, config, tiny_data, TopRowRewards(scale=0.1), "run")
    resumed_sidekick = TopRowRewards(scale=0.1)
    trainer = Trainer(
        config.replace(epochs=2),
        tmp_path / "run",
        tiny_data,
        stage="train",
        resume=True,
        sidekick=resumed_sidekick,
    ).setup()
    assert resumed_sidekick.halvings == 1
    trainer.fit()
    records = read_metrics(tmp_path / "run" / "metrics.jsonl")
    assert [r["sidekick/reward_scale"] for r in records] == [0.1, 0.05]
