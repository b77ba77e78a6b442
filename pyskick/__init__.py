"""pyskick: sidekick policy learning for active visual exploration.

A toolkit to train and study agents that look around 360° scenes and 3D objects with a few
glimpses and reconstruct what they have not seen (Ramakrishnan & Grauman, ECCV 2018), with
C++/CUDA kernels for the sidekicks' heavy lifting.
"""

from __future__ import annotations

__version__ = "0.1.0"

from pyskick.hookspecs import hookimpl  # plugins write @pyskick.hookimpl

__all__ = ["__version__", "hookimpl"]
