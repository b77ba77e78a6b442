"""Defaults of ``render_mesh_views`` shared by its wrapper and its twin.

Its own module so that the twin in :mod:`pyskick.ops._reference` need not import the wrapper
(which imports the twin): the ops package has no import cycle.
"""

from __future__ import annotations

import torch

# [L, 4] float32 rows (dx, dy, dz, intensity): one key light above-front-right and a weaker
# fill light from the back-left.
DEFAULT_LIGHTS = torch.tensor([[1.0, 1.5, 2.0, 0.6], [-1.5, 0.5, -1.0, 0.4]])
