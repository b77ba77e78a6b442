"""Validation error against epoch for several runs on one plot (the paper's Fig. 4)."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path

from pyskick.viz._mpl import check_figure_path, pyplot, save_figure

METRICS_FILE = "metrics.jsonl"


def read_curve(run: Path, key: str) -> tuple[list[int], list[float]]:
    """Epochs and values of ``key`` in ``RUN/metrics.jsonl`` (records without it are skipped).

    Raises:
        FileNotFoundError: the run has no ``metrics.jsonl``.
        ValueError: an unreadable line, or no record with a finite ``key``.
    """
    path = run / METRICS_FILE if run.is_dir() else run
    if not path.is_file():
        raise FileNotFoundError(f"{run} has no {METRICS_FILE}")
    steps: list[int] = []
    values: list[float] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise ValueError(f"{path}:{number} is not JSON ({exc.msg})") from None
        value = record.get(key) if isinstance(record, dict) else None
        if isinstance(value, int | float) and "step" in record:
            steps.append(int(record["step"]))
            values.append(float(value))
    if not values:
        raise ValueError(f"{path} has no finite {key!r} values")
    return steps, values


def plot_learning_curves(
    runs: Mapping[str, Path], out: Path, *, key: str = "val/rec_error"
) -> Path:
    """Plot ``key`` ×1000 against the epoch for each run, one line per run.

    Args:
        runs: legend label -> run folder (or its ``metrics.jsonl``); plotted in this order.
        out: the figure file (``.png``, ``.pdf`` or ``.svg``), written atomically.
        key: the metric (default ``"val/rec_error"``, the validation MSE).

    Returns:
        ``out``.

    Raises:
        ValueError: no runs, a bad figure path, or a run without the metric.
        FileNotFoundError: a run without ``metrics.jsonl``.
        ImportError: matplotlib is missing.
    """
    out = check_figure_path(out)
    if not isinstance(runs, Mapping) or not runs:
        raise ValueError("runs must be a non-empty mapping of label -> run folder")
    curves = {}
    for label, run in runs.items():
        if not isinstance(run, str | os.PathLike):
            raise TypeError(f"run {label!r} must be a path, got {type(run).__name__}")
        curves[str(label)] = read_curve(Path(run), key)
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7.5, 4.0), layout="constrained")
    for i, (label, (steps, values)) in enumerate(curves.items()):
        marker = "o" if len(steps) <= 30 else None
        style = ("-", "--", ":")[i // 10 % 3]  # the colour cycle has 10 colours
        y = [v * 1000.0 for v in values]
        ax.plot(steps, y, marker=marker, markersize=3, linestyle=style, label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch")
    ax.set_ylabel("validation error ×1000" if key == "val/rec_error" else f"{key} ×1000")
    ax.grid(alpha=0.3)
    # Beside the axes: inside, it hides whichever curves run along its corner.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return save_figure(fig, out)
