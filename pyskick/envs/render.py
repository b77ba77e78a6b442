"""Pictures of a look-around episode for the Gymnasium ``render`` modes.

:func:`episode_frame` lays one viewgrid out as an RGB image (elevation rows, azimuth columns),
frames the views seen so far and, more boldly, the current one, and puts the current
reconstruction beside it when there is one. :class:`HumanWindow` shows such frames in a
matplotlib window (the ``"human"`` mode).
"""

from __future__ import annotations

from typing import Any

import numpy as np

VISITED_COLOUR = (40, 200, 60)
"""Frame of a view seen earlier in the episode (green)."""
CURRENT_COLOUR = (230, 40, 40)
"""Frame of the view the agent looks at now (red)."""
_BACKGROUND = (255, 255, 255)
_BORDER = 2  # pixels of frame around every view
_GAP = 8  # pixels between the viewgrid and the reconstruction


def _as_rgb(views: np.ndarray) -> np.ndarray:
    """``[N, M, C, H, W]`` 0–255 views as ``[N, M, H, W, 3]`` uint8 (grey repeated, C > 3 cut)."""
    views = np.clip(np.rint(views), 0, 255).astype(np.uint8)
    channels = views.shape[2]
    if channels == 1:
        views = np.repeat(views, 3, axis=2)
    elif channels == 2:
        views = np.concatenate([views, views[:, :, :1]], axis=2)
    return views[:, :, :3].transpose(0, 1, 3, 4, 2)


def _tile(views: np.ndarray, frames: dict[int, tuple[int, int, int]]) -> np.ndarray:
    """``[N, M, H, W, 3]`` views tiled row by row, each in a frame coloured by ``frames``."""
    N, M, H, W, _ = views.shape
    cell_h, cell_w = H + 2 * _BORDER, W + 2 * _BORDER
    image = np.empty((N * cell_h, M * cell_w, 3), dtype=np.uint8)
    image[:] = _BACKGROUND
    for n in range(N):
        for m in range(M):
            top, left = n * cell_h, m * cell_w
            colour = frames.get(n * M + m)
            if colour is not None:
                image[top : top + cell_h, left : left + cell_w] = colour
            image[top + _BORDER : top + _BORDER + H, left + _BORDER : left + _BORDER + W] = views[
                n, m
            ]
    return image


def episode_frame(
    grid: np.ndarray,
    visited: np.ndarray,
    current: int,
    reconstruction: np.ndarray | None = None,
) -> np.ndarray:
    """One RGB picture of an episode.

    Args:
        grid: ``[N, M, C, H, W]`` the viewgrid, raw 0–255 intensities (absolute frame).
        visited: ``[N * M]`` bool, the views seen so far.
        current: the view index ``n * M + m`` looked at now.
        reconstruction: ``[N, M, C, H, W]`` the current reconstruction in the absolute frame,
            0–255 (clipped), or None.

    Returns:
        ``[height, width, 3]`` uint8: the viewgrid with green frames around the visited views
        and a red one around the current view, then (if given) the reconstruction to its right.
    """
    frames = {int(v): VISITED_COLOUR for v in np.flatnonzero(visited)}
    frames[int(current)] = CURRENT_COLOUR
    left = _tile(_as_rgb(grid), frames)
    if reconstruction is None:
        return left
    right = _tile(_as_rgb(reconstruction), {})
    gap = np.empty((left.shape[0], _GAP, 3), dtype=np.uint8)
    gap[:] = _BACKGROUND
    return np.concatenate([left, gap, right], axis=1)


class HumanWindow:
    """A matplotlib window showing frames as they come (the ``"human"`` render mode).

    Args:
        fps: frames per second: each :meth:`show` pauses ``1 / fps`` seconds.

    Raises:
        ImportError: matplotlib is not installed.
    """

    def __init__(self, fps: float) -> None:
        import matplotlib.pyplot as plt  # optional: only the "human" mode needs it

        self._plt = plt
        self._fps = fps
        self._figure: Any = None
        self._image: Any = None

    def show(self, frame: np.ndarray) -> None:
        """Draw ``frame`` (``[height, width, 3]`` uint8) in the window, opening it if needed."""
        plt = self._plt
        if self._figure is None or not plt.fignum_exists(self._figure.number):
            self._figure, axes = plt.subplots(num="pyskick LookAround")
            axes.set_axis_off()
            self._image = axes.imshow(frame)
        else:
            self._image.set_data(frame)
        self._figure.canvas.draw_idle()
        plt.pause(1.0 / self._fps)

    def close(self) -> None:
        """Close the window (nothing if it was never opened)."""
        if self._figure is not None:
            self._plt.close(self._figure)
            self._figure = None
