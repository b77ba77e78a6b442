"""Built-in actors: learned (the act head) and random (rnd-actions).

An actor factory is called as ``factory(one_view=PATH | None, spec=GridSpec | None,
config=TrainConfig | None)`` (the one-view run the policy started from, the dataset's geometry,
the run's config; None where the caller has none, e.g. evaluation of a run without a recorded
one-view model) and returns a :class:`pyskick.actors.Actor`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyskick.hookspecs import Register, hookimpl

if TYPE_CHECKING:
    from pyskick.actors import Actor


def learned_actor(**_: object) -> Actor:
    """The policy's act head: sampled in training (policy gradient), greedy at test."""
    from pyskick.actors import LearnedActor

    return LearnedActor()


def random_actor(**_: object) -> Actor:
    """Uniform random motions from a seeded generator; only reconstruction trains."""
    from pyskick.actors import RandomActor

    return RandomActor()


@hookimpl
def pyskick_register_actors(register: Register) -> None:
    register("learned", learned_actor)
    register("random", random_actor)
