"""Episode figures of a saved run: the reconstruction after every glimpse with the trajectory,
and the Eq. 10 policy heatmaps (paper Figs. 3 and 5)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import Tensor

from pyskick.actors import make_actor
from pyskick.actors.base import forced_demonstrations
from pyskick.data.spec import GridSpec
from pyskick.run_dir import SavedPolicy, load_policy
from pyskick.viz._mpl import pyplot, save_figure
from pyskick.viz.animation import check_formats, episode_frames, write_animation
from pyskick.viz.belief import belief_heatmaps, optimal_perturbation
from pyskick.viz.episodes import Episodes, record_episodes
from pyskick.viz.layout import (
    GridLayout,
    draw_move,
    label_view,
    mark_view,
    mosaic,
    show_mosaic,
    to_uint8,
    value_mosaic,
)
from pyskick.viz.steps import CURRENT, move_text, step_panel

PINK = np.array([255.0, 0.0, 255.0])
OVERLAY_ALPHA = 0.85
PANEL_INCHES = 4.2
PANEL_COLUMNS = 3
DPI = 110


def visualize_run(
    run: Path,
    grids: Tensor,
    *,
    channel_mean: Sequence[float] | None,
    out_dir: Path,
    examples: int = 3,
    seed: int = 0,
    heatmaps: bool = True,
    device: str = "cpu",
    spec: GridSpec | None = None,
    animations: Sequence[str] = (),
) -> list[Path]:
    """Draw episodes of a saved run on a few viewgrids.

    ``examples`` viewgrids are drawn without replacement from ``grids`` (at most all of them)
    and each gets a random start, both from ``seed``. Episodes run like the evaluation: the
    run's actor is built by its registered factory (with the run's recorded one-view model,
    ``spec`` and config) and prepared on the drawn viewgrids; it moves in its test mode
    (greedy for a learned actor, seeded uniform motions for a random one) or forces its
    motions (``demo-actions``); observed views pasted, BatchNorm in eval.

    Per example ``k`` (viewgrid index ``i``):

    - ``example{k}_grid{i}_episode.png``: the true grid with the start (red) and the whole
      trajectory, then the reconstruction after each glimpse in the absolute frame (views seen
      so far pasted; current view red, earlier ones gold, moves made white, the action taken
      next red);
    - with ``heatmaps``, T > 1 and an actor that follows the policy (learned, forcing
      nothing), ``example{k}_grid{i}_heatmaps.png``: for every step that selects an action,
      the Eq. 10 heatmap (:mod:`pyskick.viz.belief`) in pink over that step's reconstruction,
      one colour scale per example;
    - per format in ``animations``, ``example{k}_grid{i}_episode.gif`` / ``.mp4``: one frame per
      glimpse (:func:`pyskick.viz.animation.episode_frames`: the views seen so far, the
      reconstruction after that glimpse, the move taken next).

    Args:
        run: a run folder (its ``best.pt``) or a checkpoint.
        grids: ``[n, N, M, C, H, W]`` uint8 viewgrids (e.g. the test split).
        channel_mean: the dataset's per-channel mean (0–255).
        out_dir: folder for the PNGs (created).
        examples: number of viewgrids to draw (>= 1).
        seed: seed of the choice of viewgrids, starts, random actions and the Eq. 10 starts.
        heatmaps: also draw the policy heatmaps.
        device: where the policy runs (``"cpu"``, ``"cuda"``).
        spec: the dataset's geometry, for actor factories that need it (``demo-actions``).
        animations: episode animation formats to write (``"gif"``, ``"mp4"``; see
            :data:`pyskick.viz.animation.FORMATS`).

    Returns:
        The files written, in order (per example: episode PNG, its animations, heatmaps).

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError, TypeError: bad grids or arguments, or a run whose actor cannot be built
            (not registered, or missing what its factory needs); nothing is written then.
        ImportError: matplotlib is missing, or ``imageio-ffmpeg`` for an MP4.
    """
    animations = check_formats(animations)
    if isinstance(examples, bool) or not isinstance(examples, int) or examples < 1:
        raise ValueError(f"examples must be a positive int, got {examples!r}")
    if not isinstance(out_dir, str | os.PathLike):
        raise TypeError(f"out_dir must be a path, got {type(out_dir).__name__}")
    out_dir = Path(out_dir)
    if out_dir.exists() and not out_dir.is_dir():
        raise ValueError(f"out_dir {out_dir} exists and is not a folder")
    pyplot()  # fail on a missing matplotlib before any work
    saved = load_policy(run, device)
    check_run_grids(grids, saved.policy)
    actor = make_actor(
        saved.actor, one_view=saved.init, spec=spec, config=saved.config, field="actor"
    )
    cfg = saved.policy.config
    chosen, starts = choose_examples(grids.shape[0], examples, seed, cfg.n_views)
    actor.prepare(grids[chosen].cpu(), T=saved.T, device=torch.device(device))
    forced = None
    if saved.T > 1:
        demos = forced_demonstrations(actor, torch.arange(chosen.numel()), starts)
        forced = None if demos is None else demos[0]
    action_generator = torch.Generator(device).manual_seed(seed)
    episodes = record_episodes(
        saved.policy,
        grids[chosen],
        starts,
        channel_mean=channel_mean,
        T=saved.T,
        mode=actor.mode(training=False),
        generator=action_generator,
        forced=forced,
    )
    mean = channel_mean if cfg.mean_subtract else None
    heat = None
    if heatmaps and actor.learned and forced is None and saved.T > 1:
        heat = _episode_heatmaps(saved, episodes, device, seed)
    paths = []
    for k, index in enumerate(chosen.tolist()):
        stem = out_dir / f"example{k}_grid{index}"
        truth = grids[index].cpu()
        paths.append(_episode_figure(saved, episodes, k, truth, mean, stem, index))
        if animations:
            title = f"viewgrid {index}: {saved.actor} actor, T={saved.T}"
            frames = episode_frames(episodes, k, truth, mean, title=title)
            for fmt in animations:
                out = stem.with_name(f"{stem.name}_episode.{fmt}")
                paths.append(write_animation(frames, out))
        if heat is not None:
            paths.append(_heatmap_figure(saved, episodes, k, truth, mean, heat[:, k], stem, index))
    return paths


def choose_examples(n: int, examples: int, seed: int, n_views: int) -> tuple[Tensor, Tensor]:
    """The viewgrids and start views :func:`visualize_run` draws: ``min(examples, n)`` indices
    without replacement and one start each, ``[k]`` int64 both, from ``seed``."""
    generator = torch.Generator().manual_seed(seed)
    chosen = torch.randperm(n, generator=generator)[:examples]
    return chosen, torch.randint(n_views, (chosen.numel(),), generator=generator)


def check_run_grids(grids: object, policy: Any) -> None:
    """Raise TypeError/ValueError unless ``grids`` are uint8 ``[n>0, N, M, C, H, W]`` viewgrids
    of ``policy``'s shape."""
    policy.config.check_grids(grids, who="this model", empty_ok=False)


