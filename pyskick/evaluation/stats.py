"""Summary statistics of per-sample errors, reported ×1000 as in the paper.

The authors' statistics are in docs/paper-reference.md §6.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import torch


@dataclass(frozen=True)
class ErrorSummary:
    """Mean, standard deviation (ddof = 1) and standard error of per-sample errors, ×1000.

    Attributes:
        n_samples: number of per-sample values.
        mean_x1000: mean error ×1000.
        std_x1000: sample standard deviation ×1000 (0 for a single sample).
        stderr_x1000: ``std / sqrt(n)`` ×1000.
    """

    n_samples: int
    mean_x1000: float
    std_x1000: float
    stderr_x1000: float

    def to_dict(self) -> dict[str, float | int]:
        return asdict(self)


def summarize(per_sample: torch.Tensor) -> ErrorSummary:
    """Summarise per-sample errors ``[n]`` (any float dtype; computed in float64).

    Raises:
        ValueError: empty input or non-finite values.
    """
    values = per_sample.detach().double().flatten().cpu()
    if values.numel() == 0:
        raise ValueError("cannot summarise an empty set of errors")
    if not bool(torch.isfinite(values).all()):
        raise ValueError("per-sample errors contain NaN or infinite values")
    n = values.numel()
    std = float(values.std(unbiased=True)) if n > 1 else 0.0
    return ErrorSummary(
        n_samples=n,
        mean_x1000=float(values.mean()) * 1000.0,
        std_x1000=std * 1000.0,
        stderr_x1000=std / math.sqrt(n) * 1000.0,
    )


def improvement_pct(error: float, baseline: float) -> float:
    """Relative improvement of ``error`` over ``baseline`` in percent (Table 1's brackets)."""
    if baseline <= 0:
        raise ValueError(f"baseline error must be positive, got {baseline}")
    return (baseline - error) / baseline * 100.0
