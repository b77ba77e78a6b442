"""The training objective (docs/paper-reference.md §4.2–4.6), summed into one scalar.

- reconstruction: ``sum_t mean_b rec_err_t`` over all T glimpses;
- rewards: ``r_t = sidekick_scale * intrinsic_t``, plus ``-rec_err_{T-1}`` (detached) at the
  last action; returns are the undiscounted reward-to-go;
- REINFORCE: ``-mean_b(log pi(a_t) * reward_scale * (R_t - b_t))`` with ``b_t`` the average
  baseline, the learned critic's (detached) value, or the baseline plus ``critic_weight`` times
  the critic's output (a residual critic);
- entropy bonus ``-lambda_entropy * mean_b H_t``; critic loss ``critic_coeff * mean_b (R_t -
  V_t)^2``;
- steps a sidekick demonstrated get ``supervised_scale * NLL`` instead of the three RL terms.

Means over the batch divide by the full B (masked steps count as zeros), which is the
authors' per-step batch mean when the mask is the same for every sample (a T_sup prefix).
"""

from __future__ import annotations

from typing import NamedTuple

import torch
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
    critic_weight: float | Tensor = 1.0,
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
        critic_weight: share of a residual critic's output subtracted in the advantages
            (:class:`~pyskick.training.baselines.ControlVariate`; a 0-d tensor on the device,
            or a number); its squared-error loss always uses the whole output.

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
        # A number 1 uses the whole output; a tensor weight is never compared on the host.
        whole = not isinstance(critic_weight, Tensor) and critic_weight == 1.0
        if baseline is None or whole:
            advantages = returns - values.detach()
        else:
            advantages = returns - (baseline[:, None] + critic_weight * rollout.values.detach())
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


def control_variate_sums(rollout: Rollout, baseline: Tensor, sidekick_scale: float) -> Tensor:
    """``[2]`` float64 ``(sum (R - B) * v, sum v^2)`` over the policy-gradient steps.

    ``v`` is a residual critic's output (``rollout.values``), ``R`` the returns and ``B`` the
    ``[T-1]`` average baseline: what :class:`~pyskick.training.baselines.ControlVariate`
    accumulates.
    """
    if rollout.values is None:
        raise ValueError("control_variate_sums needs a rollout with critic values")
    rl = (~rollout.supervised).double()
    centred = (
        reward_to_go(episode_rewards(rollout, sidekick_scale)).double() - baseline[:, None].double()
    )
    values = rollout.values.detach().double()
    return torch.stack([(centred * values * rl).sum(), (values * values * rl).sum()])
