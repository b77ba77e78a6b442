"""Evaluation: the paper's avg and adv metrics and their statistics.

::

    from pyskick.evaluation import evaluate

    one = evaluate("runs/one-view", test_grids, "avg", channel_mean=mean)
    res = evaluate("runs/ltla", test_grids, "avg", channel_mean=mean, baseline=one)
    res.summary.mean_x1000, res.improvement_pct
    res.save("ltla-avg.npz")        # per-sample errors for reports
"""

from __future__ import annotations

from pyskick.evaluation.evaluate import (
    EvalResult,
    evaluate,
    evaluate_pack,
    evaluate_policy,
    evaluation_starts,
)
from pyskick.evaluation.stats import ErrorSummary, improvement_pct, summarize
from pyskick.metrics import METRICS, Metric

__all__ = [
    "METRICS",
    "ErrorSummary",
    "EvalResult",
    "Metric",
    "evaluate",
    "evaluate_pack",
    "evaluate_policy",
    "evaluation_starts",
    "improvement_pct",
    "summarize",
]
