"""The completion agent's networks: policy (Sense, Fuse, Aggregate, Decode, Act) and critics.

Architecture and defaults follow the authors' code (docs/paper-reference.md §3); ``docs/model.md``
has the per-preset tables, the initialisation and the freezing behaviour.
"""

from __future__ import annotations

from pyskick.models.act import ACTION_MODES, ActionMode, select_actions
from pyskick.models.config import INIT_SCHEMES, PRESETS, InitScheme, ModelConfig, preset
from pyskick.models.critics import (
    FullObservabilityCritic,
    GridEncoder,
    PartialObservabilityCritic,
)
from pyskick.models.init import init_weights_
from pyskick.models.policy import CompletionPolicy, FrozenBatchNorm, LSTMState, StepOutput

__all__ = [
    "ACTION_MODES",
    "INIT_SCHEMES",
    "PRESETS",
    "ActionMode",
    "CompletionPolicy",
    "FrozenBatchNorm",
    "FullObservabilityCritic",
    "GridEncoder",
    "InitScheme",
    "LSTMState",
    "ModelConfig",
    "PartialObservabilityCritic",
    "StepOutput",
    "init_weights_",
    "preset",
    "select_actions",
]
