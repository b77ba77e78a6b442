"""The sidekick extension point: what the trainer asks of a sidekick, and the no-op sidekick.

A sidekick helps the policy only during training, through two channels (paper §3.3–3.4):

- **rewards** (ours(rew)): per-view reward maps ``[B, N, M]`` (raw scale, e.g. 0–255) that the
  environment pays out the first time a neighbourhood is visited; the trainer multiplies the
  collected raw rewards by :meth:`Sidekick.reward_scale` to form the per-step bonus.
- **demonstrations** (ours(demo)): actions for some steps of each episode; where the mask is
  True the sidekick's action is taken and trained with ``supervised_scale * NLL``, and those
  steps get no policy-gradient or entropy term. Returns are computed over the remaining steps
  (the paper's hybrid mode, docs/paper-reference.md §4.6).

Schedules (reward-scale decay, T_sup annealing) live in the sidekick: the trainer calls
:meth:`Sidekick.on_epoch_end` after every epoch and saves :meth:`Sidekick.state_dict` in every
checkpoint so a resumed run continues them exactly.

**Scores.** What a sidekick precomputes from full observability (one-view scores, coverage
matrices, expert trajectories) goes through three methods so that it can be cached and sharded:
:meth:`Sidekick.score_options` names everything the scores depend on besides the viewgrids and
the code, :meth:`Sidekick.compute_scores` computes per-sample arrays,
:meth:`Sidekick.load_scores` takes them before training. A sidekick has scores exactly when its
class overrides :meth:`Sidekick.compute_scores` (:func:`has_scores`); it then overrides the
other two as well. The default :meth:`Sidekick.prepare` ties them together: it loads
:attr:`Sidekick.scores_file` when one was handed over (``pyskick train --scores``), refusing
stale scores, and otherwise takes them from the score cache, computing them there on a miss
(sharded under torchrun; :mod:`pyskick.sidekicks.scores`).

**Names.** A sidekick's :attr:`Sidekick.name` is the name it was registered under, stamped by
:func:`~pyskick.sidekicks.make_sidekick` (classes do not name themselves): runs record it as
``TrainConfig.sidekick`` and in checkpoints. One built by hand is named by its class
(``module.QualName``), which no registry resolves: resuming such a run needs the sidekick
object again.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

import torch
from torch import Tensor

from pyskick.errors import UserError
from pyskick.run_dir import checkpoint_digest  # noqa: F401 - its old home, still importable
from pyskick.sidekicks.scores import (
    cached_scores,
    class_path,
    has_scores,
    load_scores_file,
    no_scores,
)

Demonstrations = tuple[Tensor, Tensor]
"""``(actions [T-1, B] int64, mask [T-1, B] bool)``: where mask is True the action is forced."""


class Sidekick:
    """Base class of sidekicks. Subclasses override what they provide.

    ``indices`` are positions in the training viewgrids given to :meth:`prepare` (``[B]``
    int64, on the training device), so a sidekick can keep per-sample data (scores, utility
    maps) computed once.
    """

    _registered_name: str | None = None

    @property
    def name(self) -> str:
        """The name the factory was registered under, set by
        :func:`~pyskick.sidekicks.make_sidekick`; recorded in the run's config
        (``TrainConfig.sidekick``) and checkpoints. A sidekick built by hand is named by its
        class, ``module.QualName``."""
        return self._registered_name or class_path(self)

    @name.setter
    def name(self, value: str) -> None:
        if not isinstance(value, str) or not value:
            raise ValueError(f"a sidekick's name must be a non-empty string, got {value!r}")
        self._registered_name = value

    options: Mapping[str, Any] = MappingProxyType({})
    """The resolved options this sidekick was built with (:func:`~pyskick.sidekicks.make_sidekick`
    sets them), recorded as ``TrainConfig.sidekick_options``; for one built by hand, what its
    class records (:class:`~pyskick.sidekicks.RewardMaps` and
    :class:`~pyskick.sidekicks.HybridSupervision` record their arguments), else empty."""
    reward_radius: int | None = None
    """The environment's reward-zeroing radius around visited views that this sidekick's
    reward maps assume (the NMS radius); the trainer sets ``TrainConfig.reward_radius`` from
    it. None leaves the config's."""
    shardable: bool = True
    """:meth:`compute_scores` treats samples independently, so ranks may score disjoint
    slices of the viewgrids and concatenate the results."""
    scores_file: Path | None = None
    """A precomputed score file (``pyskick score``) whose ``train`` split the default
    :meth:`prepare` loads instead of using the cache; it must have been computed for these
    viewgrids, model and options."""

    def prepare(self, grids: Tensor, *, T: int, device: torch.device) -> None:
        """Called once before training with the training viewgrids.

        The default, for a sidekick with scores (:func:`has_scores`), loads the scores of
        ``grids`` from :attr:`scores_file`, or else from the score cache, computing them on a
        miss (:func:`~pyskick.sidekicks.scores.cached_scores`); override it for a sidekick
        that needs something else.

        Args:
            grids: ``[n, N, M, C, H, W]`` uint8 training viewgrids (CPU).
            T: the glimpse budget of the episodes to come.
            device: where the trainer runs episodes; return tensors there.

        Raises:
            ValueError: :attr:`scores_file` holds stale scores or no ``train`` split, or is
                set for a sidekick without scores.
            FileNotFoundError: :attr:`scores_file` does not exist.
        """

        if not has_scores(self):
            if self.scores_file is not None:
                raise UserError(f"sidekick {self.name!r} has no scores to load from a file")
            return
        if self.scores_file is not None:
            scores = load_scores_file(self, grids, self.scores_file, T=T)
        else:
            scores = cached_scores(self, grids, T=T, device=device)
        self.load_scores(scores, T=T, device=device)

    def score_options(self, T: int) -> dict[str, Any]:
        """Everything the scores depend on besides the viewgrids and the code (a sidekick with
        scores overrides this).

        Plain JSON types only (model digests, NMS parameters, T when it matters): the cache
        key is built from these, the class that computes the scores, its distribution's
        version and the viewgrids' content, so two runs share scores exactly when they would
        compute the same ones.
        """
        raise NotImplementedError(f"sidekick {self.name!r} has no scores (no score options)")

    @no_scores  # a subclass that computes scores overrides it (has_scores)
    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        """Per-sample score arrays of ``grids`` ``[n, N, M, C, H, W]`` uint8.

        Returns:
            name -> CPU tensor whose first dimension is ``n`` (row i belongs to grid i).
        """
        raise NotImplementedError(f"sidekick {self.name!r} has no scores to compute")

    def load_scores(self, scores: dict[str, Tensor], *, T: int, device: torch.device) -> None:
        """Take :meth:`compute_scores`' output (possibly from a cache) before training."""
        raise NotImplementedError(f"sidekick {self.name!r} has no scores to load")

    def reward_maps(self, indices: Tensor, epoch: int) -> Tensor | None:
        """``[B, N, M]`` float32 raw reward maps of the batch, or None for no rewards."""
        return None

    def reward_scale(self, epoch: int) -> float:
        """Multiplier of the raw rewards collected from :meth:`reward_maps` at ``epoch``."""
        return 0.0

    def demonstrations(self, indices: Tensor, starts: Tensor, epoch: int) -> Demonstrations | None:
        """Forced actions for the batch starting at ``starts`` ``[B]``, or None for none.

        Returns:
            ``(actions [T-1, B] int64, mask [T-1, B] bool)`` on the training device.
        """
        return None

    def on_epoch_end(self, epoch: int) -> None:
        """Advance schedules after ``epoch`` (0-based) finished."""

    def state_dict(self) -> dict[str, Any]:
        """Schedule state as plain types (saved in checkpoints)."""
        return {}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Restore :meth:`state_dict`'s output."""


class NoSidekick(Sidekick):
    """No sidekick: no rewards, no demonstrations (the ltla baseline; registered as
    ``none``)."""
