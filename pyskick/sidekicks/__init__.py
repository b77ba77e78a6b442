"""Sidekicks: helpers that shape or demonstrate the policy's training (paper §3.3–3.4).

The classes load lazily, so that the torch-free parts (:mod:`pyskick.options`,
:mod:`pyskick.sidekicks.defaults`) can be imported by plugin registration, which every
``pyskick`` command runs, without importing torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from pyskick.options import SidekickOption
    from pyskick.sidekicks.base import Demonstrations, NoSidekick, Sidekick
    from pyskick.sidekicks.factory import make_sidekick, run_options
    from pyskick.sidekicks.hybrid import HybridSupervision

_EXPORTS = {
    "Demonstrations": "pyskick.sidekicks.base",
    "NoSidekick": "pyskick.sidekicks.base",
    "Sidekick": "pyskick.sidekicks.base",
    "HybridSupervision": "pyskick.sidekicks.hybrid",
    "SidekickOption": "pyskick.options",
    "make_sidekick": "pyskick.sidekicks.factory",
    "run_options": "pyskick.sidekicks.factory",
}

__all__ = [
    "Demonstrations",
    "HybridSupervision",
    "NoSidekick",
    "Sidekick",
    "SidekickOption",
    "make_sidekick",
    "run_options",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(_EXPORTS[name]), name)
