"""The residual critic's weight in the advantages: the clamped optimal control-variate
coefficient of the earlier batches (``TrainConfig.critic_gate``; docs/deviations.md K6)."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from pyskick.envs.rollout import Rollout
from pyskick.training.baselines import ControlVariate
from pyskick.training.losses import completion_loss, control_variate_sums
from pyskick.training.trainer import Trainer


def test_weight_is_the_clamped_ratio_of_decayed_sums():
    cv = ControlVariate(decay=0.9)
    assert cv.weight == 0.0  # before any batch: REINFORCE with the average baseline
    cv.update(2.0, 4.0)
    assert float(cv.weight) == pytest.approx(0.5)
    cv.update(1.0, 1.0)  # cross 0.9 * 2 + 1 = 2.8, square 0.9 * 4 + 1 = 4.6
    assert float(cv.weight) == pytest.approx(2.8 / 4.6)
    negative = ControlVariate()
    negative.update(-1.0, 1.0)  # a critic anti-correlated with the returns is not used
    assert negative.weight == 0.0
    large = ControlVariate()
    large.update(5.0, 1.0)
    assert large.weight == 1.0
    silent = ControlVariate()
    silent.update(0.0, 0.0)  # a zeroed output layer: no information yet
    assert silent.weight == 0.0


def test_state_round_trip_and_bad_decay():
    cv = ControlVariate(decay=0.5)
    cv.update(0.3, 0.9)
    copy = ControlVariate()
    copy.load_state_dict(cv.state_dict())
    assert copy.state_dict() == cv.state_dict()
    assert copy.weight == cv.weight
    for bad in (-0.1, 1.0):
        with pytest.raises(ValueError, match="decay"):
            ControlVariate(decay=bad)


def _rollout(values, intrinsic, final, supervised=None):
    steps, B = values.shape
    zeros = torch.zeros(steps, B)
    rec = torch.zeros(steps + 1, B)
    rec[-1] = final
    return Rollout(
        rec_errors=rec,
        log_probs=torch.full((steps, B), -1.0),
        entropies=zeros,
        values=values,
        intrinsic=intrinsic,
        actions=torch.zeros(steps, B, dtype=torch.long),
        supervised=torch.zeros(steps, B, dtype=torch.bool) if supervised is None else supervised,
        visited=torch.zeros(B, steps + 1, dtype=torch.long),
        decoded=torch.zeros(B, 1, 1, 1, 1, 1),
    )


def test_sums_by_hand():
    # Two actions, two samples; rewards: intrinsic * 2, the last action also pays -final.
    values = torch.tensor([[0.5, -1.0], [2.0, 0.0]])
    intrinsic = torch.tensor([[1.0, 0.0], [0.0, 3.0]])
    final = torch.tensor([4.0, 1.0])
    baseline = torch.tensor([0.5, -1.0])
    # rewards [[2, 0], [-4, 5]] -> returns [[-2, 5], [-4, 5]]; minus baseline:
    centred = np.array([[-2.5, 4.5], [-3.0, 6.0]])
    v = values.numpy()
    sums = control_variate_sums(_rollout(values, intrinsic, final), baseline, 2.0)
    assert sums.dtype == torch.float64
    assert sums.tolist() == pytest.approx([(centred * v).sum(), (v * v).sum()])
    # Demonstrated steps take no policy gradient and count for nothing.
    supervised = torch.tensor([[True, True], [False, False]])
    sums = control_variate_sums(_rollout(values, intrinsic, final, supervised), baseline, 2.0)
    assert sums.tolist() == pytest.approx([(centred * v)[1].sum(), (v * v)[1].sum()])


def test_weight_zero_is_reinforce_and_the_critic_loss_keeps_the_whole_output():
    values = torch.tensor([[0.5, -1.0], [2.0, 0.0]], requires_grad=True)
    rollout = _rollout(values, torch.zeros(2, 2), torch.tensor([4.0, 1.0]))
    baseline = torch.tensor([0.5, -1.0])
    kwargs = dict(baseline=baseline, sidekick_scale=1.0, learn_actions=True)
    gated = completion_loss(rollout, critic_weight=0.0, **kwargs)
    plain = completion_loss(rollout._replace(values=None), **kwargs)
    full = completion_loss(rollout, **kwargs)
    assert float(gated.policy) == pytest.approx(float(plain.policy))
    assert float(gated.policy) != pytest.approx(float(full.policy))
    assert float(gated.critic) == float(full.critic) > 0.0
    half = completion_loss(rollout, critic_weight=0.5, **kwargs)
    assert float(half.policy) == pytest.approx((float(plain.policy) + float(full.policy)) / 2)


def test_trainer_weights_each_batch_by_the_earlier_ones(
    tmp_path, pretrained, tiny_config, tiny_data, recorded
):
    config = tiny_config.replace(epochs=2, critic="critic")
    assert config.critic_gate
    assert config.critic_residual
    trainer = Trainer(config, tmp_path / "t", tiny_data, stage="train", init=pretrained)
    trainer.fit()
    assert len(recorded) >= 3
    cross = square = 0.0
    for rollout, kwargs in recorded:  # an independent float64 oracle of the decayed sums
        expected = 0.0 if square <= 0 else min(1.0, max(0.0, cross / square))
        assert float(kwargs["critic_weight"]) == pytest.approx(expected, abs=1e-12)
        sums = control_variate_sums(rollout, kwargs["baseline"], kwargs["sidekick_scale"])
        cross, square = 0.9 * cross + float(sums[0]), 0.9 * square + float(sums[1])
    assert recorded[0][1]["critic_weight"] == 0.0
    rows = [
        json.loads(line) for line in (tmp_path / "t" / "metrics.jsonl").read_text().splitlines()
    ]
    weights = [row["critic/weight"] for row in rows]
    assert len(weights) == 2
    assert all(0.0 <= w <= 1.0 for w in weights)
    assert trainer.state_dict(1)["control_variate"] == trainer.control_variate.state_dict()


def test_without_the_gate_the_whole_output_is_used(
    tmp_path, pretrained, tiny_config, tiny_data, recorded
):
    config = tiny_config.replace(epochs=1, critic="critic", critic_gate=False)
    trainer = Trainer(config, tmp_path / "t", tiny_data, stage="train", init=pretrained)
    trainer.fit()
    assert {kwargs["critic_weight"] for _, kwargs in recorded} == {1.0}
    row = json.loads((tmp_path / "t" / "metrics.jsonl").read_text().splitlines()[0])
    assert "critic/weight" not in row
