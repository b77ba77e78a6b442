"""pyskick-expert-clone: the expert-clone baseline of the paper (docs/paper-reference.md §5.7).

Registers the sidekick ``expert-clone`` and Table 1's row of that name: an expert that sees the
whole viewgrid and the true pose is trained by REINFORCE to drive the one-view agent, and its
greedy trajectories then supervise the agent in the same hybrid schedule as ours(demo)::

    pyskick train --dataset synthetic-scenes --preset cpu-demo --sidekick expert-clone --out runs/ec

Implementation modules (imported only when the sidekick is built, so ``pyskick --help`` stays
fast): :mod:`~pyskick_expert_clone.expert` (the network), :mod:`~pyskick_expert_clone.training`
(the RL loop and the trajectory dump), :mod:`~pyskick_expert_clone.sidekick`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import pyskick
from pyskick.sidekicks import HYBRID_OPTION, SidekickOption  # torch-free

if TYPE_CHECKING:
    from pyskick.hookspecs import Register, RegisterMethod


EXPERT_EPOCHS = SidekickOption(
    "expert_epochs",
    int,
    lambda _spec, config: 100 if config is None else config.pretrain_epochs,
    "epochs of the expert's RL training (default: the config's pretrain_epochs; fixed when the "
    "run starts, so a resumed, longer run keeps the same expert and cached trajectories)",
    minimum=1,
)
OPTIONS = (HYBRID_OPTION, EXPERT_EPOCHS)
"""expert-clone's options: the hybrid schedule of ours(demo) and the expert's training length."""


def expert_clone_sidekick(
    *, one_view: Any, channel_mean: Any, config: Any, options: dict[str, Any], **_: Any
) -> Any:
    """Behaviour cloning of an expert trained with full observability (expert-clone).

    Args:
        one_view: the one-view run or checkpoint the agent starts from.
        channel_mean: the dataset's per-channel mean (0-255).
        config: the run's :class:`pyskick.training.TrainConfig`: the expert gets its batch
            size, optimiser settings, entropy weight and seed.
        options: ``hybrid_schedule`` (as ours(demo)) and ``expert_epochs``, resolved.
    """
    from pyskick.sidekicks import scoring_inputs
    from pyskick_expert_clone.sidekick import ExpertCloneSidekick
    from pyskick_expert_clone.training import ExpertSettings

    one_view, channel_mean = scoring_inputs("expert-clone", one_view, channel_mean)
    return ExpertCloneSidekick(
        one_view,
        channel_mean=channel_mean,
        settings=ExpertSettings.from_config(config, epochs=options["expert_epochs"]),
        hybrid_schedule=options["hybrid_schedule"],
        batch_size=config.eval_batch_size,
    )


@pyskick.hookimpl
def pyskick_register_sidekicks(register: Register) -> None:
    register("expert-clone", expert_clone_sidekick, options=OPTIONS)


@pyskick.hookimpl
def pyskick_register_methods(register: RegisterMethod) -> None:
    # Table 1's sixth row (index 5).
    register(
        "expert-clone",
        label="Behaviour cloning of an expert trained with full observability",
        sidekick="expert-clone",
        position=5,
    )
