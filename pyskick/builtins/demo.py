"""Built-in demonstration helpers: the demo sidekick (ours(demo)) and the demo-actions actor.

Both need the one-view model's coverage matrices, computed from the true viewgrids (full
observability); the sidekick uses them only in training, the actor at test time too.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyskick.errors import UserError
from pyskick.hookspecs import Register, hookimpl
from pyskick.sidekicks.defaults import HYBRID_OPTION

if TYPE_CHECKING:
    from pyskick.config import TrainConfig

DEMO_PLAN = Path(__file__).with_name("demo_plan.json")
"""The power plan of ``pyskick demo``'s default settings (:mod:`pyskick.experiments.power_plan`),
made by ``pyskick plan`` from a pilot of 32 seeds on the validation split (docs/reproduce.md,
"The demo's power plan")."""


def demo_sidekick(
    *,
    one_view: Path | None,
    channel_mean: Sequence[float] | None,
    config: TrainConfig,
    options: dict[str, Any],
    **_: object,
) -> object:
    """Greedy coverage demonstrations for the first T_sup steps, annealed (ours(demo)).

    Scores in batches of the config's ``eval_batch_size`` episodes."""
    from pyskick.sidekicks.demo import DemoSidekick
    from pyskick.sidekicks.factory import scoring_inputs

    one_view, channel_mean = scoring_inputs("demo", one_view, channel_mean)
    return DemoSidekick(
        one_view,
        channel_mean=channel_mean,
        hybrid_schedule=options["hybrid_schedule"],
        batch_size=config.eval_batch_size,
    )


def demo_actions_actor(
    *, one_view: Path | None, spec: object | None, config: object | None = None, **_: object
) -> object:
    """Greedy coverage motions (demo-actions); needs full observability at test time.

    Scores in batches of the config's ``eval_batch_size`` episodes (256 without a config)."""
    from pyskick.sidekicks.demo_actions import DemoActionsActor

    if one_view is None or spec is None:
        raise UserError(
            "actor demo-actions needs the one-view run that scores coverage and the dataset's "
            "grid spec: train from a one-view model (init) on a dataset file, or evaluate such "
            "a run"
        )
    batch_size = 256 if config is None else config.eval_batch_size  # type: ignore[attr-defined]
    return DemoActionsActor(
        one_view,
        channel_mean=spec.channel_mean,  # type: ignore[attr-defined]
        batch_size=batch_size,
    )


@hookimpl
def pyskick_register_sidekicks(register: Register) -> None:
    register("demo", demo_sidekick, options=[HYBRID_OPTION])


@hookimpl
def pyskick_register_actors(register: Register) -> None:
    register("demo-actions", demo_actions_actor)
