"""Building a registered actor by name (``--actor NAME``, ``TrainConfig.actor``)."""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

from pyskick.actors.base import Actor

if TYPE_CHECKING:
    from pyskick.config import TrainConfig
    from pyskick.data.spec import GridSpec


def make_actor(
    name: str,
    *,
    one_view: str | os.PathLike[str] | None = None,
    spec: GridSpec | None = None,
    config: TrainConfig | None = None,
    field: str | None = None,
) -> Actor:
    """Call the registered factory of actor ``name``.

    The factory gets ``one_view=``, ``spec=`` and ``config=`` as given (None where the caller
    has none; :class:`~pyskick.actors.LearnedActor` and :class:`~pyskick.actors.RandomActor`
    need none). The actor is not prepared.

    Args:
        name: a registered actor name or alias.
        one_view: the one-view run (or checkpoint) the policy started from.
        spec: the dataset's geometry.
        config: the run's config.
        field: what held the name, named in the error (e.g. ``"TrainConfig.actor"``).

    Raises:
        UnknownNameError: (a ValueError) no such actor; lists the valid names.
        TypeError: the factory did not return an :class:`Actor`.
    """
    from pyskick.plugins import lookup

    entry = lookup("actor", name, field=field)
    actor = entry.factory(one_view=one_view, spec=spec, config=config)
    if not isinstance(actor, Actor):
        raise TypeError(
            f"actor {name!r} (plugin {entry.plugin}) built a {type(actor).__name__}, "
            "not a pyskick.actors.Actor"
        )
    return actor
