"""Sidekicks: helpers that shape or demonstrate the policy's training (paper §3.3–3.4).

The public API for sidekicks and the plugins that add them: the contract (:class:`Sidekick`,
:class:`ScoredSidekick`, :func:`has_scores`), the bases of the two kinds of help
(:class:`RewardMaps`, :class:`HybridSupervision`), building by name (:func:`for_run`, the one
resolver of a run's sidekick and its options, new or resumed; :func:`make_sidekick` for a new
run; :func:`scoring_inputs` for a factory's one-line refusals) and the declarations of the
built-in options (:data:`REWARD_OPTIONS`, :data:`HYBRID_OPTION`, :data:`NMS_PRESETS`,
:func:`nms_preset`).

The names load lazily, so that the torch-free parts (:class:`SidekickOption`, the option
declarations and presets) can be imported by plugin registration, which every ``pyskick``
command runs, without importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyskick.options import SidekickOption
    from pyskick.run_dir import checkpoint_digest
    from pyskick.sidekicks.base import Demonstrations, NoSidekick, ScoredSidekick, Sidekick
    from pyskick.sidekicks.defaults import HYBRID_OPTION, NMS_PRESETS, REWARD_OPTIONS, nms_preset
    from pyskick.sidekicks.factory import RunSidekick, for_run, make_sidekick, scoring_inputs
    from pyskick.sidekicks.hybrid import HybridSupervision
    from pyskick.sidekicks.reward_maps import RewardMaps
    from pyskick.sidekicks.scores import has_scores

_EXPORTS = {
    "Demonstrations": "pyskick.sidekicks.base",
    "NoSidekick": "pyskick.sidekicks.base",
    "ScoredSidekick": "pyskick.sidekicks.base",
    "Sidekick": "pyskick.sidekicks.base",
    "checkpoint_digest": "pyskick.run_dir",
    "has_scores": "pyskick.sidekicks.scores",
    "HYBRID_OPTION": "pyskick.sidekicks.defaults",
    "NMS_PRESETS": "pyskick.sidekicks.defaults",
    "REWARD_OPTIONS": "pyskick.sidekicks.defaults",
    "nms_preset": "pyskick.sidekicks.defaults",
    "HybridSupervision": "pyskick.sidekicks.hybrid",
    "RewardMaps": "pyskick.sidekicks.reward_maps",
    "SidekickOption": "pyskick.options",
    "make_sidekick": "pyskick.sidekicks.factory",
    "RunSidekick": "pyskick.sidekicks.factory",
    "for_run": "pyskick.sidekicks.factory",
    "scoring_inputs": "pyskick.sidekicks.factory",
}

__all__ = [
    "HYBRID_OPTION",
    "NMS_PRESETS",
    "REWARD_OPTIONS",
    "Demonstrations",
    "HybridSupervision",
    "NoSidekick",
    "RewardMaps",
    "RunSidekick",
    "ScoredSidekick",
    "Sidekick",
    "SidekickOption",
    "checkpoint_digest",
    "for_run",
    "has_scores",
    "make_sidekick",
    "nms_preset",
    "scoring_inputs",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
