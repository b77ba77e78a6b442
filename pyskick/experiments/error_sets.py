"""Per-sample errors of evaluated runs, found by what a user names on the command line.

:func:`load_errors` turns one argument of ``pyskick compare`` into an :class:`ErrorSet`
(``[K, n]`` per-sample errors of K seeds on one metric):

- an evaluation file: the ``.npz`` of :meth:`~pyskick.evaluation.EvalResult.save` (or the
  ``.json`` beside it, as ``pyskick reproduce`` writes them);
- a run folder: the evaluations ``pyskick evaluate`` recorded in ``RUN/eval/``;
- ``REPRODUCE_DIR:METHOD``: every seed of a method of a ``pyskick reproduce`` folder.

Every evaluation records the digest of its test samples (``samples_sha256``), so errors of
different test sets are never paired.
"""

from __future__ import annotations

import dataclasses
import os
import re
import zipfile
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from torch import Tensor

from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.experiments.layout import SETTINGS_FILE


class MetricUnavailable(UserError):
    """A metric that cannot be compared here: not evaluated (on both sides, or on the same
    test samples), or an evaluation file of another metric. ``compare --metric all`` leaves
    such a metric out and says why; any other error (a damaged file) stops it."""


@dataclass(frozen=True)
class ErrorSet:
    """Per-sample errors of one method on one metric.

    Attributes:
        label: what the user named (for messages and reports).
        metric: ``"avg"`` or ``"adv"``.
        errors: ``[K, n]`` float64 per-sample errors (row k: the k-th seed, in seed order).
        samples_sha256: digest of the evaluated test samples.
        seeds: the seed of each row where known (a reproduce folder's method), else None.
    """

    label: str
    metric: str
    errors: Tensor
    samples_sha256: str
    seeds: tuple[int, ...] | None = None


def run_eval_file(run: Path, split: str, metric: str, samples_sha256: str) -> Path:
    """Where ``pyskick evaluate`` records an evaluation of ``run``:
    ``RUN/eval/<split>-<metric>-<first 12 hex digits of the samples' digest>.npz``."""
    return run / "eval" / f"{split}-{metric}-{samples_sha256[:12]}.npz"


def _load(path: Path) -> dict[str, np.ndarray]:
    """The arrays of an evaluation ``.npz``, checked to be one that can be paired."""
    try:
        with np.load(path, allow_pickle=False) as data:
            arrays = {key: np.asarray(data[key]) for key in data.files}
    except (OSError, EOFError, ValueError, KeyError, zipfile.BadZipFile):
        raise UserError(f"{path} is not a readable evaluation file") from None
    if not {"per_sample", "metric"} <= set(arrays):
        raise UserError(f"{path} is not an evaluation file (no per_sample/metric)")
    if "samples_sha256" not in arrays:
        raise UserError(
            f"{path} does not record its test samples (written by an older pyskick); "
            "evaluate the run again"
        )
    errors = arrays["per_sample"]
    real = np.issubdtype(errors.dtype, np.integer) or np.issubdtype(errors.dtype, np.floating)
    if errors.ndim != 1 or not real:
        why = f"must be a 1-D array of numbers, got {errors.dtype} {list(errors.shape)}"
    elif errors.size == 0:
        why = "is empty"
    elif not np.isfinite(errors).all():
        why = f"holds {int((~np.isfinite(errors)).sum())} non-finite values (nan or inf)"
    elif (errors < 0).any():  # reconstruction errors: means of squares or of distances
        why = f"holds {int((errors < 0).sum())} negative errors"
    else:
        return arrays
    raise UserError(f"{path} is not an evaluation file: per_sample {why}")


def _stack(label: str, metric: str, paths: list[Path], *, run: Path | None = None) -> ErrorSet:
    """The evaluations ``paths`` (one per seed) as one set; with ``run``, each must be of the
    run's current ``best.pt``."""
    from pyskick.run_dir import checkpoint_digest

    best = None if run is None or not (run / "best.pt").is_file() else run / "best.pt"
    rows, digests = [], set()
    for path in paths:
        arrays = _load(path)
        if str(arrays["metric"]) != metric:
            raise MetricUnavailable(
                f"{path} is an evaluation of metric {arrays['metric']}, not {metric}"
            )
        recorded = arrays.get("checkpoint_sha256")
        if best is not None and recorded is not None and str(recorded) != checkpoint_digest(best):
            raise MetricUnavailable(
                f"{path} evaluated an earlier best.pt of {run}; run `pyskick evaluate {run}` again"
            )
        rows.append(torch.from_numpy(arrays["per_sample"].astype(np.float64)))
        digests.add(str(arrays["samples_sha256"]))
    if len(digests) != 1 or len({row.numel() for row in rows}) != 1:
        raise MetricUnavailable(f"the seeds of {label} were evaluated on different test samples")
    return ErrorSet(label, metric, torch.stack(rows), digests.pop())


def _from_file(label: str, path: Path, metric: str) -> ErrorSet:
    npz = path.with_suffix(".npz") if path.suffix == ".json" else path
    if not npz.is_file():
        raise MetricUnavailable(f"{label}: no evaluation file {npz}")
    return _stack(label, metric, [npz])


