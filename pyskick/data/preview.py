"""Contact sheets of viewgrids: each grid laid out N rows x M columns with small gaps."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from pyskick._io import atomic_path
from pyskick.data.hdf5_read import ViewgridFile
from pyskick.errors import UserError

VIEW_GAP = 2
GRID_GAP = 10
BACKGROUND = 255


def viewgrid_image(grid: torch.Tensor, gap: int = VIEW_GAP) -> np.ndarray:
    """Lay out one viewgrid as an image.

    Args:
        grid: uint8 ``[N, M, C, H, W]``, C in {1, 3}.
        gap: pixels between neighbouring views.

    Returns:
        uint8 RGB ``[N*H + (N-1)*gap, M*W + (M-1)*gap, 3]``; row 0 is the highest elevation,
        columns go left to right with increasing azimuth.
    """
    n, m, c, h, w = grid.shape
    views = grid.numpy()
    if c == 1:
        views = np.repeat(views, 3, axis=2)
    out = np.full((n * h + (n - 1) * gap, m * w + (m - 1) * gap, 3), BACKGROUND, np.uint8)
    for i in range(n):
        for j in range(m):
            y, x = i * (h + gap), j * (w + gap)
            out[y : y + h, x : x + w] = views[i, j].transpose(1, 2, 0)
    return out


def contact_sheet(grids: torch.Tensor, *, scale: int = 2, columns: int = 2) -> Image.Image:
    """Several viewgrids ``[B, N, M, C, H, W]`` side by side, ``columns`` per row, upscaled."""
    tiles = [viewgrid_image(g) for g in grids]
    th, tw = tiles[0].shape[:2]
    cols = min(columns, len(tiles))
    rows = -(-len(tiles) // cols)
    sheet = np.full(
        (rows * th + (rows + 1) * GRID_GAP, cols * tw + (cols + 1) * GRID_GAP, 3),
        BACKGROUND,
        np.uint8,
    )
    for k, tile in enumerate(tiles):
        y = GRID_GAP + (k // cols) * (th + GRID_GAP)
        x = GRID_GAP + (k % cols) * (tw + GRID_GAP)
        sheet[y : y + th, x : x + tw] = tile
    image = Image.fromarray(sheet)
    if scale > 1:
        image = image.resize((image.width * scale, image.height * scale), Image.Resampling.NEAREST)
    return image


def check_preview_path(out: str | os.PathLike[str]) -> Path:
    """The preview's output path; raises ValueError unless it names a ``.png`` file."""
    out = Path(out)
    if out.suffix.lower() != ".png":
        raise UserError(f"preview output must be a .png file, got {out}")
    return out


def render_preview(
    path: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    split: str = "test",
    num: int = 4,
    scale: int = 2,
) -> Path:
    """Write a PNG contact sheet of the first ``num`` viewgrids of a split."""
    if num < 1:
        raise UserError(f"--num must be >= 1, got {num}")
    if scale < 1:
        raise UserError(f"--scale must be >= 1, got {scale}")
    out = check_preview_path(out)
    data = ViewgridFile(path).split(split)
    grids = data.load(range(min(num, len(data))))
    image = contact_sheet(grids, scale=scale)
    with atomic_path(out) as tmp:
        image.save(tmp, format="PNG")
    return out
