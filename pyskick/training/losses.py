"""The training objective (docs/paper-reference.md §4.2–4.6), summed into one scalar.

- reconstruction: ``sum_t mean_b rec_err_t`` over all T glimpses;
- rewards: ``r_t = sidekick_scale * intrinsic_t``, plus ``-rec_err_{T-1}`` (detached) at the
  last action; returns are the undiscounted reward-to-go;
- REINFORCE: ``-mean_b(log pi(a_t) * reward_scale * (R_t - b_t))`` with ``b_t`` the average
  baseline, the learned critic's (detached) value, or their sum (a residual critic);
- entropy bonus ``-lambda_entropy * mean_b H_t``; critic loss ``critic_coeff * mean_b (R_t -
  V_t)^2``;
- steps a sidekick demonstrated get ``supervised_scale * NLL`` instead of the three RL terms.

Means over the batch divide by the full B (masked steps count as zeros), which is the
authors' per-step batch mean when the mask is the same for every sample (a T_sup prefix).
"""

from __future__ import annotations

from typing import NamedTuple

from torch import Tensor

from pyskick.envs.rollout import Rollout
from pyskick.training.returns import reward_to_go


class LossTerms(NamedTuple):
    """The summed objective and its parts (parts detached, for logging)."""

    total: Tensor
    reconstruction: Tensor
    policy: Tensor
    entropy: Tensor
    critic: Tensor
    supervised: Tensor


def episode_rewards(rollout: Rollout, sidekick_scale: float) -> Tensor:
    """``[T-1, B]`` rewards: scaled intrinsic rewards plus −final MSE at the last action."""
    rewards = rollout.intrinsic * sidekick_scale
    if rewards.shape[0] > 0:
        rewards = rewards.clone()
        rewards[-1] -= rollout.final_errors
    return rewards


def completion_loss(
    rollout: Rollout,
    *,
    baseline: Tensor | None,
    sidekick_scale: float,
    learn_actions: bool,
    reward_scale: float = 1.0,
    lambda_entropy: float = 1e-4,
    critic_coeff: float = 1e-2,
    supervised_scale: float = 1e-3,
) -> LossTerms:
    """The loss of one rollout.

    Args:
        rollout: from :func:`~pyskick.training.collect_rollout`.
        baseline: ``[T-1]`` average baseline per step, or None. With a learned critic
            (``rollout.values`` set) the value of a step is ``baseline + values`` (the critic
            predicts the residual), or ``values`` alone when ``baseline`` is None.
        sidekick_scale: multiplier of the raw intrinsic rewards (the sidekick's current scale).
        learn_actions: False for random actors: only the reconstruction is trained.
        reward_scale: multiplier of the policy-gradient term.
        lambda_entropy: weight of the entropy bonus.
        critic_coeff: weight of the critic's squared error.
        supervised_scale: weight of the NLL of demonstrated actions.

    Returns:
        :class:`LossTerms`.
    """
    rec = rollout.rec_errors.mean(1).sum()
    zero = rec.new_zeros(())
    steps, B = rollout.log_probs.shape
    if not learn_actions or steps == 0:
        return LossTerms(rec, rec.detach(), zero, zero, zero, zero)
    rl = (~rollout.supervised).to(rollout.log_probs.dtype)
    sup = rollout.supervised.to(rollout.log_probs.dtype)
    returns = reward_to_go(episode_rewards(rollout, sidekick_scale))
    if rollout.values is None:
        if baseline is None:
            raise ValueError("a rollout without critic values needs an average baseline")
        advantages = returns - baseline[:, None]
        critic_loss = zero
    else:
        values = rollout.values if baseline is None else rollout.values + baseline[:, None]
        advantages = returns - values.detach()
        critic_loss = critic_coeff * ((returns - values).pow(2) * rl).sum() / B
    policy_loss = -(rollout.log_probs * reward_scale * advantages * rl).sum() / B
    entropy_loss = -lambda_entropy * (rollout.entropies * rl).sum() / B
    supervised_loss = -supervised_scale * (rollout.log_probs * sup).sum() / B
    total = rec + policy_loss + entropy_loss + critic_loss + supervised_loss
    return LossTerms(
        total,
        rec.detach(),
        policy_loss.detach(),
        entropy_loss.detach(),
        critic_loss.detach(),
        supervised_loss.detach(),
    )
