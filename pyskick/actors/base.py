"""The actor extension point: who picks the camera motions, at training and at test time.

An actor either lets the act head choose (``learned``: sampled in training, argmax at
evaluation, trained by policy gradient), draws motions itself from the act head's shape
(``random``), or imposes whole trajectories computed with full observability
(``demo-actions``, through :meth:`Actor.forced_actions`). Only a learned actor's act head is
trained; the others train the reconstruction alone.

Registered actor factories are called as ``factory(one_view=PATH, spec=GridSpec,
config=TrainConfig)`` like sidekick factories.
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import torch
from torch import Tensor

from pyskick.models.act import ActionMode


class Actor(ABC):
    """Base class of actors.

    ``indices`` passed to :meth:`forced_actions` are positions in the viewgrids last given to
    :meth:`prepare` (the training set in training, the evaluated split at evaluation).
    """

    name: str = "actor"
    """Registry name."""
    learned: bool = False
    """The act head picks the motions and is trained by policy gradient."""
    full_observability: bool = False
    """The actor sees the whole grid (at test time too): results are not comparable with
    partially observing agents."""

    def prepare(self, grids: Tensor, *, T: int, device: torch.device) -> None:  # noqa: B027
        """Called with the viewgrids the actor will act on, before their episodes run.

        Args:
            grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (CPU).
            T: glimpses per episode.
            device: where episodes run.
        """

    @abstractmethod
    def mode(self, *, training: bool) -> ActionMode:
        """How motions that are not forced are drawn: ``"sample"``, ``"greedy"`` or
        ``"random"`` (see :func:`pyskick.models.select_actions`)."""

    def forced_actions(self, indices: Tensor, starts: Tensor) -> Tensor | None:
        """``[T-1, B]`` int64 motions imposed on samples ``indices`` ``[B]`` starting at
        ``starts`` ``[B]``, or None to draw them by :meth:`mode`."""
        return None


class LearnedActor(Actor):
    """The policy's act head: samples in training, takes the most likely motion at test."""

    name = "learned"
    learned = True

    def mode(self, *, training: bool) -> ActionMode:
        return "sample" if training else "greedy"


class RandomActor(Actor):
    """Uniform random motions (rnd-actions): only the reconstruction learns."""

    name = "random"

    def mode(self, *, training: bool) -> ActionMode:
        return "random"


def forced_demonstrations(
    actor: Actor, indices: Tensor, starts: Tensor
) -> tuple[Tensor, Tensor] | None:
    """An actor's forced motions in the form of demonstrations for
    :func:`~pyskick.training.collect_rollout`.

    Args:
        actor: the actor.
        indices: ``[B]`` positions in the viewgrids the actor was prepared on.
        starts: ``[B]`` start views.

    Returns:
        ``(actions [T-1, B] int64, mask [T-1, B] all True)``, or None when the actor forces
        nothing.
    """
    actions = actor.forced_actions(indices, starts)
    if actions is None:
        return None
    if not isinstance(actions, Tensor):
        raise TypeError(
            f"actor {actor.name!r}: forced_actions must return a tensor or None, "
            f"got {type(actions).__name__}"
        )
    return actions, torch.ones(actions.shape, dtype=torch.bool, device=actions.device)
