"""Validation error against epoch for several runs on one plot (the paper's Fig. 4)."""

from __future__ import annotations

import json
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path

import torch
from torch import Tensor

from pyskick.errors import UserError, UserFileNotFoundError
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
        raise UserFileNotFoundError(f"{run} has no {METRICS_FILE}")
    steps: list[int] = []
    values: list[float] = []
    for number, line in enumerate(path.read_text().splitlines(), start=1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
        except json.JSONDecodeError as exc:
            raise UserError(f"{path}:{number} is not JSON ({exc.msg})") from None
        value = record.get(key) if isinstance(record, dict) else None
        if isinstance(value, int | float) and math.isfinite(value) and "step" in record:
            steps.append(int(record["step"]))
            values.append(float(value))
    if not values:
        raise UserError(f"{path} has no finite {key!r} values")
    return steps, values


def mean_curve(runs: Sequence[Path], key: str) -> tuple[list[int], Tensor, Tensor]:
    """The epochs all ``runs`` share, and the mean and standard error across runs of ``key``.

    Returns:
        ``(epochs, mean [E], stderr [E])``; the standard error is 0 for a single run.

    Raises:
        ValueError: the runs share no epoch.
    """
    curves = [dict(zip(*read_curve(Path(run), key), strict=True)) for run in runs]
    epochs = sorted(set.intersection(*(set(curve) for curve in curves)))
    if not epochs:
        raise UserError(f"the runs {[str(r) for r in runs]} share no epoch")
    values = torch.tensor([[curve[e] for e in epochs] for curve in curves], dtype=torch.float64)
    stderr = (
        values.std(0, unbiased=True) / math.sqrt(len(runs))
        if len(runs) > 1
        else torch.zeros(len(epochs), dtype=torch.float64)
    )
    return epochs, values.mean(0), stderr


_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*")
_STYLES = ("-", "--", "-.", ":")


def plot_learning_curves(
    runs: Mapping[str, Path | Sequence[Path]], out: Path, *, key: str = "val/rec_error"
) -> Path:
    """Plot ``key`` ×1000 against the epoch, one line per label.

    A label with several runs (the seeds of a method) is drawn as the mean over the runs with
    a band of ± one standard error across them, over the epochs they all have.

    Args:
        runs: legend label -> run folder (or its ``metrics.jsonl``), or a list of them;
            plotted in this order.
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
        raise ValueError("runs must be a non-empty mapping of label -> run folder(s)")
    curves = {}
    for label, value in runs.items():
        group = [value] if isinstance(value, str | os.PathLike) else list(value)
        if not group or not all(isinstance(run, str | os.PathLike) for run in group):
            raise TypeError(f"run {label!r} must be a path or a non-empty list of paths")
        curves[str(label)] = (len(group), *mean_curve([Path(run) for run in group], key))
    plt = pyplot()
    from matplotlib.ticker import MaxNLocator

    fig, ax = plt.subplots(figsize=(7.5, 4.0), layout="constrained")
    for i, (label, (count, steps, mean, stderr)) in enumerate(curves.items()):
        # Every curve has its own marker and dash as well as its colour: methods that learn
        # alike (ltla and ours(rew)) lie on each other, and one would hide the other.
        marker = _MARKERS[i % len(_MARKERS)]
        style = _STYLES[i % len(_STYLES)]
        # Epochs count from 1, as the tables do (the log's steps count from 0).
        epochs = [step + 1 for step in steps]
        y = (mean * 1000.0).tolist()
        shown = label if count == 1 else f"{label} ({count} seeds)"
        (line,) = ax.plot(
            epochs, y, marker=marker, markersize=4, markevery=max(1, len(epochs) // 20),
            linestyle=style, linewidth=1.3, label=shown, alpha=0.9,
        )  # fmt: skip
        steps = epochs
        if count > 1:
            band = (stderr * 1000.0).tolist()
            ax.fill_between(
                steps,
                [v - b for v, b in zip(y, band, strict=True)],
                [v + b for v, b in zip(y, band, strict=True)],
                color=line.get_color(),
                alpha=0.18,
                linewidth=0,
            )
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_xlabel("epoch (1 = after the first)")
    ylabel = "validation error ×1000" if key == "val/rec_error" else f"{key} ×1000"
    if any(count > 1 for count, *_ in curves.values()):
        ylabel += " (mean ± SE over seeds)"
    ax.set_ylabel(ylabel)
    ax.grid(alpha=0.3)
    # Beside the axes: inside, it hides whichever curves run along its corner.
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), fontsize=8, frameon=False)
    return save_figure(fig, out)
