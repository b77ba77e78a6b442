"""Drawing viewgrids: the N x M mosaic (row 0 = highest elevation, azimuth increasing to the
right), view boxes and camera moves as arrows between view centres."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pyskick.data.preview import viewgrid_image
from pyskick.envs.views import denormalize_views

GAP = 2
"""Pixels between neighbouring views in a mosaic."""


@dataclass(frozen=True)
class GridLayout:
    """Pixel geometry of a mosaic of ``N x M`` views of ``H x W`` pixels with ``gap``."""

    N: int
    M: int
    H: int
    W: int
    gap: int = GAP

    @classmethod
    def of(cls, grid: Tensor) -> GridLayout:
        """The layout of a ``[N, M, C, H, W]`` grid."""
        N, M, _, H, W = grid.shape
        return cls(int(N), int(M), int(H), int(W))

    @property
    def size(self) -> tuple[int, int]:
        """``(height, width)`` of the mosaic in pixels."""
        return (
            self.N * self.H + (self.N - 1) * self.gap,
            self.M * self.W + (self.M - 1) * self.gap,
        )

    def corner(self, n: float, m: float) -> tuple[float, float]:
        """``(x, y)`` of the top-left pixel edge of view (n, m) (m may lie off the grid)."""
        return m * (self.W + self.gap) - 0.5, n * (self.H + self.gap) - 0.5

    def center(self, n: float, m: float) -> tuple[float, float]:
        """``(x, y)`` of the centre of view (n, m)."""
        x, y = self.corner(n, m)
        return x + self.W / 2, y + self.H / 2


def to_uint8(views: Tensor, channel_mean: Sequence[float] | None) -> Tensor:
    """Normalised views ``[..., C, H, W]`` back to uint8 0–255 for display."""
    C = views.shape[-3]
    mean = torch.zeros(C) if channel_mean is None else torch.as_tensor(channel_mean).float()
    return denormalize_views(views.cpu(), mean).round().clamp(0, 255).to(torch.uint8)


def mosaic(grid: Tensor) -> np.ndarray:
    """uint8 ``[N, M, C, H, W]`` -> RGB mosaic ``[height, width, 3]`` uint8 (white gaps)."""
    return viewgrid_image(grid.cpu(), gap=GAP)


def show_mosaic(ax: Any, image: np.ndarray, layout: GridLayout, title: str) -> None:
    """Draw a mosaic upright (row 0 on top, not mirrored) with view-index ticks."""
    height, width = layout.size
    ax.imshow(image, interpolation="nearest", extent=(-0.5, width - 0.5, height - 0.5, -0.5))
    ax.set_xlim(-0.5, width - 0.5)
    ax.set_ylim(height - 0.5, -0.5)
    ax.set_xticks([layout.center(0, m)[0] for m in range(layout.M)], range(layout.M))
    ax.set_yticks([layout.center(n, 0)[1] for n in range(layout.N)], range(layout.N))
    ax.tick_params(labelsize=7, length=2, pad=1)
    ax.set_xlabel("azimuth", fontsize=7, labelpad=1)
    ax.set_ylabel("elevation", fontsize=7, labelpad=1)
    ax.set_title(title, fontsize=8)


def mark_view(
    ax: Any, layout: GridLayout, view: int, *, color: str, linewidth: float = 2.0
) -> None:
    """Outline view ``view = n * M + m``."""
    from matplotlib.patches import Rectangle

    n, m = divmod(int(view), layout.M)
    x, y = layout.corner(n, m)
    ax.add_patch(
        Rectangle(
            (x + 0.5, y + 0.5),
            layout.W - 1,
            layout.H - 1,
            fill=False,
            edgecolor=color,
            linewidth=linewidth,
        )
    )


def label_view(ax: Any, layout: GridLayout, view: int, text: str, *, color: str) -> None:
    """Write ``text`` in the top-left corner of a view."""
    n, m = divmod(int(view), layout.M)
    x, y = layout.corner(n, m)
    ax.text(
        x + 1.5,
        y + 1.5,
        text,
        color=color,
        fontsize=7,
        fontweight="bold",
        ha="left",
        va="top",
        bbox={"facecolor": "black", "alpha": 0.5, "pad": 0.5, "linewidth": 0},
    )


def draw_move(
    ax: Any,
    layout: GridLayout,
    source: int,
    target: int,
    d_azim: int,
    *,
    color: str,
    wrap_azimuth: bool = True,
    linewidth: float = 1.8,
) -> None:
    """An arrow from view ``source`` to view ``target`` (absolute indices ``n * M + m``).

    ``d_azim`` is the commanded azimuth move: with a wrapping azimuth a move across the seam
    leaves one side of the mosaic and re-enters on the other (two clipped segments). A move that
    kept the camera in place (stay, or a clipped elevation move) is drawn as a ring.
    """
    from matplotlib.patches import Circle, FancyArrowPatch

    n0, m0 = divmod(int(source), layout.M)
    n1, m1 = divmod(int(target), layout.M)
    if source == target:
        x, y = layout.center(n0, m0)
        ring = Circle((x, y), 0.3 * min(layout.H, layout.W), fill=False, edgecolor=color)
        ring.set_linewidth(linewidth)
        ax.add_patch(ring)
        return
    reach = m0 + d_azim if wrap_azimuth else m1
    pieces = [((n0, m0), (n1, reach), "-|>")]
    if reach != m1:  # crossed the azimuth seam
        pieces = [((n0, m0), (n1, reach), "-"), ((n0, m1 - d_azim), (n1, m1), "-|>")]
    for (a_n, a_m), (b_n, b_m), style in pieces:
        arrow = FancyArrowPatch(
            layout.center(a_n, a_m),
            layout.center(b_n, b_m),
            arrowstyle=style,
            mutation_scale=10,
            color=color,
            linewidth=linewidth,
            shrinkA=0,
            shrinkB=0 if style == "-" else 4,
        )
        arrow.set_clip_on(True)
        ax.add_patch(arrow)


def value_mosaic(values: Tensor, fill: float = 0.0) -> np.ndarray:
    """Per-pixel values ``[N, M, H, W]`` laid out like :func:`mosaic` (gaps = ``fill``)."""
    N, M, H, W = values.shape
    layout = GridLayout(N, M, H, W)
    out = np.full(layout.size, fill, dtype=np.float64)
    data = values.detach().cpu().double().numpy()
    for n in range(N):
        for m in range(M):
            y, x = n * (H + GAP), m * (W + GAP)
            out[y : y + H, x : x + W] = data[n, m]
    return out
