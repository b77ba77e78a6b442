"""Actors: who picks the camera motions (the policy, random motions, or a sidekick)."""

from __future__ import annotations

from pyskick.actors.base import Actor, LearnedActor, RandomActor
from pyskick.actors.factory import make_actor

__all__ = ["Actor", "LearnedActor", "RandomActor", "make_actor"]
