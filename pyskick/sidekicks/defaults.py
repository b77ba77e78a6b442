"""Default settings of the built-in sidekicks, free of torch (read when plugins register).

- the declared options of the reward sidekick (:data:`REWARD_OPTIONS`, also for reward-map
  plugins such as rnd-rewards) and of the demonstrating sidekicks (:data:`HYBRID_OPTION`);
- NMS peaks and radius of the reward sidekick per dataset preset (docs/paper-reference.md §1.3);
- the schedules, scaled to the run's epoch budget. The paper decays the reward bonus 2–10x
  every 100–500 of its 1000 epochs and anneals T_sup every 50 epochs (docs/paper-reference.md §4.6,
  §4.7); the authors' code defaults never decay the bonus within a run. pyskick's defaults
  keep the paper's proportions for any number of epochs, so that a short run (``cpu-demo``)
  decays and anneals too (docs/deviations.md S7, S8).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING

from pyskick.options import OptionValue, SidekickOption

if TYPE_CHECKING:
    from pyskick.config import TrainConfig
    from pyskick.data.spec import GridSpec

NMS_PRESETS: Mapping[str, tuple[int, int]] = MappingProxyType(
    {"sun360": (4, 1), "modelnet-hard": (5, 2), "custom": (4, 1)}
)
"""``(k, radius)`` of the reward sidekick's NMS per dataset preset (read-only; a reward-map
plugin reuses them through the ``k`` and ``radius`` defaults of :data:`REWARD_OPTIONS`)."""

PAPER_EPOCHS = 1000
"""The paper's policy-training length, the unit of the schedule fractions below."""
DECAY_EVERY_FRACTION = 0.5
"""The reward bonus decays every half of the run (the paper: every 100–500 of 1000 epochs;
chosen on validation, docs/reproduce.md "The study")."""
DECAY_FACTOR = 2.0
"""... by this factor (the paper: 2–10)."""
HYBRID_FRACTION = 0.05
"""T_sup drops every 5 % of the run (the paper: 50 of 1000 epochs)."""


def nms_preset(preset: str | None) -> tuple[int, int]:
    """``(k, radius)`` for a dataset preset (``"custom"``'s for None or an unknown one)."""
    return NMS_PRESETS.get(preset or "custom", NMS_PRESETS["custom"])


def _epochs(config: TrainConfig | None) -> int:
    return PAPER_EPOCHS if config is None else config.epochs


def decay_every_default(_spec: GridSpec | None, config: TrainConfig | None) -> int:
    """Epochs between decays of the reward bonus: half the run, at least 1."""
    # Rounded up: a 5-epoch run decays once, after epoch 3, not twice.
    return max(1, math.ceil(_epochs(config) * DECAY_EVERY_FRACTION))


def hybrid_schedule_default(_spec: GridSpec | None, config: TrainConfig | None) -> int:
    """Epochs between decrements of T_sup: 5 % of the run, at least 1."""
    return max(1, math.ceil(_epochs(config) * HYBRID_FRACTION))


def _nms(spec: GridSpec | None) -> tuple[int, int]:
    return nms_preset(None if spec is None else spec.preset)


REWARD_OPTIONS = (
    SidekickOption(
        "scale",
        float,
        255e-4,
        "initial multiplier of the collected [0, 1] rewards (the authors' 1e-4 on 0-255 maps)",
        minimum=0.0,
    ),
    SidekickOption(
        "decay_every",
        int,
        decay_every_default,
        "divide the scale by decay_factor every this many epochs (default: half the run's epochs)",
        minimum=1,
    ),
    SidekickOption(
        "decay_factor",
        float,
        DECAY_FACTOR,
        "factor of each decay (1: no decay)",
        minimum=1.0,
    ),
    SidekickOption(
        "k",
        int,
        lambda spec, _config: _nms(spec)[0],
        "NMS peaks per viewgrid (default by dataset preset: 4 SUN360, 5 ModelNet Hard)",
        minimum=1,
    ),
    SidekickOption(
        "radius",
        int,
        lambda spec, _config: _nms(spec)[1],
        "NMS radius, also the environment's reward-zeroing radius (1 SUN360, 2 ModelNet Hard)",
        minimum=0,
    ),
)
"""Options of the reward sidekick (and of reward-map plugins such as rnd-rewards)."""


HYBRID_OPTION = SidekickOption(
    "hybrid_schedule",
    int,
    hybrid_schedule_default,
    "T_sup (demonstrated steps, T - 1 at first) drops by one every this many epochs "
    "(default: 5% of the run's epochs, the paper's 50 of 1000)",
    minimum=1,
)
"""The option of every demonstrating sidekick (ours(demo), expert-clone)."""


def hand_built_default(declared: Sequence[SidekickOption], name: str) -> OptionValue:
    """The default of option ``name`` for a sidekick built by hand, with no dataset or run: the
    ``custom`` preset's NMS and the paper's 1,000 epochs for the schedules. The declared options
    are the one source of defaults: a constructor's None means this, so that a sidekick built
    by hand runs what ``make_sidekick`` would build for a 1,000-epoch run."""
    (option,) = [option for option in declared if option.name == name]
    return option.default_for(None, None)
