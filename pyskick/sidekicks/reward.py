"""The reward sidekick (ours(rew), paper §3.3.1, docs/paper-reference.md §5.1–5.2 and §4.7).

With full observability, the sidekick previews every view of a training viewgrid with the
one-view model: a view is informative when reconstructing the whole grid from it alone (the
observed view pasted) leaves a small error. Scores ``1 / (1000 · err)`` are min-max normalised
per viewgrid to [0, 1] and thinned by greedy NMS (``nms_rewards``: k peaks, Chebyshev radius,
azimuth wrapping, elevation clipping). The maps are paid out and their scale decayed as
:class:`~pyskick.sidekicks.reward_maps.RewardMaps` does.

Scale: the authors' maps are on a 0–255 scale with ``reward_scale_expert = 1e-4``; pyskick's
maps are in [0, 1], so the default scale is ``255e-4`` and the bonuses are the authors'.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any, ClassVar, Literal

import torch
from torch import Tensor

from pyskick.ops import nms_rewards
from pyskick.run_dir import checkpoint_digest
from pyskick.sidekicks.defaults import REWARD_OPTIONS, hand_built_default
from pyskick.sidekicks.reward_maps import RewardMaps

__all__ = ["RewardSidekick", "one_view_scores"]


def one_view_scores(errors: Tensor) -> Tensor:
    """Per-viewgrid informativeness of every start view, in [0, 1].

    Args:
        errors: ``[n, N, M]`` one-view reconstruction error from each start view.

    Returns:
        ``[n, N, M]`` float32: ``s = 1 / (1000 · err)`` min-max normalised per viewgrid.
    """
    scores = 1.0 / (1000.0 * errors.double()).clamp_min(1e-12)
    flat = scores.flatten(1)
    lo = flat.amin(1, keepdim=True)
    hi = flat.amax(1, keepdim=True)
    return ((flat - lo) / (hi - lo + 1e-8)).reshape(errors.shape).float()


class RewardSidekick(RewardMaps):
    """ours(rew): reward maps from one-view scores after NMS, with a decaying scale.

    Args:
        one_view: the one-view run (folder with ``best.pt``) or checkpoint that scores views.
        channel_mean: the dataset's per-channel mean (0–255).
        k: NMS peaks per viewgrid.
        radius: NMS radius; also the env's reward-zeroing radius.
        scale: initial multiplier of the collected rewards.
        decay_every: divide the scale every this many epochs.
        decay_factor: by this factor.
        (Options left None take the declared defaults for a 1,000-epoch run on a ``custom``
        grid: k 4, radius 1, scale 255e-4, decay every 500 epochs by 2;
        ``make_sidekick("rew", ...)`` resolves them for the run and its dataset.)
        batch_size: episodes per forward pass while scoring.
    """

    maps_score: ClassVar[str] = "nms"

    def __init__(
        self,
        one_view: str | os.PathLike[str],
        *,
        channel_mean: tuple[float, ...],
        k: int | None = None,
        radius: int | None = None,
        scale: float | None = None,
        decay_every: int | None = None,
        decay_factor: float | None = None,
        batch_size: int | Literal["auto"] = 256,
    ) -> None:
        # None: the declared option's default (the custom preset's NMS, the paper's schedule).
        k = int(hand_built_default(REWARD_OPTIONS, "k")) if k is None else k
        radius = int(hand_built_default(REWARD_OPTIONS, "radius")) if radius is None else radius
        if k < 1:
            raise ValueError(f"reward sidekick needs k >= 1 NMS peaks, got k={k}")
        super().__init__(
            radius=radius, scale=scale, decay_every=decay_every, decay_factor=decay_factor
        )
        self.one_view = Path(one_view)
        self.channel_mean = tuple(channel_mean)
        self.k = k
        self.batch_size = batch_size
        self.options = {**self.options, "k": k}

    def score_options(self, T: int) -> dict[str, Any]:
        """The one-view model's checkpoint digest, the input normalisation and the NMS
        parameters (not T: the scores are first-glimpse errors)."""
        return {
            "one_view_sha256": checkpoint_digest(self.one_view),
            "channel_mean": list(self.channel_mean),
            "k": self.k,
            "radius": self.radius,
        }

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        """``normal`` ``[n, N, M]``: one-view scores in [0, 1]; ``nms``: the reward maps."""
        from pyskick.evaluation import evaluate
        from pyskick.metrics import EVERY_START

        result = evaluate(
            self.one_view,
            grids,
            EVERY_START,
            channel_mean=self.channel_mean,
            T=1,
            actor="learned",
            batch_size=self.batch_size,
            device=device.type,
        )
        N, M = grids.shape[1:3]
        normal = one_view_scores(result.per_start.reshape(-1, N, M))
        return {"normal": normal, "nms": nms_rewards(normal, self.k, self.radius)}
