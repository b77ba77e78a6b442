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
a sidekick with scores is a :class:`ScoredSidekick` (:func:`has_scores`, the one test of it),
which declares them: :meth:`ScoredSidekick.score_options` names everything the scores depend on
besides the viewgrids and the code, :meth:`ScoredSidekick.compute_scores` computes per-sample
arrays, :meth:`ScoredSidekick.load_scores` takes them before training;
:attr:`ScoredSidekick.shardable` says whether ranks may score slices. Its
:meth:`ScoredSidekick.prepare` ties them together: it loads :attr:`ScoredSidekick.scores_file`
when one was handed over (``pyskick train --scores``), refusing stale scores, and otherwise
takes them from the score cache, computing them there on a miss (sharded under torchrun;
:mod:`pyskick.sidekicks.scores`). A plain :class:`Sidekick` subclass that defines one of the
three is refused when the class is created (it would never be called).

**Names.** A sidekick's :attr:`Sidekick.name` is the name it was registered under, stamped by
:func:`~pyskick.sidekicks.make_sidekick` (classes do not name themselves): runs record it as
``TrainConfig.sidekick`` and in checkpoints. One built by hand is named by its class
(``module.QualName``), which no registry resolves: resuming such a run needs the sidekick
object again.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any, ClassVar

import torch
from torch import Tensor

from pyskick.run_dir import checkpoint_digest  # noqa: F401 - its old home, still importable
from pyskick.sidekicks.scores import (
    cached_scores,
    class_path,
    load_scores_file,
)

SCORE_METHODS = ("score_options", "compute_scores", "load_scores")
"""The score trio: a :class:`ScoredSidekick`'s, and only its."""

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
    _scored: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        defined = [m for m in SCORE_METHODS if m in vars(cls)]
        if defined and not cls._scored:
            raise TypeError(
                f"{cls.__qualname__} defines {', '.join(defined)}: a sidekick with scores "
                "subclasses pyskick.sidekicks.ScoredSidekick"
            )

    def prepare(self, grids: Tensor, *, T: int, device: torch.device) -> None:
        """Called once before training with the training viewgrids (the default does
        nothing; :class:`ScoredSidekick` loads its scores here).

        Args:
            grids: ``[n, N, M, C, H, W]`` uint8 training viewgrids (CPU).
            T: the glimpse budget of the episodes to come.
            device: where the trainer runs episodes; return tensors there.
        """

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


class ScoredSidekick(Sidekick, ABC):
    """Base class of the sidekicks that precompute scores from full observability: the score
    trio (:meth:`score_options`, :meth:`compute_scores`, :meth:`load_scores`), whether ranks
    may shard the scoring (:attr:`shardable`) and a precomputed file (:attr:`scores_file`).

    A subclass implements the three methods; :meth:`prepare` gets the scores from
    :attr:`scores_file`, or else from the score cache, computing them on a miss
    (:func:`~pyskick.sidekicks.scores.cached_scores`), and hands them to :meth:`load_scores`.
    """

    _scored: ClassVar[bool] = True

    shardable: bool = True
    """:meth:`compute_scores` treats samples independently, so ranks may score disjoint
    slices of the viewgrids and concatenate the results (False: rank 0 scores them all and
    broadcasts them)."""
    scores_file: Path | None = None
    """A precomputed score file (``pyskick score``) whose ``train`` split :meth:`prepare` loads
    instead of using the cache; it must have been computed for these viewgrids, model and
    options."""

    def prepare(self, grids: Tensor, *, T: int, device: torch.device) -> None:
        """Load the scores of ``grids`` from :attr:`scores_file`, or else from the score cache,
        computing them on a miss; then :meth:`load_scores`.

        Args:
            grids: ``[n, N, M, C, H, W]`` uint8 training viewgrids (CPU).
            T: the glimpse budget of the episodes to come.
            device: where the trainer runs episodes; return tensors there.

        Raises:
            ValueError: :attr:`scores_file` holds stale scores or no ``train`` split.
            FileNotFoundError: :attr:`scores_file` does not exist.
        """
        if self.scores_file is not None:
            scores = load_scores_file(self, grids, self.scores_file, T=T)
        else:
            scores = cached_scores(self, grids, T=T, device=device)
        self.load_scores(scores, T=T, device=device)

    @abstractmethod
    def score_options(self, T: int) -> dict[str, Any]:
        """Everything the scores depend on besides the viewgrids and the code.

        Plain JSON types only (model digests, NMS parameters, T when it matters): the cache
        key is built from these, the class that computes the scores, its distribution's
        version and the viewgrids' content, so two runs share scores exactly when they would
        compute the same ones.
        """

    @abstractmethod
    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        """Per-sample score arrays of ``grids`` ``[n, N, M, C, H, W]`` uint8.

        Returns:
            name -> CPU tensor whose first dimension is ``n`` (row i belongs to grid i).
        """

    @abstractmethod
    def load_scores(self, scores: dict[str, Tensor], *, T: int, device: torch.device) -> None:
        """Take :meth:`compute_scores`' output (possibly from a cache) before training."""


class NoSidekick(Sidekick):
    """No sidekick: no rewards, no demonstrations (the ltla baseline; registered as
    ``none``)."""
