"""Recording whole episodes step by step for the figures."""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import torch
from torch import Tensor

from pyskick.envs.rollout import make_env
from pyskick.models import CompletionPolicy
from pyskick.models.act import ActionMode, select_actions


class Episodes(NamedTuple):
    """``B`` episodes of ``T`` glimpses, recorded at every step (all on the CPU)."""

    starts: Tensor
    """``[B]`` int64 start views ``n * M + m``."""
    visited: Tensor
    """``[B, T]`` int64 views seen, in order."""
    actions: Tensor
    """``[B, T-1]`` int64 actions taken."""
    moves: Tensor
    """``[B, T-1, 2]`` int64 commanded moves (d_elev, d_azim) of the actions."""
    decoded: Tensor
    """``[T, B, N, M, C, H, W]`` float32 normalised reconstructions after each glimpse,
    observed views pasted, absolute frame."""
    errors: Tensor
    """``[T, B]`` MSE of the pasted reconstruction after each glimpse."""
    hidden: Tensor
    """``[T, B, hidden_size]`` aggregated states a_t (what act and decode read)."""
    proprio: Tensor
    """``[T, B, P]`` proprioception at each glimpse."""
    azimuth: Tensor
    """``[T, B]`` int64 absolute azimuth at each glimpse."""


@torch.no_grad()
def record_episodes(
    policy: CompletionPolicy,
    grids: Tensor,
    starts: Tensor,
    *,
    channel_mean: Sequence[float] | None,
    T: int,
    mode: ActionMode = "greedy",
    generator: torch.Generator | None = None,
    forced: Tensor | None = None,
) -> Episodes:
    """Run ``T`` glimpses from ``starts`` as the evaluation does (pasted views, BN eval).

    Args:
        policy: the policy (run on its device, in eval mode; its mode is restored).
        grids: ``[B, N, M, C, H, W]`` uint8 viewgrids.
        starts: ``[B]`` int64 start views.
        channel_mean: the dataset's per-channel mean (0–255).
        T: glimpses.
        mode: ``"greedy"`` for a learned actor, ``"random"`` for rnd-actions.
        generator: random source of ``"random"`` actions (on the policy's device).
        forced: ``[T-1, B]`` int64 actions that replace the policy's choices (an actor that
            forces its motions, e.g. ``demo-actions``); ``mode`` is then unused.

    Returns:
        :class:`Episodes` on the CPU.
    """
    cfg = policy.config
    device = next(policy.parameters()).device
    env = make_env(cfg, T, channel_mean)
    grids = grids.to(device)
    M = grids.shape[2]
    was_training = policy.training
    policy.eval()
    decoded, errors, hidden, proprio, azimuth = [], [], [], [], []
    try:
        obs = env.reset(grids, starts=starts.to(device))
        state = None
        for t in range(T):
            az = obs.position % M
            out = policy(obs.view, obs.proprio, t, state, azimuth=az)
            state = out.state
            pasted = env.paste_observed(out.decoded)
            errors.append((env.target - pasted).pow(2).flatten(1).mean(1).cpu())
            decoded.append(env.to_absolute(pasted).cpu())
            hidden.append(out.hidden.cpu())
            proprio.append(obs.proprio.cpu())
            azimuth.append(az.cpu())
            if t < T - 1:
                chosen = (
                    forced[t].to(device)
                    if forced is not None
                    else select_actions(torch.softmax(out.logits, 1), mode, generator=generator)
                )
                obs = env.step(chosen).observation
    finally:
        policy.train(was_training)
    actions = env.actions_taken.cpu()
    return Episodes(
        starts=env.starts.cpu(),
        visited=env.visited_views.cpu(),
        actions=actions,
        moves=env.action_grid.deltas()[actions],
        decoded=torch.stack(decoded),
        errors=torch.stack(errors),
        hidden=torch.stack(hidden),
        proprio=torch.stack(proprio),
        azimuth=torch.stack(azimuth),
    )
