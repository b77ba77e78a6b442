"""How positions on the ``N x M`` viewgrid connect: moves and neighbourhoods.

Each axis either wraps (a ring: azimuth by default) or clips at its borders (elevation by
default). Moves and reward neighbourhoods use the same rule, so a sidekick reward is never zeroed
across a border the camera cannot cross (the authors wrapped elevation there:
docs/paper-reference.md §8.5).
"""

from __future__ import annotations

import torch
from torch import Tensor


def move_axis(index: Tensor, delta: Tensor, size: int, *, wrap: bool) -> Tensor:
    """Index after a move of ``delta`` on an axis of ``size`` cells (modulo if it wraps)."""
    moved = index + delta
    return moved.remainder(size) if wrap else moved.clamp(0, size - 1)


def axis_distance(size: int, *, wrap: bool, device: torch.device | str = "cpu") -> Tensor:
    """``[size, size]`` int64 distances between cells of one axis (ring distance when it wraps)."""
    cells = torch.arange(size, device=device)
    distance = (cells[:, None] - cells[None, :]).abs()
    return torch.minimum(distance, size - distance) if wrap else distance


def neighbourhood(
    n_elevations: int,
    n_azimuths: int,
    radius: int,
    *,
    wrap_elevation: bool,
    wrap_azimuth: bool,
    device: torch.device | str = "cpu",
) -> Tensor:
    """Which views lie within Chebyshev distance ``radius`` of each other.

    Returns:
        ``[V, V]`` bool with ``V = N * M`` and view index ``v = n * M + m``; row ``v`` marks
        the ``(2 * radius + 1)``-square window around ``v`` (fewer cells at a clipped border).
    """
    near_elev = axis_distance(n_elevations, wrap=wrap_elevation, device=device) <= radius
    near_azim = axis_distance(n_azimuths, wrap=wrap_azimuth, device=device) <= radius
    near = near_elev[:, None, :, None] & near_azim[None, :, None, :]  # [N, M, N, M]
    V = n_elevations * n_azimuths
    return near.reshape(V, V)
