"""The authors' "average" baseline: cumulative running means of the rewards.

The authors' baseline is in docs/paper-reference.md §4.4.

``B_t = R_avg + (T - 1 - t) * R_avg_expert * reward_scale`` for action ``t``, where ``R_avg`` is
the mean of the final reward (−final MSE) over every training sample seen and ``R_avg_expert``
the mean of the raw intrinsic rewards over every training sample-step. Only training rollouts
update it (the authors also fed validation rollouts in: docs/paper-reference.md §8.17), and it is
saved in checkpoints (the authors reset it on resume, §8.20).

:class:`ControlVariate` decides how much of a residual critic's output the advantages use
(``TrainConfig.critic_gate``).
"""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor


class AverageBaseline:
    """Running means of the final and intrinsic rewards, kept in float64 Python numbers."""

    def __init__(self) -> None:
        self.final_sum = 0.0
        self.final_count = 0
        self.intrinsic_sum = 0.0
        self.intrinsic_count = 0

    @property
    def final_mean(self) -> float:
        """R_avg (0 before any update)."""
        return self.final_sum / self.final_count if self.final_count else 0.0

    @property
    def intrinsic_mean(self) -> float:
        """R_avg_expert, raw scale (0 before any update)."""
        return self.intrinsic_sum / self.intrinsic_count if self.intrinsic_count else 0.0

    def update(self, final_sum: float, final_count: int, intr_sum: float, intr_count: int) -> None:
        """Add sums and counts (already reduced over distributed ranks by the caller)."""
        self.final_sum += float(final_sum)
        self.final_count += int(final_count)
        self.intrinsic_sum += float(intr_sum)
        self.intrinsic_count += int(intr_count)

    def values(self, T: int, reward_scale: float, device: torch.device | str = "cpu") -> Tensor:
        """``[T-1]`` float32 baseline of each action step."""
        remaining = torch.arange(T - 1, 0, -1, dtype=torch.float64, device=device)
        out = self.final_mean + remaining * (self.intrinsic_mean * reward_scale)
        return out.to(torch.float32)

    def state_dict(self) -> dict[str, Any]:
        """Plain numbers, for checkpoints."""
        return {
            "final_sum": self.final_sum,
            "final_count": self.final_count,
            "intrinsic_sum": self.intrinsic_sum,
            "intrinsic_count": self.intrinsic_count,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.final_sum = float(state["final_sum"])
        self.final_count = int(state["final_count"])
        self.intrinsic_sum = float(state["intrinsic_sum"])
        self.intrinsic_count = int(state["intrinsic_count"])


class ControlVariate:
    """How much of a residual critic's output to subtract from the advantages.

    The critic's residual ``v`` (its output, added to the average baseline ``B_t``) is a
    control variate for the centred return ``R_t - B_t``: subtracting ``g * v`` (a state's
    value, ``g`` fixed before the batch) leaves the policy gradient unbiased, and the mean
    square of the advantages is smallest at ``g* = E[(R - B) v] / E[v^2]``. The weight is
    ``g*`` clamped to [0, 1], estimated from exponentially decayed sums over the *previous*
    batches (0 before any, so a +ac run starts exactly as REINFORCE with the average
    baseline): a critic that explains none of the returns' variance is not used, an exact one
    fully (docs/deviations.md K6).

    Args:
        decay: weight of the earlier batches' sums at each update (0.9: about the last ten
            batches count).
    """

    def __init__(self, decay: float = 0.9) -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.cross = 0.0
        self.square = 0.0

    @property
    def weight(self) -> float:
        """``clamp(cross / square, 0, 1)``; 0 before any update or while ``square`` is 0."""
        if self.square <= 0.0:
            return 0.0
        return min(1.0, max(0.0, self.cross / self.square))

    def update(self, cross: float, square: float) -> None:
        """Add one batch's ``sum (R - B) * v`` and ``sum v^2`` (reduced over ranks)."""
        self.cross = self.decay * self.cross + float(cross)
        self.square = self.decay * self.square + float(square)

    def state_dict(self) -> dict[str, Any]:
        """Plain numbers, for checkpoints."""
        return {"decay": self.decay, "cross": self.cross, "square": self.square}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.decay = float(state["decay"])
        self.cross = float(state["cross"])
        self.square = float(state["square"])
