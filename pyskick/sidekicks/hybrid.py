"""Hybrid supervision (docs/paper-reference.md §4.6): a sidekick demonstrates whole trajectories and
the first ``T_sup`` actions of every episode are its, trained by behaviour cloning, the rest
the policy's own, learned by policy gradient. ``T_sup`` starts at ``T - 1`` (all actions
demonstrated) and drops by one every ``hybrid_schedule`` epochs until the policy acts alone.

ours(demo) and the expert-clone plugin differ only in who demonstrates: a subclass supplies
:meth:`HybridSupervision.trajectories` and calls :meth:`HybridSupervision.start_schedule`
once it knows ``T`` (from ``load_scores``); the schedule, the masks and the checkpointed state
are here.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import Any

import torch
from torch import Tensor

from pyskick.sidekicks.base import Demonstrations, Sidekick
from pyskick.sidekicks.defaults import HYBRID_OPTION


class HybridSupervision(Sidekick, ABC):
    """A sidekick whose trajectories are forced for the first ``T_sup`` steps, annealed.

    Args:
        hybrid_schedule: ``T_sup`` drops by one every this many epochs (>= 1); None: the
            declared option's default for a 1,000-epoch run (50).
    """

    def __init__(self, *, hybrid_schedule: int | None = None) -> None:
        if hybrid_schedule is None:  # the declared option's default (the paper's 50 epochs)
            hybrid_schedule = int(HYBRID_OPTION.default_for(None, None))
        if isinstance(hybrid_schedule, bool) or not isinstance(hybrid_schedule, int):
            raise TypeError(f"hybrid_schedule must be an int, got {hybrid_schedule!r}")
        if hybrid_schedule < 1:
            raise ValueError(f"hybrid_schedule must be >= 1 epoch, got {hybrid_schedule}")
        self.hybrid_schedule = hybrid_schedule
        # What a run records (make_sidekick stamps the same, plus a subclass's other options).
        self.options: dict[str, Any] = {"hybrid_schedule": hybrid_schedule}
        self.T: int | None = None
        self.T_sup: int | None = None
        self._restored = False

    @abstractmethod
    def trajectories(self, indices: Tensor, starts: Tensor) -> Tensor:
        """The sidekick's whole trajectories of samples ``indices`` from ``starts``.

        Args:
            indices: ``[B]`` int64 positions in the viewgrids given to ``prepare``.
            starts: ``[B]`` int64 start views ``n * M + m``.

        Returns:
            ``[T-1, B]`` int64 actions.
        """

    def start_schedule(self, T: int) -> None:
        """Begin at ``T_sup = T - 1``, unless a checkpoint already restored ``T_sup``.

        Raises:
            ValueError: a restored ``T_sup`` larger than ``T - 1``.
        """
        if self._restored and self.T_sup is not None and self.T_sup > T - 1:
            raise ValueError(f"restored T_sup={self.T_sup} exceeds T - 1 = {T - 1}")
        self.T = T
        if not self._restored:
            self.T_sup = T - 1

    def demonstrations(self, indices: Tensor, starts: Tensor, epoch: int) -> Demonstrations | None:
        """The trajectories, forced at steps ``t < T_sup``; None once ``T_sup`` is 0."""
        if self.T_sup is None:
            raise RuntimeError(f"{type(self).__name__}.prepare() must run before demonstrations")
        if self.T_sup == 0:
            return None
        actions = self.trajectories(indices, starts)
        steps = torch.arange(actions.shape[0], device=actions.device)
        mask = (steps < self.T_sup)[:, None].expand_as(actions).contiguous()
        return actions, mask

    def on_epoch_end(self, epoch: int) -> None:
        if self.T_sup is not None and (epoch + 1) % self.hybrid_schedule == 0 and self.T_sup > 0:
            self.T_sup -= 1

    def state_dict(self) -> dict[str, Any]:
        return {"T_sup": self.T_sup}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        T_sup = state["T_sup"]
        if T_sup is None:
            return  # saved before prepare(): nothing to restore
        if isinstance(T_sup, bool) or not isinstance(T_sup, int) or T_sup < 0:
            raise ValueError(f"T_sup must be an int >= 0, got {T_sup!r}")
        if self.T is not None and T_sup > self.T - 1:
            raise ValueError(f"restored T_sup={T_sup} exceeds T - 1 = {self.T - 1}")
        self.T_sup = T_sup
        self._restored = True
