"""Reward maps (paper §3.3.1, docs/paper-reference.md §4.7): a sidekick pays precomputed
per-viewgrid maps.

The environment pays a view's value the first time its neighbourhood (Chebyshev ``radius``,
the sidekick's :attr:`~pyskick.sidekicks.Sidekick.reward_radius`) is visited; the trainer
multiplies the collected raw rewards by :meth:`RewardMaps.reward_scale`, which is divided by
``decay_factor`` every ``decay_every`` epochs.

ours(rew) and the rnd-rewards plugin differ only in the maps: a subclass supplies
:meth:`~pyskick.sidekicks.ScoredSidekick.score_options` and
:meth:`~pyskick.sidekicks.ScoredSidekick.compute_scores`, returning the ``[n, N, M]`` maps in
[0, 1] under :attr:`RewardMaps.maps_score`; loading them, the scale, its decay and the
checkpointed state are here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any, ClassVar

import torch
from torch import Tensor

from pyskick.options import OptionValue
from pyskick.sidekicks.base import ScoredSidekick
from pyskick.sidekicks.defaults import REWARD_OPTIONS, hand_built_default


def _default(name: str) -> OptionValue:
    return hand_built_default(REWARD_OPTIONS, name)


class RewardMaps(ScoredSidekick, ABC):
    """A sidekick that pays a reward map per training viewgrid, on a decaying scale.

    Args:
        radius: the environment's reward-zeroing radius around visited views that the maps
            assume (e.g. the NMS radius of the peaks).
        scale: initial multiplier of the collected rewards (>= 0).
        decay_every: divide the scale every this many epochs (>= 1).
        decay_factor: by this factor (> 0; 1 never decays).

    ``scale``, ``decay_every`` and ``decay_factor`` default (None) to the declared options'
    defaults for a 1,000-epoch run (:func:`~pyskick.sidekicks.defaults.hand_built_default`):
    ``make_sidekick`` passes every option, resolved for the run.
    """

    maps_score: ClassVar[str] = "maps"
    """The score of :meth:`compute_scores` that holds the ``[n, N, M]`` maps."""

    def __init__(
        self,
        *,
        radius: int,
        scale: float | None = None,
        decay_every: int | None = None,
        decay_factor: float | None = None,
    ) -> None:
        # None: the declared option's default (pyskick.sidekicks.defaults.REWARD_OPTIONS).
        scale = float(_default("scale")) if scale is None else scale
        decay_every = int(_default("decay_every")) if decay_every is None else decay_every
        decay_factor = float(_default("decay_factor")) if decay_factor is None else decay_factor
        if radius < 0 or scale < 0 or decay_every < 1 or decay_factor <= 0:
            raise ValueError(
                f"{type(self).__name__} needs radius >= 0, scale >= 0, decay_every >= 1 and "
                f"decay_factor > 0; got radius={radius}, scale={scale}, "
                f"decay_every={decay_every}, decay_factor={decay_factor}"
            )
        self.radius = radius
        self.reward_radius = radius
        self.initial_scale, self.scale = scale, scale
        self.decay_every, self.decay_factor = decay_every, decay_factor
        self.maps: Tensor | None = None
        # What a run records for a sidekick built by hand (make_sidekick stamps the resolved
        # options, a subclass's own included).
        self.options: dict[str, Any] = {
            "scale": scale,
            "decay_every": decay_every,
            "decay_factor": decay_factor,
            "radius": radius,
        }

    @abstractmethod
    def score_options(self, T: int) -> dict[str, Any]:
        """Everything the maps depend on besides the viewgrids (see
        :meth:`~pyskick.sidekicks.ScoredSidekick.score_options`)."""

    @abstractmethod
    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        """The maps of ``grids`` ``[n, N, M, C, H, W]``: ``{maps_score: [n, N, M]}`` float
        in [0, 1] on the CPU (other scores may come along)."""

    def load_scores(self, scores: dict[str, Tensor], *, T: int, device: torch.device) -> None:
        """Keep the maps on ``device``.

        Raises:
            ValueError: no :attr:`maps_score` among the scores, or not ``[n, N, M]``.
        """
        if self.maps_score not in scores:
            raise ValueError(
                f"sidekick {self.name!r}: no {self.maps_score!r} among its scores "
                f"({', '.join(scores)})"
            )
        maps = scores[self.maps_score]
        if maps.dim() != 3:
            raise ValueError(
                f"sidekick {self.name!r}: reward maps must be [n, N, M], got {list(maps.shape)}"
            )
        maps = maps.to(dtype=torch.float32)
        if not bool(torch.isfinite(maps).all()):
            raise ValueError(f"sidekick {self.name!r}: reward maps contain NaN or infinite values")
        # Checked once here: the environment trusts the maps of every batch (no wait for a GPU).
        self.maps = maps.to(device=device)

    def reward_maps(self, indices: Tensor, epoch: int) -> Tensor:
        """``[B, N, M]`` float32 maps of the samples ``indices``."""
        if self.maps is None:
            raise RuntimeError(f"{type(self).__name__}.prepare() must run before training")
        if indices.device != self.maps.device:
            indices = indices.to(self.maps.device)
        return self.maps[indices]

    def reward_scale(self, epoch: int) -> float:
        return self.scale

    def on_epoch_end(self, epoch: int) -> None:
        if (epoch + 1) % self.decay_every == 0:
            self.scale /= self.decay_factor

    def state_dict(self) -> dict[str, Any]:
        return {"scale": self.scale}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        self.scale = float(state["scale"])