def _episode_heatmaps(saved: SavedPolicy, episodes: Episodes, device: str, seed: int) -> Tensor:
    """``[T-1, B, N, M, H, W]`` Eq. 10 heat of every action step.

    Each example has its own generator seeded with ``seed`` (Eq. 10 can have several maxima),
    so its heatmaps do not depend on which other examples are drawn with it.
    """
    policy = saved.policy
    per_example = []
    for k in range(episodes.starts.numel()):
        generator = torch.Generator(device).manual_seed(seed)
        maps = []
        for t in range(saved.T - 1):
            hidden = episodes.hidden[t, k : k + 1].to(device)
            proprio = episodes.proprio[t, k : k + 1].to(device)
            azimuth = episodes.azimuth[t, k : k + 1].to(device)
            found = optimal_perturbation(
                policy, hidden, proprio, t, azimuth=azimuth, generator=generator
            )
            start = episodes.starts[k : k + 1]
            maps.append(belief_heatmaps(policy, hidden, found.delta, start)[0].cpu())
        per_example.append(torch.stack(maps))
    return torch.stack(per_example, dim=1)


def _panels(count: int, layout: GridLayout) -> tuple[Any, list[Any]]:
    """``count`` mosaic panels in balanced rows of at most :data:`PANEL_COLUMNS`; spare axes
    hidden."""
    plt = pyplot()
    height, width = layout.size
    rows = -(-count // PANEL_COLUMNS)
    columns = -(-count // rows)  # balanced rows: 4 panels are 2 x 2, not 3 + 1
    panel_h = PANEL_INCHES * height / width + 0.7
    fig, axes = plt.subplots(
        rows,
        columns,
        figsize=(PANEL_INCHES * columns, panel_h * rows + 0.3),
        squeeze=False,
        layout="constrained",
    )
    flat = list(axes.flat)
    for ax in flat[count:]:
        ax.set_axis_off()
    return fig, flat[:count]


def _truth_panel(ax: Any, saved: SavedPolicy, ep: Episodes, k: int, truth: Tensor) -> None:
    layout = GridLayout.of(truth)
    show_mosaic(ax, mosaic(truth), layout, "true viewgrid, start in red")
    visited = ep.visited[k].tolist()
    for t in range(len(visited) - 1):
        draw_move(ax, layout, visited[t], visited[t + 1], int(ep.moves[k, t, 1]), color=CURRENT)
    mark_view(ax, layout, visited[0], color=CURRENT)
    for t, view in enumerate(visited):
        label_view(ax, layout, view, str(t + 1), color="white")


def _episode_figure(
    saved: SavedPolicy,
    ep: Episodes,
    k: int,
    truth: Tensor,
    mean: Sequence[float] | None,
    stem: Path,
    index: int,
) -> Path:
    layout = GridLayout.of(truth)
    fig, axes = _panels(saved.T + 1, layout)
    _truth_panel(axes[0], saved, ep, k, truth)
    for t in range(saved.T):
        image = mosaic(to_uint8(ep.decoded[t, k], mean))
        title = (
            f"after glimpse {t + 1}: err×1000 {1000 * float(ep.errors[t, k]):.2f}\n"
            f"{move_text(ep, k, t)}"
        )
        step_panel(axes[t + 1], ep, k, t, image, layout, title)
    fig.suptitle(f"viewgrid {index}: {saved.actor} actor, T={saved.T}", fontsize=9)
    return save_figure(fig, stem.with_name(stem.name + "_episode.png"), dpi=DPI)


def _heatmap_figure(
    saved: SavedPolicy,
    ep: Episodes,
    k: int,
    truth: Tensor,
    mean: Sequence[float] | None,
    heat: Tensor,
    stem: Path,
    index: int,
) -> Path:
    """``heat`` ``[T-1, N, M, H, W]``: one overlay per action step, one scale per example."""
    layout = GridLayout.of(truth)
    fig, axes = _panels(saved.T, layout)
    _truth_panel(axes[0], saved, ep, k, truth)
    scale = float(heat.max())
    for t in range(saved.T - 1):
        image = mosaic(to_uint8(ep.decoded[t, k], mean)).astype(np.float64)
        level = heat[t] / scale if scale > 0 else torch.zeros_like(heat[t])
        alpha = OVERLAY_ALPHA * value_mosaic(level)[..., None]
        blended = (image * (1 - alpha) + PINK * alpha).round().astype(np.uint8)
        title = f"step {t + 1}: heat max {float(heat[t].max()):.2e}\n{move_text(ep, k, t)}"
        step_panel(axes[t + 1], ep, k, t, blended, layout, title)
    fig.suptitle(
        f"viewgrid {index}: Eq. 10 policy heatmaps (pink, scale max {scale:.2e})", fontsize=9
    )
    return save_figure(fig, stem.with_name(stem.name + "_heatmaps.png"), dpi=DPI)
