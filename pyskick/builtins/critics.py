"""Built-in critics: average (running means), critic (learned) and asymm-critic (asymm-ac).

A critic factory is called as ``factory(*, model_config=ModelConfig, policy=CompletionPolicy)``
and returns an ``nn.Module`` value head, or None for the average baseline (no network). The
module has a bool attribute ``full_observability``: True makes the trainer call it as
``critic(hidden, proprio, t, grid, azimuth=...)`` with the whole absolute grid, False as
``critic(hidden, proprio, t, azimuth=...)``; either returns ``[B]`` values.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyskick.hookspecs import Register, hookimpl

if TYPE_CHECKING:
    from torch import nn

    from pyskick.models import CompletionPolicy, ModelConfig


def average_critic(**_: object) -> None:
    """Running means of the final reward and the sidekick rewards (REINFORCE baseline)."""
    return None


def partial_observability_critic(*, model_config: ModelConfig, **_: object) -> nn.Module:
    """Learned value from the act head's inputs (partial observability: ours+ac)."""
    from pyskick.models import PartialObservabilityCritic

    return PartialObservabilityCritic(model_config)


def full_observability_critic(
    *, model_config: ModelConfig, policy: CompletionPolicy, **_: object
) -> nn.Module:
    """Learned value that also sees the whole grid and true pose (the asymm-ac baseline)."""
    from pyskick.models import FullObservabilityCritic

    return FullObservabilityCritic(model_config, policy.sense_im)


@hookimpl
def pyskick_register_critics(register: Register) -> None:
    register("average", average_critic)
    register("critic", partial_observability_critic)
    register("asymm-critic", full_observability_critic)
