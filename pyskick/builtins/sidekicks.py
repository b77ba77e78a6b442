"""Built-in sidekicks: none (ltla) and rew (ours(rew)).

A sidekick factory is called as ``factory(one_view=PATH, spec=GridSpec, config=TrainConfig)``
with the one-view run the policy starts from, the dataset's geometry and the run's config, and
returns a :class:`pyskick.sidekicks.Sidekick`.
"""

from __future__ import annotations

from pathlib import Path

from pyskick.hookspecs import Register, hookimpl


def no_sidekick(**_: object) -> object:
    """No sidekick: the policy learns from the reconstruction reward alone (ltla)."""
    from pyskick.sidekicks import NoSidekick

    return NoSidekick()


def reward_sidekick(*, one_view: Path, spec: object, config: object, **_: object) -> object:
    """Reward shaping from one-view scores after NMS (ours(rew)); needs full observability.
    Scores in batches of the config's ``eval_batch_size`` episodes."""
    from pyskick.sidekicks.reward import NMS_PRESETS, RewardSidekick

    k, radius = NMS_PRESETS[spec.preset]  # type: ignore[attr-defined]
    return RewardSidekick(
        one_view,
        channel_mean=spec.channel_mean,  # type: ignore[attr-defined]
        k=k,
        radius=radius,
        batch_size=config.eval_batch_size,  # type: ignore[attr-defined]
    )


@hookimpl
def pyskick_register_sidekicks(register: Register) -> None:
    register("none", no_sidekick)
    register("rew", reward_sidekick)
