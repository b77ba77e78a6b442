"""pyskick-rnd-rewards: the paper's rnd-rewards baseline as a pyskick plugin.

pyskick loads this module through the entry point in ``pyproject.toml`` and calls its
``@pyskick.hookimpl`` functions. It imports nothing heavy: every ``pyskick`` command loads the
plugins, so torch and the sidekick class are imported by the factory, when a run asks for them.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyskick

if TYPE_CHECKING:
    from pyskick.data import GridSpec
    from pyskick.hookspecs import Register
    from pyskick.training import TrainConfig
    from pyskick_rnd_rewards.sidekick import RandomRewardSidekick

__all__ = ["pyskick_register_sidekicks", "rnd_rewards"]


def rnd_rewards(*, spec: GridSpec, config: TrainConfig, **_: object) -> RandomRewardSidekick:
    """Random reward maps with the rew sidekick's peaks and spread (the rnd-rewards baseline).

    Args:
        spec: the dataset's geometry; its preset picks k and the radius as for ``rew``.
        config: the run's config; its seed seeds the maps.
        **_: the other factory arguments (``one_view``), not needed here.
    """
    from pyskick.sidekicks.reward import NMS_PRESETS
    from pyskick_rnd_rewards.sidekick import RandomRewardSidekick

    k, radius = NMS_PRESETS[spec.preset]
    return RandomRewardSidekick(seed=config.seed, k=k, radius=radius)


@pyskick.hookimpl
def pyskick_register_sidekicks(register: Register) -> None:
    register("rnd-rewards", rnd_rewards)
