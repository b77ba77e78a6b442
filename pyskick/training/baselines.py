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
    """Running means of the final and intrinsic rewards.

    The sums and counts are float64 tensors on the training device, so that a batch adds to
    them without waiting for the device (counts are exact up to 2**53 samples); the means are
    read on the host only for logging, and :meth:`state_dict` gives plain numbers.

    Args:
        device: where the sums live (the rollouts' device).
    """

    def __init__(self, device: torch.device | str = "cpu") -> None:
        # final_sum, final_count, intrinsic_sum, intrinsic_count
        self.sums = torch.zeros(4, dtype=torch.float64, device=device)

    @property
    def final_mean(self) -> float:
        """R_avg (0 before any update); reads the device."""
        final_sum, final_count = self.sums[:2].tolist()
        return final_sum / final_count if final_count else 0.0

    @property
    def intrinsic_mean(self) -> float:
        """R_avg_expert, raw scale (0 before any update); reads the device."""
        intr_sum, intr_count = self.sums[2:].tolist()
        return intr_sum / intr_count if intr_count else 0.0

    @staticmethod
    def batch_sums(final_errors: Tensor, intrinsic: Tensor) -> Tensor:
        """``[4]`` float64 ``(-sum final errors, their count, sum intrinsic, their count)`` of
        one batch, on its device (what :meth:`update` adds, after a sum over ranks)."""
        device = final_errors.device
        return torch.stack(
            [
                -final_errors.double().sum(),
                torch.full((), final_errors.numel(), dtype=torch.float64, device=device),
                intrinsic.double().sum(),
                torch.full((), intrinsic.numel(), dtype=torch.float64, device=device),
            ]
        )

    def add(self, sums: Tensor) -> None:
        """Add :meth:`batch_sums` (already reduced over distributed ranks by the caller) on the
        device, without reading it."""
        self.sums += sums

    def update(self, final_sum: float, final_count: int, intr_sum: float, intr_count: int) -> None:
        """Add sums and counts given as numbers (already reduced over ranks by the caller)."""
        numbers = [float(final_sum), float(final_count), float(intr_sum), float(intr_count)]
        self.add(torch.tensor(numbers, dtype=torch.float64).to(self.sums.device))

    def _means(self) -> tuple[Tensor, Tensor]:
        """R_avg and R_avg_expert as 0-d float64 tensors on the device (0 without samples)."""
        final_sum, final_count, intr_sum, intr_count = self.sums.unbind()
        zero = self.sums.new_zeros(())
        return (
            torch.where(final_count > 0, final_sum / final_count, zero),
            torch.where(intr_count > 0, intr_sum / intr_count, zero),
        )

    def values(self, T: int, reward_scale: float) -> Tensor:
        """``[T-1]`` float32 baseline of each action step, on the sums' device."""
        final_mean, intrinsic_mean = self._means()
        remaining = torch.arange(T - 1, 0, -1, dtype=torch.float64, device=self.sums.device)
        out = final_mean + remaining * (intrinsic_mean * reward_scale)
        return out.to(torch.float32)

    def state_dict(self) -> dict[str, Any]:
        """Plain numbers, for checkpoints (reads the device)."""
        final_sum, final_count, intr_sum, intr_count = self.sums.tolist()
        return {
            "final_sum": final_sum,
            "final_count": int(final_count),
            "intrinsic_sum": intr_sum,
            "intrinsic_count": int(intr_count),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        values = [
            float(state["final_sum"]),
            float(int(state["final_count"])),
            float(state["intrinsic_sum"]),
            float(int(state["intrinsic_count"])),
        ]
        self.sums.copy_(torch.tensor(values, dtype=torch.float64))


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

    The two sums are float64 tensors on the training device (:class:`AverageBaseline` says
    why).

    Args:
        decay: weight of the earlier batches' sums at each update (0.9: about the last ten
            batches count).
        device: where the sums live.
    """

    def __init__(self, decay: float = 0.9, device: torch.device | str = "cpu") -> None:
        if not 0.0 <= decay < 1.0:
            raise ValueError(f"decay must be in [0, 1), got {decay}")
        self.decay = decay
        self.sums = torch.zeros(2, dtype=torch.float64, device=device)  # cross, square

    @property
    def weight(self) -> Tensor:
        """``clamp(cross / square, 0, 1)`` as a 0-d float64 tensor on the device; 0 before
        any update or while ``square`` is 0."""
        cross, square = self.sums.unbind()
        return torch.where(square > 0, (cross / square).clamp(0.0, 1.0), square.new_zeros(()))

    def add(self, sums: Tensor) -> None:
        """Add one batch's ``[2]`` float64 ``(sum (R - B) * v, sum v^2)`` (reduced over ranks;
        :func:`~pyskick.training.losses.control_variate_sums`) on the device."""
        self.sums.mul_(self.decay).add_(sums)

    def update(self, cross: float, square: float) -> None:
        """:meth:`add` with the two sums given as numbers."""
        self.add(
            torch.tensor([float(cross), float(square)], dtype=torch.float64).to(self.sums.device)
        )

    def state_dict(self) -> dict[str, Any]:
        """Plain numbers, for checkpoints (reads the device)."""
        cross, square = self.sums.tolist()
        return {"decay": self.decay, "cross": cross, "square": square}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""
        self.decay = float(state["decay"])
        self.sums.copy_(
            torch.tensor([float(state["cross"]), float(state["square"])], dtype=torch.float64)
        )
