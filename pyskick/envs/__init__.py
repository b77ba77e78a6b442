"""Environments: the batched look-around task, running a policy in it, and its Gymnasium
interfaces.

Importing this package registers the Gymnasium id ``"pyskick/LookAround-v0"`` (entry points are
strings, so :mod:`pyskick.envs.gym` and the data module load only when an env is made)::

    import gymnasium
    import pyskick.envs

    env = gymnasium.make("pyskick/LookAround-v0", dataset="synthetic-scenes")
    envs = gymnasium.make_vec("pyskick/LookAround-v0", num_envs=32, dataset="synthetic-scenes")
"""

from __future__ import annotations

import gymnasium

from pyskick.envs.actions import ActionGrid
from pyskick.envs.lookaround import START_ZEROING, LookAroundEnv, Observation, StartZeroing, Step
from pyskick.envs.rollout import Rollout, collect_rollout, make_env
from pyskick.envs.topology import neighbourhood
from pyskick.envs.views import denormalize_views, normalize_views

GYM_ID = "pyskick/LookAround-v0"

# Registering an existing id warns; the guard keeps re-imports (importlib reloads, tests) quiet.
# The entry points are the factories that resolve ``reward=`` names into models, which live
# above this layer (pyskick.training.task_models); they build the classes of pyskick.envs.gym.
if GYM_ID not in gymnasium.registry:
    gymnasium.register(
        GYM_ID,
        entry_point="pyskick.training.task_models:make_lookaround",
        vector_entry_point="pyskick.training.task_models:make_lookaround_vector",
    )

__all__ = [
    "GYM_ID",
    "START_ZEROING",
    "ActionGrid",
    "LookAroundEnv",
    "Observation",
    "Rollout",
    "StartZeroing",
    "Step",
    "collect_rollout",
    "denormalize_views",
    "make_env",
    "neighbourhood",
    "normalize_views",
]
