"""Returns of an episode's rewards (docs/paper-reference.md §4.3: undiscounted Monte-Carlo)."""

from __future__ import annotations

from torch import Tensor


def reward_to_go(rewards: Tensor) -> Tensor:
    """``R_t = sum_{t' >= t} r_t'`` for every action step (no discount, no bootstrap).

    Args:
        rewards: ``[T-1, B]`` floating rewards, time first.

    Returns:
        ``[T-1, B]`` returns, same dtype and device; differentiable in ``rewards``.

    Raises:
        ValueError: rewards not 2-D.
    """
    if rewards.dim() != 2:
        raise ValueError(f"rewards must be [T-1, B], got shape {list(rewards.shape)}")
    return rewards.flip(0).cumsum(0).flip(0)
