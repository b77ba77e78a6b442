"""pyskick-rnd-rewards: the paper's rnd-rewards baseline as a pyskick plugin.

pyskick loads this module through the entry point in ``pyproject.toml`` and calls its
``@pyskick.hookimpl`` functions. It imports nothing heavy: every ``pyskick`` command loads the
plugins, so torch and the sidekick class are imported by the factory, when a run asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyskick
from pyskick.sidekicks import REWARD_OPTIONS  # torch-free

if TYPE_CHECKING:
    from pyskick.data import GridSpec
    from pyskick.hookspecs import Register, RegisterMethod
    from pyskick.training import TrainConfig
    from pyskick_rnd_rewards.sidekick import RandomRewardSidekick

__all__ = ["pyskick_register_methods", "pyskick_register_sidekicks", "rnd_rewards"]


def rnd_rewards(
    *, spec: GridSpec, config: TrainConfig, options: dict[str, Any], **_: object
) -> RandomRewardSidekick:
    """Random reward maps with the rew sidekick's peaks and spread (the rnd-rewards baseline).

    Args:
        spec: the dataset's geometry (the default k and radius follow its preset, as for
            ``rew``).
        config: the run's config; its seed seeds the maps.
        options: the rew sidekick's options, resolved (``k``, ``radius``, ``scale``,
            ``decay_every``, ``decay_factor``): same peaks, spread and schedule.
        **_: the other factory arguments (``one_view``), not needed here.
    """
    from pyskick_rnd_rewards.sidekick import RandomRewardSidekick

    return RandomRewardSidekick(seed=config.seed, **options)


@pyskick.hookimpl
def pyskick_register_sidekicks(register: Register) -> None:
    # The rew sidekick's options: the same peaks, spread and schedule, random places.
    register("rnd-rewards", rnd_rewards, options=REWARD_OPTIONS)


@pyskick.hookimpl
def pyskick_register_methods(register: RegisterMethod) -> None:
    # Table 1's third row (index 2): the rew sidekick's schedule with random reward maps.
    register(
        "rnd-rewards",
        label="Random reward maps shaped like the rew sidekick's",
        sidekick="rnd-rewards",
        position=2,
    )
