"""The runs of a pack evaluated together: one packed pass instead of one pass per run.

A pack's runs are validated after every epoch. Alone, each run's validation on a GPU is a
few hundred small kernels per chunk of episodes, bound by their launches (0.36-0.42 s for
1,000 grids on an H100, about as long as a run's share of a packed training epoch); packed,
the R runs' episodes of a chunk go through :class:`~pyskick.models.PackedCompletionPolicy`
once. Each run sees exactly what :func:`~pyskick.evaluation.evaluate_policy` would show it:
the same viewgrids, starts and motions (its actor's forced ones, its own seed's random ones,
or greedy), with BatchNorm in eval mode and observed views pasted. Only float rounding differs
(grouped convolutions against a run's own), as in packed training (docs/training.md, "Packed
runs").
"""

from __future__ import annotations

from collections.abc import Sequence

import torch
from torch import Tensor, nn

from pyskick.actors import Actor
from pyskick.envs.rollout import collect_rollout, make_env
from pyskick.errors import UserError
from pyskick.evaluation.evaluate import (
    EvalBatchSize,
    chunk_demonstrations,
    draw_random_motions,
    evaluation_starts,
    resolve_eval_batch_size,
)
from pyskick.metrics import DEFAULT_METRIC, Metric, get_metric
from pyskick.models.config import ModelConfig

PACKABLE_MODES = ("greedy", "random")
"""Test modes a packed evaluation reproduces: ``"sample"`` draws from torch's global generator
in an order a pack would change."""


def can_evaluate_packed(actors: Sequence[Actor]) -> bool:
    """Whether :func:`evaluate_pack` reproduces every actor's evaluation (its test mode is
    greedy or random; forced motions are reproduced whatever the mode)."""
    return all(actor.mode(training=False) in PACKABLE_MODES for actor in actors)


@torch.no_grad()
def evaluate_pack(
    policy: nn.Module,
    config: ModelConfig,
    grids: Tensor,
    *,
    actors: Sequence[Actor],
    seeds: Sequence[int],
    channel_mean: Sequence[float] | None,
    T: int,
    metric: str | Metric = DEFAULT_METRIC,
    batch_size: EvalBatchSize = 256,
) -> list[Tensor]:
    """Evaluate the R runs of a packed policy on the same viewgrids, as each alone.

    Args:
        policy: a :class:`~pyskick.models.PackedCompletionPolicy` of R runs (left in the
            train/eval mode it had).
        config: the runs' model config.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (any device; moved chunk by chunk), the
            ones every actor was prepared on.
        actors: each run's prepared actor (R).
        seeds: each run's seed of random motions (R).
        channel_mean, T, metric: as in :func:`~pyskick.evaluation.evaluate_policy`.
        batch_size: episodes per forward pass for one run, or ``"auto"``; a pass holds R runs'
            episodes of ``batch_size // R`` (at least one viewgrid's starts per run).

    Returns:
        Each run's ``[n]`` float64 per-sample errors on the CPU (``metric``'s reduction).

    Raises:
        UserError: actors or seeds not one per run, or an actor whose test mode a pack does
            not reproduce (:func:`can_evaluate_packed`).
    """
    R = len(actors)
    if R == 0 or len(seeds) != R:
        raise UserError(
            f"a packed evaluation needs one actor and one seed per run, got {R} and {len(seeds)}"
        )
    if not can_evaluate_packed(actors):
        modes = sorted({actor.mode(training=False) for actor in actors} - set(PACKABLE_MODES))
        raise UserError(f"a packed evaluation cannot reproduce test mode {', '.join(modes)}")
    metric = get_metric(metric)
    config.check_grids(grids, empty_ok=False)
    device = next(policy.parameters()).device
    per_run_batch = resolve_eval_batch_size(batch_size, config, device)
    starts = evaluation_starts(config.n_elevations, config.n_azimuths, metric)
    S = starts.numel()
    n = grids.shape[0]
    env = make_env(config, T, channel_mean)
    motions = [
        draw_random_motions(actor.mode(training=False), env.n_actions, n, S, T, seed)
        for actor, seed in zip(actors, seeds, strict=True)
    ]
    chunk = max(1, per_run_batch // (S * R))
    was_training = policy.training
    policy.eval()
    errors: list[Tensor] = []
    try:
        device_starts = starts.to(device)
        device_indices = torch.arange(n, device=device)
        for lo in range(0, n, chunk):
            part = grids[lo : lo + chunk]
            if part.device != device:
                part = part.to(device)
            k = part.shape[0]
            chunk_starts = device_starts.repeat(k)
            demos = [
                chunk_demonstrations(actor, device_indices[lo : lo + k], chunk_starts, m, lo, T)
                for actor, m in zip(actors, motions, strict=True)
            ]
            # Episode e = b * R + r is run r's b-th, the layout of a packed batch.
            rollout = collect_rollout(
                policy,
                env,
                part.repeat_interleave(S * R, dim=0),
                mode="greedy",
                starts=chunk_starts.repeat_interleave(R),
                demonstrations=interleave_demonstrations(demos, T, k * S, device),
                paste=True,
                final_only=True,
                check_values=False,
            )
            errors.append(rollout.final_errors.view(k, S, R).double())
    finally:
        policy.train(was_training)
    per_start = torch.cat(errors).cpu()  # [n, S, R]: the one read of the device
    return [metric.reduce(per_start[:, :, r]) for r in range(R)]


def interleave_demonstrations(
    demos: Sequence[tuple[Tensor, Tensor] | None], T: int, episodes: int, device: torch.device
) -> tuple[Tensor, Tensor] | None:
    """Each run's demonstrations ``[T-1, E]`` as the pack's ``[T-1, E * R]`` (run r's episode
    b at ``b * R + r``); a run without any is unmasked (greedy)."""
    if all(d is None for d in demos):
        return None
    none = torch.zeros(T - 1, episodes, dtype=torch.int64, device=device)
    actions = torch.stack([none if d is None else d[0] for d in demos], dim=2)
    masks = torch.stack([none.bool() if d is None else d[1] for d in demos], dim=2)
    return actions.reshape(T - 1, -1), masks.reshape(T - 1, -1)
