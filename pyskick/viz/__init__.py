"""Figures of runs and sidekicks (needs the optional ``viz`` extra: matplotlib).

- :func:`plot_learning_curves`: validation error ×1000 against epoch of several runs (Fig. 4).
- :func:`visualize_run`: episodes of a run, reconstruction after each glimpse with the
  trajectory, and the Eq. 10 policy heatmaps (Figs. 3 and 5); optionally the episodes
  animated glimpse by glimpse (GIF, or MP4 with ``imageio-ffmpeg``: :mod:`pyskick.viz.animation`).
- :func:`plot_reward_maps`, :func:`plot_coverage_grid`: the sidekicks' score maps (Fig. 2).

matplotlib is imported lazily (Agg backend) when a figure is drawn; the heatmap optimiser in
:mod:`pyskick.viz.belief` needs only torch. ``docs/visualisation.md`` describes the figures.
"""

from __future__ import annotations

from pyskick.viz.belief import (
    Perturbation,
    belief_heatmaps,
    optimal_perturbation,
    policy_change,
)
from pyskick.viz.curves import plot_learning_curves
from pyskick.viz.run_figures import visualize_run
from pyskick.viz.sidekick_maps import draw_sidekick_maps, plot_coverage_grid, plot_reward_maps

__all__ = [
    "Perturbation",
    "belief_heatmaps",
    "draw_sidekick_maps",
    "optimal_perturbation",
    "plot_coverage_grid",
    "plot_learning_curves",
    "plot_reward_maps",
    "policy_change",
    "visualize_run",
]
