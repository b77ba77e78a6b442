"""A learned critic starts where the average baseline is (residual, the default) or at the
scale of the returns (``critic_residual = false``; docs/deviations.md K6)."""

from __future__ import annotations

import pytest
import torch

from pyskick.training.losses import completion_loss, episode_rewards
from pyskick.training.returns import reward_to_go
from pyskick.training.trainer import Trainer


def returns_of(rollout, kwargs):
    return reward_to_go(episode_rewards(rollout, kwargs["sidekick_scale"])).detach()


@pytest.mark.parametrize("critic", ["critic", "asymm-critic"])
def test_residual_critic_starts_as_the_average_baseline(
    tmp_path, pretrained, tiny_config, tiny_data, recorded, critic
):
    def first_batch(config, out):
        trainer = Trainer(config, tmp_path / out, tiny_data, stage="train", init=pretrained)
        trainer.setup()
        first = len(recorded)
        trainer.train_epoch(0)
        return trainer, recorded[first]

    config = tiny_config.replace(epochs=1)
    _, (plain_rollout, plain_kwargs) = first_batch(config, "plain")
    residual, (rollout, kwargs) = first_batch(config.replace(critic=critic), "residual")
    assert residual.config.critic_residual
    # The critic's share of every first value is zero: its values are the average baseline's,
    assert torch.count_nonzero(rollout.values.detach()) == 0
    assert torch.equal(kwargs["baseline"], plain_kwargs["baseline"])
    # so its policy-gradient term is REINFORCE's with that baseline (same data, same actions),
    assert torch.equal(rollout.actions, plain_rollout.actions)
    ours, theirs = (
        completion_loss(rollout, **kwargs),
        completion_loss(plain_rollout, **plain_kwargs),
    )
    assert float(ours.policy) == pytest.approx(float(theirs.policy), rel=1e-5, abs=1e-9)
    # and it learns the residual: its loss is coeff * sum_t mean_b (R_t - b_t)^2.
    returns = returns_of(rollout, kwargs)
    residuals = returns - kwargs["baseline"][:, None]
    expected = residual.config.critic_coeff * residuals.pow(2).mean(1).sum()
    assert float(ours.critic) == pytest.approx(float(expected), rel=1e-4)
    assert float(ours.critic) > 0.0


@pytest.mark.parametrize("critic", ["critic", "asymm-critic"])
def test_critic_of_returns_first_loss_is_their_variance(
    tmp_path, pretrained, tiny_config, tiny_data, recorded, critic
):
    config = tiny_config.replace(epochs=1, critic=critic, critic_residual=False)
    trainer = Trainer(config, tmp_path / "t", tiny_data, stage="train", init=pretrained).setup()
    head = trainer.critic.output_layer
    assert torch.count_nonzero(head.weight) == 0
    assert float(head.bias.detach()) == 0.0
    assert not trainer.critic_calibrated
    trainer.train_epoch(0)
    assert trainer.critic_calibrated
    rollout, kwargs = recorded[0]
    assert kwargs["baseline"] is None
    returns = returns_of(rollout, kwargs)
    # Every value of the first batch is the batch's mean return ...
    assert torch.allclose(rollout.values.detach(), returns.mean().expand_as(returns), atol=1e-7)
    # ... so the critic's first loss is coeff * (T - 1) * the returns' (population) variance,
    # not the square of a value head's spread (about 1 for an xavier output layer).
    steps = returns.shape[0]
    variance = returns.var(unbiased=False)
    first = completion_loss(rollout, **kwargs).critic
    assert float(first) == pytest.approx(config.critic_coeff * steps * float(variance), rel=1e-4)
    assert float(variance) < 1e-3
    # The calibration is saved: a resumed run does not recalibrate.
    assert trainer.state_dict(0)["critic_calibrated"] is True


@pytest.mark.parametrize("field", ["critic_residual", "critic_gate"])
def test_resuming_a_critic_of_the_other_kind_is_refused(
    tmp_path, pretrained, tiny_config, tiny_data, field
):
    config = tiny_config.replace(epochs=1, critic="critic", **{field: False})
    Trainer(config, tmp_path / "t", tiny_data, stage="train", init=pretrained).fit()
    with pytest.raises(ValueError, match=field):
        Trainer(
            config.replace(epochs=2, **{field: True}),
            tmp_path / "t",
            tiny_data,
            stage="train",
            init=pretrained,
            resume=True,
        ).setup()


def test_without_a_learned_critic_nothing_is_calibrated(
    tmp_path, pretrained, tiny_config, tiny_data
):
    trainer = Trainer(
        tiny_config.replace(epochs=1), tmp_path / "t", tiny_data, stage="train", init=pretrained
    ).setup()
    assert trainer.critic is None
    assert trainer.critic_calibrated


def _all_demonstrated_critic_of_returns(tmp_path, pretrained, tiny_config, **changes):
    """A critic of returns whose first epoch is demonstrated at every step (ours(demo)'s
    first ``hybrid_schedule`` epochs): its calibration waits for the second epoch."""
    from pyskick.sidekicks.demo import DemoSidekick

    config = tiny_config.replace(critic="critic", critic_residual=False, **changes)
    sidekick = DemoSidekick(pretrained, channel_mean=(120.0,), hybrid_schedule=1)
    return config, sidekick


def test_a_step_graph_waits_for_a_critic_of_returns_to_be_calibrated(
    tmp_path, pretrained, tiny_config, tiny_data, monkeypatch
):
    """Calibrating reads the device, which a CUDA-graph capture refuses: until the critic is
    calibrated the steps run eagerly, not through the graph (routing checked on the CPU with a
    recording stand-in for StepGraph; the CUDA test below runs the real one)."""
    from pyskick.training import trainer as trainer_module

    config, sidekick = _all_demonstrated_critic_of_returns(tmp_path, pretrained, tiny_config)
    trainer = Trainer(
        config, tmp_path / "t", tiny_data, stage="train", init=pretrained, sidekick=sidekick
    ).setup()
    graphed = []

    class Recording:
        def __init__(self, step, device, generators=()):
            self.step = step

        def __call__(self, batch, key, *args):
            graphed.append(trainer.critic_calibrated)
            return self.step(batch, *args)

    monkeypatch.setattr(trainer_module, "StepGraph", Recording)
    trainer.config = trainer.config.replace(cuda_graph=True)  # refused on the CPU at setup
    for batch in trainer.batches(0):  # every step demonstrated: nothing to calibrate from
        trainer.train_step(batch, 0)
    assert not trainer.critic_calibrated
    assert graphed == []  # eager: a capture would have read the device
    trainer.sidekick.on_epoch_end(0)  # the schedule moves on: the policy acts at some steps
    batches = trainer.batches(1)
    trainer.train_step(next(batches), 1)  # the policy acts: calibrated, eagerly
    assert trainer.critic_calibrated
    assert graphed == []
    trainer.train_step(next(batches), 1)
    assert graphed == [True]  # then through the graph


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device")
def test_a_critic_of_returns_trains_as_a_cuda_graph_after_demonstrated_epochs(
    tmp_path, pretrained, tiny_config, tiny_data
):
    config, sidekick = _all_demonstrated_critic_of_returns(
        tmp_path, pretrained, tiny_config, epochs=2, device="cuda", cuda_graph=True
    )
    result = Trainer(
        config, tmp_path / "t", tiny_data, stage="train", init=pretrained, sidekick=sidekick
    ).fit()
    assert result.epochs == 2
    assert torch.isfinite(torch.tensor([h["val_error"] for h in result.history])).all()
