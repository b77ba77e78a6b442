"""The sidekicks' maps of one viewgrid (paper Fig. 2): the reward sidekick's one-view scores
before and after NMS, and the demonstration sidekick's coverage "grid of grids"."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pyskick.errors import UserError, UserTypeError
from pyskick.sidekicks.coverage import one_view_coverage
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.viz._mpl import check_figure_path, pyplot, save_figure
from pyskick.viz.layout import GridLayout, mosaic, show_mosaic

INNER_GAP = 1
"""Cells between the inner N x M maps of the coverage grid of grids."""
GAP_COLOUR = "#6baed6"
"""Colour between the inner maps of the coverage grid of grids."""
ANNOTATE_MAX_VIEWS = 64
"""Score maps with at most this many views get their values written in the cells."""


def _check_grid(grid: object) -> Tensor:
    if not isinstance(grid, Tensor):
        raise UserTypeError(f"grid must be a torch.Tensor, got {type(grid).__name__}")
    if grid.dtype != torch.uint8:
        raise UserTypeError(f"grid must be uint8 (raw 0-255 views), got {grid.dtype}")
    if grid.dim() != 5 or 0 in grid.shape or grid.shape[2] not in (1, 3):
        raise UserError(f"grid must have shape [N, M, C in (1, 3), H, W], got {list(grid.shape)}")
    return grid.detach().cpu()


def _check_map(name: str, values: object, shape: tuple[int, ...]) -> np.ndarray:
    if not isinstance(values, Tensor) or not values.is_floating_point():
        got = values.dtype if isinstance(values, Tensor) else type(values).__name__
        raise UserTypeError(f"{name} must be a floating-point tensor, got {got}")
    if tuple(values.shape) != shape:
        raise UserError(
            f"{name} must have shape {list(shape)} to match the grid, got {list(values.shape)}"
        )
    if not bool(torch.isfinite(values).all()):
        raise UserError(f"{name} contains NaN or infinite values")
    return values.detach().cpu().double().numpy()


def _score_panel(ax: Any, values: np.ndarray, title: str, vmax: float) -> Any:
    N, M = values.shape
    image = ax.imshow(values, cmap="viridis", vmin=0.0, vmax=vmax, interpolation="nearest")
    ax.set_xticks(range(M))
    ax.set_yticks(range(N))
    ax.tick_params(labelsize=7, length=2, pad=1)
    ax.set_xlabel("azimuth", fontsize=7, labelpad=1)
    ax.set_ylabel("elevation", fontsize=7, labelpad=1)
    ax.set_title(title, fontsize=8)
    if N * M <= ANNOTATE_MAX_VIEWS:
        for n in range(N):
            for m in range(M):
                bright = values[n, m] > 0.6 * vmax
                ax.text(
                    m,
                    n,
                    f"{values[n, m]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=6,
                    color="black" if bright else "white",
                )
    return image


def plot_reward_maps(normal: Tensor, nms: Tensor, grid: Tensor, out: Path) -> Path:
    """The reward sidekick's maps of one viewgrid next to it.

    Args:
        normal: ``[N, M]`` one-view informativeness scores (``RewardSidekick`` ``"normal"``).
        nms: ``[N, M]`` the reward map after non-maximum suppression (``"nms"``).
        grid: ``[N, M, C, H, W]`` uint8 viewgrid (C = 1 or 3).
        out: the figure file (``.png``, ``.pdf`` or ``.svg``), written atomically.

    Returns:
        ``out``.

    Raises:
        TypeError, ValueError: bad tensors or path.
        ImportError: matplotlib is missing.
    """
    out = check_figure_path(out)
    grid = _check_grid(grid)
    shape = tuple(grid.shape[:2])
    scores = _check_map("normal", normal, shape)
    peaks = _check_map("nms", nms, shape)
    vmax = max(float(scores.max()), float(peaks.max()), 1e-12)
    plt = pyplot()
    layout = GridLayout.of(grid)
    height, width = layout.size
    fig, axes = plt.subplots(1, 3, figsize=(10.5, 3.5 * height / width + 0.8), layout="constrained")
    show_mosaic(axes[0], mosaic(grid), layout, "viewgrid")
    _score_panel(axes[1], scores, "one-view scores", vmax)
    image = _score_panel(axes[2], peaks, "after NMS (reward map)", vmax)
    fig.colorbar(image, ax=axes[1:], shrink=0.8)
    fig.suptitle("reward sidekick", fontsize=9)
    return save_figure(fig, out)


def coverage_mosaic(coverage: np.ndarray, N: int, M: int) -> np.ndarray:
    """``[V, V]`` -> the grid of grids: block (i, j) is the ``N x M`` map ``coverage[i*M + j]``,
    blocks separated by :data:`INNER_GAP` NaN cells."""
    step_n, step_m = N + INNER_GAP, M + INNER_GAP
    out = np.full((N * step_n - INNER_GAP, M * step_m - INNER_GAP), np.nan)
    for i in range(N):
        for j in range(M):
            block = coverage[i * M + j].reshape(N, M)
            out[i * step_n : i * step_n + N, j * step_m : j * step_m + M] = block
    return out


def plot_coverage_grid(coverage: Tensor, grid: Tensor, out: Path) -> Path:
    """The demonstration sidekick's coverage of one viewgrid as a grid of grids (Fig. 2).

    The outer ``N x M`` arrangement is the source view ``θ(i)``; the inner ``N x M`` map in
    each block is the coverage ``U[θ(i), θ(j)]`` of every target view ``θ(j)`` (bright =
    well covered), the source itself outlined in red.

    Args:
        coverage: ``[V, V]`` ``U[source, target]`` with ``V = N * M``, views ``n * M + m``.
        grid: ``[N, M, C, H, W]`` uint8 viewgrid.
        out: the figure file (``.png``, ``.pdf`` or ``.svg``), written atomically.

    Returns:
        ``out``.

    Raises:
        TypeError, ValueError: bad tensors or path.
        ImportError: matplotlib is missing.
    """
    from matplotlib.patches import Rectangle

    out = check_figure_path(out)
    grid = _check_grid(grid)
    N, M = int(grid.shape[0]), int(grid.shape[1])
    values = _check_map("coverage", coverage, (N * M, N * M))
    plt = pyplot()
    layout = GridLayout.of(grid)
    height, width = layout.size
    # The grid of grids is M / N times wider than tall: the viewgrid goes above it.
    inner = (N * (N + INNER_GAP)) / (M * (M + INNER_GAP))
    fig, axes = plt.subplots(
        2,
        1,
        figsize=(8.0, 8.0 * (height / width + inner) + 1.5),
        layout="constrained",
        height_ratios=(height / width, inner),
    )
    show_mosaic(axes[0], mosaic(grid), layout, "viewgrid")
    cmap = plt.get_cmap("gray").with_extremes(bad=GAP_COLOUR)
    lo, hi = float(values.min()), float(values.max())
    image = axes[1].imshow(
        coverage_mosaic(values, N, M),
        cmap=cmap,
        vmin=lo,
        vmax=hi if hi > lo else lo + 1.0,
        interpolation="nearest",
    )
    for i in range(N):
        for j in range(M):
            axes[1].add_patch(
                Rectangle(
                    (j * (M + INNER_GAP) + j - 0.5, i * (N + INNER_GAP) + i - 0.5),
                    1,
                    1,
                    fill=False,
                    edgecolor="red",
                    linewidth=0.8,
                )
            )
    axes[1].set_xticks([j * (M + INNER_GAP) + (M - 1) / 2 for j in range(M)], range(M))
    axes[1].set_yticks([i * (N + INNER_GAP) + (N - 1) / 2 for i in range(N)], range(N))
    axes[1].tick_params(labelsize=7, length=2, pad=1)
    axes[1].set_xlabel("source azimuth (inner: target azimuth)", fontsize=7)
    axes[1].set_ylabel("source elevation (inner: target elevation)", fontsize=7)
    axes[1].set_title("coverage of every target view from each source view", fontsize=8)
    fig.colorbar(image, ax=axes[1], shrink=0.8)
    fig.suptitle("demonstration sidekick", fontsize=9)
    return save_figure(fig, out)


def draw_sidekick_maps(
    one_view: Path,
    grids: Tensor,
    *,
    channel_mean: Sequence[float],
    out_dir: Path,
    names: Sequence[str],
    nms: tuple[int, int] = (4, 1),
    device: str = "cpu",
) -> list[Path]:
    """Score a few viewgrids with a one-view run and draw both sidekicks' maps of each.

    Args:
        one_view: the one-view run folder (its ``best.pt``) or checkpoint.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids to draw.
        channel_mean: the dataset's per-channel mean (0–255).
        out_dir: folder of the PNGs (created).
        names: ``n`` file name stems; writes ``{name}_reward_maps.png`` and
            ``{name}_coverage.png``.
        nms: the reward sidekick's (peaks, radius).
        device: where the model runs.

    Returns:
        The PNGs written.

    Raises:
        FileNotFoundError: no such run; ValueError, TypeError: bad grids or arguments.
        ImportError: matplotlib is missing.
    """
    if not isinstance(out_dir, str | os.PathLike):
        raise UserTypeError(f"out_dir must be a path, got {type(out_dir).__name__}")
    if len(names) != grids.shape[0]:
        raise UserError(f"names must have one entry per viewgrid ({grids.shape[0]})")
    pyplot()
    peaks, radius = nms
    sidekick = RewardSidekick(one_view, channel_mean=tuple(channel_mean), k=peaks, radius=radius)
    scores = sidekick.compute_scores(grids, T=1, device=torch.device(device))
    coverage = one_view_coverage(one_view, grids, channel_mean=channel_mean, device=device)
    paths = []
    for k, name in enumerate(names):
        base = Path(out_dir) / name
        paths.append(
            plot_reward_maps(
                scores["normal"][k], scores["nms"][k], grids[k],
                base.with_name(f"{name}_reward_maps.png"),
            )
        )  # fmt: skip
        paths.append(
            plot_coverage_grid(coverage[k], grids[k], base.with_name(f"{name}_coverage.png"))
        )
    return paths