def _from_run(label: str, run: Path, metric: str) -> list[ErrorSet]:
    from pyskick.checkpoint import is_export

    if is_export(run):
        raise UserError(
            f"{label} is an exported model, which records no evaluations: compare the file of "
            f"`pyskick evaluate {run} --metric {metric} --save FILE.npz`"
        )
    found = sorted((run / "eval").glob(f"*-{metric}-*.npz"))
    if not found:
        raise MetricUnavailable(
            f"{label} has no {metric} evaluation: run `pyskick evaluate {run} --metric {metric}`"
        )
    return [_stack(label, metric, [path], run=run) for path in found]


def _from_reproduce(label: str, folder: Path, method: str, metric: str) -> ErrorSet:
    # Every seed evaluated, in seed order: a folder of --seed-offset K starts at seed K. The
    # seeds as eval_path writes them (no leading zeros, ASCII digits).
    stem = re.compile(rf"{re.escape(method)}-seed(0|[1-9][0-9]*)-{re.escape(metric)}", re.ASCII)
    found = sorted(
        (int(match.group(1)), p)
        for p in (folder / "eval").glob("*.npz")
        if (match := stem.fullmatch(p.stem))
    )
    paths = [p for _, p in found]
    if not paths:
        names = sorted(
            {
                match.group(1)
                for p in (folder / "eval").glob(f"*-{metric}.npz")
                if (match := re.fullmatch(rf"(.+)-seed\d+-{metric}", p.stem))
            }
        )
        listed = ", ".join(names) if names else "none"
        raise MetricUnavailable(
            f"{folder} has no {metric} evaluation of {method} (methods: {listed})"
        )
    return dataclasses.replace(_stack(label, metric, paths), seeds=tuple(seed for seed, _ in found))


def load_errors(spec: str | os.PathLike[str], metric: str) -> list[ErrorSet]:
    """The candidate error sets that ``spec`` names for ``metric``.

    A run folder may hold evaluations of several test sets (one :class:`ErrorSet` each; the
    caller pairs them by digest); a file or a reproduce method gives exactly one.

    Args:
        spec: an evaluation file, a run folder or ``REPRODUCE_DIR:METHOD``.
        metric: ``"avg"`` or ``"adv"``; an evaluation file of another metric is refused.

    Raises:
        ValueError: nothing evaluated there, a file of another metric, or seeds evaluated on
            different samples.
        FileNotFoundError: no such file or folder.
    """
    label = os.fspath(spec)
    path = Path(label)
    if path.is_file():
        return [_from_file(label, path, metric)]
    if path.is_dir():
        if (path / SETTINGS_FILE).is_file():
            raise UserError(f"{label} is a reproduce folder: name a method as {label}:METHOD")
        return _from_run(label, path, metric)
    folder, sep, method = label.rpartition(":")
    if sep and folder and method and (Path(folder) / SETTINGS_FILE).is_file():
        return [_from_reproduce(label, Path(folder), method, metric)]
    if sep and folder and Path(folder).is_dir():
        raise UserError(f"{folder} is not a reproduce folder (no {SETTINGS_FILE})")
    raise UserFileNotFoundError(
        f"{label}: no such evaluation file, run folder or REPRODUCE_DIR:METHOD"
    )


def paired_sets(a: list[ErrorSet], b: list[ErrorSet]) -> tuple[ErrorSet, ErrorSet]:
    """The one pair of error sets of ``a`` and ``b`` evaluated on the same test samples.

    Raises:
        ValueError: no common test set, or several (name the evaluation files instead).
    """
    common = [(x, y) for x in a for y in b if x.samples_sha256 == y.samples_sha256]
    if not common:
        raise MetricUnavailable(
            f"{a[0].label} and {b[0].label} were evaluated on different test samples "
            "(evaluate both on the same split of the same dataset)"
        )
    if len(common) > 1:
        raise MetricUnavailable(
            f"{a[0].label} and {b[0].label} share several evaluated test sets; name the "
            "evaluation files (RUN/eval/*.npz) instead"
        )
    x, y = common[0]
    if (
        x.seeds is not None
        and y.seeds is not None
        and len(x.seeds) == len(y.seeds)
        and x.seeds != y.seeds
    ):
        # Seed k of every method shares its data order and starts: pairs are of one seed (other
        # counts are compare_errors' to judge: one run against seeds, or a refusal).
        raise MetricUnavailable(
            f"{x.label} and {y.label} hold other seeds ({_seed_list(x.seeds)} and "
            f"{_seed_list(y.seeds)}): paired seeds must be the same (train both on the same "
            "--seeds and --seed-offset)"
        )
    return x, y


def _seed_list(seeds: tuple[int, ...]) -> str:
    """Seeds for a message: ``0-2`` where consecutive, else listed."""
    if len(seeds) > 1 and seeds == tuple(range(seeds[0], seeds[-1] + 1)):
        return f"{seeds[0]}-{seeds[-1]}"
    return ", ".join(map(str, seeds))
