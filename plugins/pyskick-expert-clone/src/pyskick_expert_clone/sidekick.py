"""The expert-clone sidekick: an expert's greedy trajectories as demonstrations.

The baseline is described in docs/paper-reference.md §5.7.

Scores: :meth:`ExpertCloneSidekick.compute_scores` trains an expert with full observability
on the viewgrids it is given (:func:`~pyskick_expert_clone.training.train_expert`) and dumps
its greedy trajectories from every start view. Training then uses them exactly like ours(demo)
uses the greedy coverage trajectories (docs/paper-reference.md §4.6, hybrid mode): the first
``T_sup``
actions of each episode are the expert's, trained with ``supervised_scale · NLL``, the rest are
the policy's own, learned by policy gradient; ``T_sup`` starts at ``T - 1`` and drops by one
every ``hybrid_schedule`` epochs. The only difference to ours(demo) is who demonstrates.
"""

from __future__ import annotations

import logging
import os
from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from pyskick import progress
from pyskick.errors import UserError
from pyskick.run_dir import checkpoint_digest
from pyskick.sidekicks import HybridSupervision, ScoredSidekick
from pyskick_expert_clone.training import (
    ExpertEpoch,
    ExpertSettings,
    expert_trajectories,
    load_one_view,
    train_expert,
)

logger = logging.getLogger("pyskick_expert_clone")


def log_epoch(summary: ExpertEpoch, total: int, stage: progress.Stage | None = None) -> None:
    """Report one expert epoch: to the ``pyskick_expert_clone`` logger, and as an advance of
    the progress ``stage`` of expert training (shown by the CLI like the trainer's epochs)."""
    logger.info(
        f"expert epoch {summary.epoch + 1}/{total}: train {summary.train_error * 1e3:.2f} "
        f"(x1000), entropy {summary.entropy:.3f}, {summary.seconds:.1f} s"
    )
    if stage is not None:
        stage.advance(
            label=f"epoch {summary.epoch + 1}/{total}",
            metrics={"train_error": summary.train_error, "entropy": summary.entropy},
        )


class ExpertCloneSidekick(HybridSupervision, ScoredSidekick):
    """expert-clone: demonstrations by an expert trained with full observability.

    Args:
        one_view: the one-view run (folder with ``best.pt``) or checkpoint the agent starts
            from; the expert drives this model while it learns.
        channel_mean: the dataset's per-channel mean (0–255).
        settings: how the expert is trained (:meth:`ExpertSettings.from_config`).
        hybrid_schedule: ``T_sup`` drops by one every this many epochs.
        batch_size: episodes per forward pass while dumping trajectories (memory only).
    """

    shardable = False  # the expert learns from all grids at once

    def __init__(
        self,
        one_view: str | os.PathLike[str],
        *,
        channel_mean: tuple[float, ...],
        settings: ExpertSettings,
        hybrid_schedule: int | None = None,
        batch_size: int = 256,
    ) -> None:
        super().__init__(hybrid_schedule=hybrid_schedule)
        if not isinstance(settings, ExpertSettings):
            raise TypeError(f"settings must be ExpertSettings, got {type(settings).__name__}")
        self.one_view = Path(one_view)
        self.channel_mean = tuple(float(x) for x in channel_mean)
        self.settings = settings
        self.batch_size = batch_size
        self.options = dict(
            {"hybrid_schedule": self.hybrid_schedule, "expert_epochs": settings.epochs}
        )
        self.history: list[ExpertEpoch] = []
        """The expert's training curve, when this process trained it (not from a cache)."""
        self.expert_trajectories: Tensor | None = None
        """``[n, V, T-1]`` the expert's actions from every start of every training viewgrid."""

    def score_options(self, T: int) -> dict[str, Any]:
        """The one-view model's digest, the channel mean, T (the expert learns T-glimpse
        episodes) and every expert training setting."""
        options = self.settings.to_dict()
        return {
            "one_view_sha256": checkpoint_digest(self.one_view),
            "channel_mean": list(self.channel_mean),
            "T": T,
            "expert_epochs": options.pop("epochs"),
            **options,
        }

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        """Train the expert on ``grids``, then dump its greedy trajectories.

        Returns:
            ``trajectories`` ``[n, V, T-1]`` int64 and ``errors`` ``[n, V]`` float32 (the
            final MSE of each greedy episode, views pasted), on CPU.
        """
        policy = load_one_view(self.one_view, device)
        epochs = self.settings.epochs
        with progress.stage("train expert", total=epochs, unit="epoch", lines="each") as stage:
            expert, self.history = train_expert(
                policy,
                grids,
                T=T,
                channel_mean=self.channel_mean,
                settings=self.settings,
                device=device,
                log=lambda summary: log_epoch(summary, epochs, stage),
            )
        trajectories, errors = expert_trajectories(
            policy,
            expert,
            grids,
            T=T,
            channel_mean=self.channel_mean,
            device=device,
            batch_size=self.batch_size,
        )
        return {"trajectories": trajectories, "errors": errors}

    def load_scores(self, scores: dict[str, Tensor], *, T: int, device: torch.device) -> None:
        """Keep the trajectories on ``device``; start ``T_sup`` at ``T - 1`` unless a
        checkpoint already restored it.

        Raises:
            ValueError: trajectories of the wrong shape or dtype for ``T``.
        """
        if isinstance(T, bool) or not isinstance(T, int) or T < 2:
            raise UserError(f"expert-clone needs T >= 2 glimpses, got T={T!r}")
        trajectories = scores["trajectories"]
        if trajectories.dtype != torch.int64 or trajectories.dim() != 3:
            raise ValueError(
                f"trajectories must be an int64 [n, V, T-1] tensor, got {trajectories.dtype} "
                f"{list(trajectories.shape)}"
            )
        if trajectories.shape[2] != T - 1:
            raise ValueError(
                f"trajectories hold {trajectories.shape[2]} actions per episode, T={T} needs "
                f"{T - 1}"
            )
        self.start_schedule(T)
        self.expert_trajectories = trajectories.to(device).contiguous()

    def trajectories(self, indices: Tensor, starts: Tensor) -> Tensor:
        """The expert's greedy actions of samples ``indices`` from ``starts``, ``[T-1, B]``."""
        if self.expert_trajectories is None:
            raise RuntimeError("ExpertCloneSidekick.prepare() must run before demonstrations")
        device = self.expert_trajectories.device
        return self.expert_trajectories[indices.to(device), starts.to(device)].T.contiguous()
