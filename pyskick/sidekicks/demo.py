"""The demonstration sidekick (ours(demo), paper §3.3.2, docs/paper-reference.md §4.6 and §5.4–5.5).

With full observability, the sidekick knows how much each view tells about every other one (the
coverage matrix of :func:`~pyskick.sidekicks.coverage.one_view_coverage`). From an episode's
start it demonstrates the greedy coverage trajectory (:func:`pyskick.ops.greedy_coverage`:
each step takes the reachable view that adds most to the saturated coverage of the views seen).

Hybrid training: the first ``T_sup`` actions of every episode are the sidekick's, trained with
``supervised_scale · NLL``; the policy samples the rest and learns them by policy gradient.
``T_sup`` starts at ``T - 1`` (all actions demonstrated) and drops by one every
``hybrid_schedule`` epochs until the policy acts alone (the schedule is
:class:`~pyskick.sidekicks.hybrid.HybridSupervision`'s). The sidekick pays no rewards.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, Literal

import torch
from torch import Tensor

from pyskick.envs.actions import ActionGrid
from pyskick.ops import greedy_coverage
from pyskick.run_dir import checkpoint_digest
from pyskick.sidekicks.base import ScoredSidekick
from pyskick.sidekicks.hybrid import HybridSupervision


class DemoSidekick(HybridSupervision, ScoredSidekick):
    """ours(demo): greedy coverage demonstrations for the first ``T_sup`` steps.

    Args:
        one_view: the one-view run (folder with ``best.pt``) or checkpoint whose
            reconstructions define the coverage.
        channel_mean: the dataset's per-channel mean (0–255).
        hybrid_schedule: ``T_sup`` drops by one every this many epochs (None: the declared
            option's default for a 1,000-epoch run, 50).
        action_grid: ``(dN, dM)`` of the environment's moves.
        wrap_azimuth: the environment's azimuth moves wrap (else clip).
        wrap_elevation: the environment's elevation moves wrap (else clip).
        batch_size: episodes per forward pass while computing the coverage.
    """

    def __init__(
        self,
        one_view: str | os.PathLike[str],
        *,
        channel_mean: tuple[float, ...],
        hybrid_schedule: int | None = None,
        action_grid: ActionGrid | tuple[int, int] = (3, 5),
        wrap_azimuth: bool = True,
        wrap_elevation: bool = False,
        batch_size: int | Literal["auto"] = 256,
    ) -> None:
        super().__init__(hybrid_schedule=hybrid_schedule)
        self.one_view = Path(one_view)
        self.channel_mean = tuple(float(x) for x in channel_mean)
        self.action_grid = ActionGrid.of(action_grid)
        self.wrap_azimuth = bool(wrap_azimuth)
        self.wrap_elevation = bool(wrap_elevation)
        self.batch_size = batch_size
        self.coverage: Tensor | None = None
        self.grid_shape: tuple[int, int] | None = None

    def score_options(self, T: int) -> dict[str, Any]:
        """The one-view model's digest and the channel mean (not T: the coverage comes from
        first-glimpse reconstructions)."""
        return {
            "one_view_sha256": checkpoint_digest(self.one_view),
            "channel_mean": list(self.channel_mean),
        }

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        """``coverage`` ``[n, V, V]`` float32: utility of every source view for every target."""
        from pyskick.sidekicks.coverage import one_view_coverage

        coverage = one_view_coverage(
            self.one_view,
            grids,
            channel_mean=self.channel_mean,
            device=device,
            batch_size=self.batch_size,
        )
        return {"coverage": coverage}

    def load_scores(self, scores: dict[str, Tensor], *, T: int, device: torch.device) -> None:
        """Keep the coverage on ``device``; start ``T_sup`` at ``T - 1`` unless a checkpoint
        already restored it."""
        from pyskick.run_dir import load_model_config

        if isinstance(T, bool) or not isinstance(T, int) or T < 1:
            raise ValueError(f"T must be a positive int, got {T!r}")
        config = load_model_config(self.one_view)
        N, M = config.n_elevations, config.n_azimuths
        coverage = scores["coverage"]
        if coverage.dim() != 3 or tuple(coverage.shape[1:]) != (N * M, N * M):
            raise ValueError(
                f"coverage must have shape [n, {N * M}, {N * M}] for the one-view model's "
                f"{N}x{M} grid, got {list(coverage.shape)}"
            )
        coverage = coverage.to(dtype=torch.float32)
        if coverage.numel() and not bool(((coverage >= 0) & (coverage <= 1)).all()):
            raise ValueError(
                "coverage must lie in [0, 1] (as coverage_matrix returns), got values outside "
                "it or NaN"
            )
        self.start_schedule(T)
        # Checked once here: the trajectories of every batch trust it (no wait for a GPU).
        self.coverage = coverage.to(device=device).contiguous()
        self.grid_shape = (N, M)

    def trajectories(self, indices: Tensor, starts: Tensor) -> Tensor:
        """The full greedy coverage trajectories of samples ``indices`` from ``starts``.

        Args:
            indices: ``[B]`` int64 positions in the viewgrids given to :meth:`prepare`.
            starts: ``[B]`` int64 start views ``n * M + m``.

        Returns:
            ``[T-1, B]`` int64 actions, on the coverage's device.
        """
        if self.coverage is None or self.grid_shape is None or self.T is None:
            raise RuntimeError("DemoSidekick.prepare() must run before demonstrations")
        device = self.coverage.device
        N, M = self.grid_shape
        actions, _ = greedy_coverage(
            self.coverage[_on(indices, device)],
            _on(starts, device).to(torch.int64)[:, None],
            self.T - 1,
            n_elevations=N,
            n_azimuths=M,
            action_grid=(self.action_grid.elevation, self.action_grid.azimuth),
            wrap_azimuth=self.wrap_azimuth,
            wrap_elevation=self.wrap_elevation,
            # The coverage was checked when loaded; the starts are views of this grid.
            check_values=False,
        )
        return actions[:, 0].T.contiguous()


def _on(tensor: Tensor, device: torch.device) -> Tensor:
    """``tensor`` on ``device`` (moved only when it is elsewhere)."""
    return tensor if tensor.device == device else tensor.to(device)
