"""The demo-actions baseline (docs/paper-reference.md §5.7): the demo sidekick moves the camera.

Every motion, in training and at test time, is the greedy coverage trajectory of
:class:`~pyskick.sidekicks.demo.DemoSidekick` from the episode's start; only the reconstruction
learns. The coverage of the evaluated split is computed from its true viewgrids, so the agent
has full observability at test time and is not comparable with partially observing agents.
"""

from __future__ import annotations

import os
from typing import Literal

import torch
from torch import Tensor

from pyskick.actors.base import Actor
from pyskick.envs.actions import ActionGrid
from pyskick.models.act import ActionMode
from pyskick.sidekicks.demo import DemoSidekick


class DemoActionsActor(Actor):
    """Greedy coverage trajectories (demo-actions); needs full observability at test time.

    Args:
        one_view: the one-view run (folder with ``best.pt``) or checkpoint whose
            reconstructions define the coverage.
        channel_mean: the dataset's per-channel mean (0–255).
        action_grid: ``(dN, dM)`` of the environment's moves.
        wrap_azimuth: the environment's azimuth moves wrap (else clip).
        wrap_elevation: the environment's elevation moves wrap (else clip).
        batch_size: episodes per forward pass while computing the coverage.
    """

    name = "demo-actions"
    learned = False
    full_observability = True

    def __init__(
        self,
        one_view: str | os.PathLike[str],
        *,
        channel_mean: tuple[float, ...],
        action_grid: ActionGrid | tuple[int, int] = (3, 5),
        wrap_azimuth: bool = True,
        wrap_elevation: bool = False,
        batch_size: int | Literal["auto"] = 256,
    ) -> None:
        # The sidekick's score path (score_options / compute_scores / load_scores) computes the
        # coverage, so it can be cached like the sidekick's; its T_sup schedule is unused.
        self.sidekick = DemoSidekick(
            one_view,
            channel_mean=channel_mean,
            action_grid=action_grid,
            wrap_azimuth=wrap_azimuth,
            wrap_elevation=wrap_elevation,
            batch_size=batch_size,
        )

    def prepare(self, grids: Tensor, *, T: int, device: torch.device) -> None:
        """Compute the coverage of ``grids`` ``[n, N, M, C, H, W]`` uint8 with the one-view
        model (full observability) and keep it on ``device``."""
        self.sidekick.prepare(grids, T=T, device=device)

    def mode(self, *, training: bool) -> ActionMode:
        # Every motion is forced; "greedy" draws no random numbers for the discarded choice.
        return "greedy"

    def forced_actions(self, indices: Tensor, starts: Tensor) -> Tensor:
        """``[T-1, B]`` int64: the whole greedy coverage trajectory from each start."""
        return self.sidekick.trajectories(indices, starts)
