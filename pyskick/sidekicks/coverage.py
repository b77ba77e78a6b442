"""Coverage matrices of the demonstration sidekick (docs/paper-reference.md §5.4).

With full observability, the one-view (T = 1) model reconstructs every training viewgrid from
each of its ``V = N * M`` start views; how well the reconstruction from source view ``s``
matches the true target view ``t`` is the utility ``U[s, t]`` (``coverage_matrix``: summed
squared error, ``1 / (1000 · err + 1e-8)``, min-max normalised over sources per target).

As in the authors' ``create_utility_based_rewards.py`` the observed view is **not** pasted into
the reconstruction (memorize is forced False there), so ``U[s, s]`` measures how well the model
reproduces the view it sees, like any other target.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Literal

import torch
from torch import Tensor

from pyskick import progress
from pyskick.envs.rollout import collect_rollout, make_env
from pyskick.envs.views import check_mean_given
from pyskick.evaluation.evaluate import resolve_eval_batch_size
from pyskick.ops import coverage_matrix, rotate_viewgrid
from pyskick.run_dir import load_policy


@torch.no_grad()
def one_view_coverage(
    one_view: str | os.PathLike[str],
    grids: Tensor,
    *,
    channel_mean: Sequence[float] | None,
    device: torch.device | str = "cpu",
    batch_size: int | Literal["auto"] = 256,
) -> Tensor:
    """Coverage matrix of every viewgrid from the one-view model's reconstructions.

    Each viewgrid is reconstructed from all ``V`` start views after one glimpse (BatchNorm in
    eval mode, nothing pasted); the reconstructions, in their start's frame, and the true
    normalised grid go to :func:`pyskick.ops.coverage_matrix`.

    Args:
        one_view: a one-view run folder (its ``best.pt``) or checkpoint.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (any device; moved chunk by chunk).
        channel_mean: per-channel mean (0–255) the model was trained with.
        device: where the model runs.
        batch_size: episodes per forward pass (``V`` per viewgrid); bounds the memory.
            ``"auto"``: :func:`~pyskick.evaluation.evaluate.auto_eval_batch_size`.

    Returns:
        ``[n, V, V]`` float32 ``U[b, source, target]`` in [0, 1] on the CPU, views indexed
        ``v = n * M + m`` in the absolute frame.

    Raises:
        TypeError, ValueError: grids that do not fit the model, a bad ``batch_size``, or no
            ``channel_mean`` (None or zeros) for a model trained with mean subtraction.
        FileNotFoundError: no such run or checkpoint.
    """
    if batch_size != "auto" and (
        isinstance(batch_size, bool) or not isinstance(batch_size, int) or batch_size < 1
    ):
        raise ValueError(f"batch_size must be a positive int or 'auto', got {batch_size!r}")
    device = torch.device(device)
    policy = load_policy(one_view, device).policy
    cfg = policy.config
    batch_size = resolve_eval_batch_size(batch_size, cfg, device)
    cfg.check_grids(grids, who="the one-view model")
    check_mean_given(cfg.mean_subtract, channel_mean is not None and any(channel_mean))
    N, M = cfg.n_elevations, cfg.n_azimuths
    V = N * M
    env = make_env(cfg, 1, channel_mean)
    chunk = max(1, batch_size // V)
    starts = torch.arange(V, device=device)
    parts = [torch.empty(0, V, V)]
    with progress.stage("coverage", total=grids.shape[0], unit="grid", lines="none") as bar:
        for lo in range(0, grids.shape[0], chunk):
            part = grids[lo : lo + chunk].to(device)
            k = part.shape[0]
            part_starts = starts.repeat(k)
            rollout = collect_rollout(
                policy,
                env,
                part.repeat_interleave(V, dim=0),
                mode="greedy",
                starts=part_starts,
                paste=False,
            )
            recon = rollout.decoded
            if cfg.known_azimuth:
                # The decoder works in the absolute frame; coverage_matrix wants the start's.
                recon = rotate_viewgrid(recon, part_starts % M)
            truth = env.grid.view(k, V, *env.grid.shape[1:])[:, 0].contiguous()
            parts.append(coverage_matrix(recon.view(k, V, *recon.shape[1:]), truth).cpu())
            bar.advance(k)
    return torch.cat(parts)
