"""Built-in sidekicks: none (ltla) and rew (ours(rew)).

A sidekick factory is called as ``factory(one_view=PATH, spec=GridSpec, channel_mean=tuple,
config=TrainConfig, options=dict)`` with the one-view run the policy starts from, the dataset's
geometry (None for viewgrids built in memory), its channel mean, the run's config and the
sidekick's resolved options (:mod:`pyskick.options`), and returns a
:class:`pyskick.sidekicks.Sidekick`.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyskick.hookspecs import Register, hookimpl
from pyskick.sidekicks.defaults import REWARD_OPTIONS

if TYPE_CHECKING:
    from pyskick.config import TrainConfig


def no_sidekick(**_: object) -> object:
    """No sidekick: the policy learns from the reconstruction reward alone (ltla)."""
    from pyskick.sidekicks import NoSidekick

    return NoSidekick()


def reward_sidekick(
    *,
    one_view: Path | None,
    channel_mean: Sequence[float] | None,
    config: TrainConfig,
    options: dict[str, Any],
    **_: object,
) -> object:
    """Reward shaping from one-view scores after NMS (ours(rew)); needs full observability.

    Scores in batches of the config's ``eval_batch_size`` episodes."""
    from pyskick.sidekicks.factory import scoring_inputs
    from pyskick.sidekicks.reward import RewardSidekick

    one_view, channel_mean = scoring_inputs("rew", one_view, channel_mean)
    return RewardSidekick(
        one_view,
        channel_mean=channel_mean,
        batch_size=config.eval_batch_size,
        **options,
    )


@hookimpl
def pyskick_register_sidekicks(register: Register) -> None:
    register("none", no_sidekick)
    register("rew", reward_sidekick, options=REWARD_OPTIONS)
