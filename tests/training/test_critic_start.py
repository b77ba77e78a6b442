"""A learned critic starts at the scale of the returns (docs/deviations.md K6)."""

from __future__ import annotations

import pytest
import torch

from pyskick.training import trainer as trainer_module
from pyskick.training.losses import episode_rewards
from pyskick.training.returns import reward_to_go
from pyskick.training.trainer import Trainer, pretrain


@pytest.fixture
def pretrained(tmp_path, tiny_config, tiny_data):
    return pretrain(tiny_config, tmp_path / "pre", tiny_data).run_dir


@pytest.mark.parametrize("critic", ["critic", "asymm-critic"])
def test_first_critic_loss_is_the_variance_of_the_returns(
    tmp_path, pretrained, tiny_config, tiny_data, monkeypatch, critic
):
    calls = []
    loss = trainer_module.completion_loss

    def recording(rollout, **kwargs):
        calls.append((rollout, kwargs))
        return loss(rollout, **kwargs)

    monkeypatch.setattr(trainer_module, "completion_loss", recording)
    config = tiny_config.replace(epochs=1, critic=critic)
    trainer = Trainer(config, tmp_path / "t", tiny_data, stage="train", init=pretrained)
    head = trainer.critic.output_layer
    assert torch.count_nonzero(head.weight) == 0
    assert float(head.bias.detach()) == 0.0
    assert not trainer.critic_calibrated
    trainer.train_epoch(0)
    assert trainer.critic_calibrated
    rollout, kwargs = calls[0]
    returns = reward_to_go(episode_rewards(rollout, kwargs["sidekick_scale"])).detach()
    # Every value of the first batch is the batch's mean return ...
    assert torch.allclose(rollout.values.detach(), returns.mean().expand_as(returns), atol=1e-7)
    # ... so the critic's first loss is coeff * (T - 1) * the returns' (population) variance,
    # not the square of a value head's spread (about 1 for an xavier output layer).
    steps = returns.shape[0]
    first = loss(rollout, **kwargs).critic
    variance = returns.var(unbiased=False)
    assert float(first) == pytest.approx(config.critic_coeff * steps * float(variance), rel=1e-4)
    assert float(variance) < 1e-3
    # The calibration is saved: a resumed run does not recalibrate.
    assert trainer.state_dict(0)["critic_calibrated"] is True


def test_without_a_learned_critic_nothing_is_calibrated(
    tmp_path, pretrained, tiny_config, tiny_data
):
    trainer = Trainer(
        tiny_config.replace(epochs=1), tmp_path / "t", tiny_data, stage="train", init=pretrained
    )
    assert trainer.critic is None
    assert trainer.critic_calibrated
