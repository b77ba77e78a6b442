"""Where :func:`~pyskick.experiments.reproduce` puts things in its output folder."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyskick.experiments.selection import ONE_VIEW
from pyskick.run_dir import REPRODUCE_RECORD

SETTINGS_FILE = REPRODUCE_RECORD
"""The recorded settings a rerun must agree with."""
TIMINGS_FILE = "timings.jsonl"
"""Wall seconds of every stage run, one JSON record per line."""


def eval_split_of(settings: Mapping[str, Any] | Any) -> str:
    """The split a table's recorded ``settings`` were evaluated on: ``"test"`` (the paper's,
    and what a table recorded before the setting existed) or ``"val"``; ``"test"`` for settings
    that are not a mapping (a damaged record)."""
    if not isinstance(settings, Mapping):
        return "test"
    return str(settings.get("eval_split", "test"))


def run_dir(out_dir: Path, method: str, seed: int) -> Path:
    """The run folder of ``method`` with seed index ``seed`` (``one-view`` has one run)."""
    return out_dir / ONE_VIEW if method == ONE_VIEW else out_dir / method / f"seed-{seed}"


def eval_path(out_dir: Path, method: str, seed: int, metric: str) -> Path:
    """``eval/<method>-seed<k>-<metric>.json`` (the ``.npz`` beside it has the same stem)."""
    return out_dir / "eval" / f"{method}-seed{seed}-{metric}.json"
