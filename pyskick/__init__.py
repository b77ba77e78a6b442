"""pyskick: sidekick policy learning for active visual exploration.

A toolkit to train and study agents that look around 360° scenes and 3D objects with a few
glimpses and reconstruct what they have not seen (Ramakrishnan & Grauman, ECCV 2018), with
C++/CUDA kernels for the sidekicks' heavy lifting.

``import pyskick`` stays light (no torch): the subpackages load on first use, so
``pyskick.ops``, ``pyskick.data``, ``pyskick.training``, ... work without importing them first.
``python -m pyskick`` runs the command-line interface.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyskick.hookspecs import hookimpl  # plugins write @pyskick.hookimpl

if TYPE_CHECKING:
    from types import ModuleType

__version__ = "0.1.0"

__all__ = ["__version__", "hookimpl"]


def _submodules() -> list[str]:
    """The public subpackages and modules of pyskick (names without a leading underscore)."""
    import pkgutil

    return sorted(m.name for m in pkgutil.iter_modules(__path__) if not m.name.startswith("_"))


def __getattr__(name: str) -> ModuleType:
    """Import a public submodule on first access (``pyskick.ops`` after ``import pyskick``)."""
    import importlib
    import importlib.util

    if not name.startswith("_") and importlib.util.find_spec(f"{__name__}.{name}") is not None:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    """The public names, submodules included (for completion in a REPL)."""
    return sorted({*__all__, *_submodules()})
