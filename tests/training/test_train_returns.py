"""Returns, the average baseline and the loss terms against loop-based twins."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.envs.rollout import Rollout
from pyskick.training.baselines import AverageBaseline
from pyskick.training.losses import completion_loss, episode_rewards
from pyskick.training.returns import reward_to_go


def _loop_returns(rewards: torch.Tensor) -> torch.Tensor:
    out = torch.zeros_like(rewards)
    for b in range(rewards.shape[1]):
        running = 0.0
        for t in reversed(range(rewards.shape[0])):
            running += float(rewards[t, b])
            out[t, b] = running
    return out


@settings(max_examples=40, deadline=None)
@given(steps=st.integers(0, 6), batch=st.integers(1, 5), seed=st.integers(0, 2**16))
def test_reward_to_go_matches_loop(steps, batch, seed):
    rewards = torch.randn(steps, batch, generator=torch.Generator().manual_seed(seed))
    torch.testing.assert_close(reward_to_go(rewards), _loop_returns(rewards))


def test_reward_to_go_rejects_1d():
    with pytest.raises(ValueError, match=r"\[T-1, B\]"):
        reward_to_go(torch.zeros(3))


def test_average_baseline_is_cumulative_and_serialisable():
    base = AverageBaseline()
    torch.testing.assert_close(base.values(4, 1e-4), torch.zeros(3))
    base.update(-0.3, 3, 600.0, 6)
    base.update(-0.1, 1, 0.0, 2)
    assert math.isclose(base.final_mean, -0.1)
    assert math.isclose(base.intrinsic_mean, 75.0)
    # B_t = R_avg + (T - 1 - t) * R_avg_expert * scale for t = 0..T-2.
    expected = torch.tensor([-0.1 + 3 * 75 * 1e-3, -0.1 + 2 * 75 * 1e-3, -0.1 + 75 * 1e-3])
    torch.testing.assert_close(base.values(4, 1e-3), expected)
    copy = AverageBaseline()
    copy.load_state_dict(base.state_dict())
    assert copy.state_dict() == base.state_dict()


def _rollout(T=4, B=3, seed=0, supervised=None, values=True):
    g = torch.Generator().manual_seed(seed)
    probs = torch.softmax(torch.randn(T - 1, B, 5, generator=g), -1).requires_grad_()
    actions = torch.randint(5, (T - 1, B), generator=g)
    log_probs = torch.log(probs.gather(2, actions[..., None]).squeeze(2) + 1e-7)
    entropies = -(probs * torch.log(probs + 1e-7)).sum(2)
    mask = torch.zeros(T - 1, B, dtype=torch.bool) if supervised is None else supervised
    return Rollout(
        rec_errors=torch.rand(T, B, generator=g).requires_grad_(),
        log_probs=log_probs,
        entropies=entropies,
        values=torch.randn(T - 1, B, generator=g).requires_grad_() if values else None,
        intrinsic=torch.rand(T - 1, B, generator=g) * 255,
        actions=actions,
        supervised=mask,
        visited=torch.zeros(B, T, dtype=torch.int64),
        decoded=torch.zeros(B, 1),
    )


def test_rewards_add_the_final_error_at_the_last_action():
    r = _rollout()
    rewards = episode_rewards(r, 1e-4)
    torch.testing.assert_close(rewards[:-1], r.intrinsic[:-1] * 1e-4)
    torch.testing.assert_close(rewards[-1], r.intrinsic[-1] * 1e-4 - r.rec_errors[-1].detach())
    assert not rewards.requires_grad


def _loop_loss(r, baseline, scale, lam, coeff, sup_scale):
    T1, B = r.log_probs.shape
    total = sum(r.rec_errors[t].mean() for t in range(T1 + 1))
    rewards = episode_rewards(r, scale)
    for t in range(T1):
        for b in range(B):
            if r.supervised[t, b]:
                total = total - sup_scale * r.log_probs[t, b] / B
                continue
            R = float(rewards[t:, b].sum())
            bt = float(baseline[t]) if baseline is not None else float(r.values[t, b].detach())
            total = total - r.log_probs[t, b] * (R - bt) / B - lam * r.entropies[t, b] / B
            if baseline is None:
                total = total + coeff * (R - r.values[t, b]) ** 2 / B
    return total


@pytest.mark.parametrize("learned_critic", [False, True])
@pytest.mark.parametrize("with_mask", [False, True])
def test_loss_matches_loop(learned_critic, with_mask):
    mask = torch.tensor([[True, True, False], [False, False, False], [False, True, False]])
    r = _rollout(supervised=mask if with_mask else None, values=learned_critic)
    baseline = None if learned_critic else torch.tensor([-0.02, 0.01, -0.03])
    kwargs = {"lambda_entropy": 1e-2, "critic_coeff": 0.5, "supervised_scale": 0.1}
    got = completion_loss(r, baseline=baseline, sidekick_scale=1e-3, learn_actions=True, **kwargs)
    want = _loop_loss(r, baseline, 1e-3, 1e-2, 0.5, 0.1)
    torch.testing.assert_close(got.total, want)
    assert float(got.supervised) == 0.0 or with_mask


def test_random_actor_trains_only_the_reconstruction():
    r = _rollout()
    loss = completion_loss(r, baseline=torch.zeros(3), sidekick_scale=0.0, learn_actions=False)
    torch.testing.assert_close(loss.total, r.rec_errors.mean(1).sum())
    assert float(loss.policy) == 0.0


def test_critic_values_required_without_baseline():
    with pytest.raises(ValueError, match="average baseline"):
        completion_loss(_rollout(values=False), baseline=None, sidekick_scale=0, learn_actions=True)
