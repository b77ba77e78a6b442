"""One step of a recorded episode drawn on a mosaic: the views seen so far, the moves made and
the move taken next (shared by the episode figures and the episode animations)."""

from __future__ import annotations

from typing import Any

import numpy as np

from pyskick.viz.episodes import Episodes
from pyskick.viz.layout import GridLayout, draw_move, mark_view, show_mosaic

CURRENT = "red"
"""Colour of the current view and of the action taken."""
SEEN = "gold"
"""Colour of the views seen before."""
PATH = "white"
"""Colour of the moves already made."""


def step_panel(
    ax: Any,
    ep: Episodes,
    k: int,
    t: int,
    image: np.ndarray,
    layout: GridLayout,
    title: str,
) -> None:
    """Draw step ``t`` of episode ``k``: ``image`` (an RGB mosaic ``[height, width, 3]``) with
    the moves made (white), the views seen before (gold), the current view (red) and the move
    taken next (red)."""
    show_mosaic(ax, image, layout, title)
    visited = ep.visited[k].tolist()
    for s in range(t):
        draw_move(ax, layout, visited[s], visited[s + 1], int(ep.moves[k, s, 1]), color=PATH)
    for view in set(visited[:t]) - {visited[t]}:
        mark_view(ax, layout, view, color=SEEN, linewidth=1.2)
    mark_view(ax, layout, visited[t], color=CURRENT)
    if t < len(visited) - 1:
        draw_move(ax, layout, visited[t], visited[t + 1], int(ep.moves[k, t, 1]), color=CURRENT)


def move_text(ep: Episodes, k: int, t: int) -> str:
    """The move episode ``k`` takes after glimpse ``t`` (0-based) as ``(d_elev, d_azim)``, or
    ``"last glimpse"``."""
    if t >= ep.moves.shape[1]:
        return "last glimpse"
    d_elev, d_azim = ep.moves[k, t].tolist()
    M = ep.decoded.shape[3]
    n0, n1 = int(ep.visited[k, t]) // M, int(ep.visited[k, t + 1]) // M
    clipped = " (elevation clipped)" if n1 - n0 != d_elev else ""
    return f"next move ({d_elev:+d}, {d_azim:+d}){clipped}"
