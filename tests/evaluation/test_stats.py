"""Error summaries as the paper reports them: mean, std (ddof 1), standard error, ×1000."""

from __future__ import annotations

import math

import pytest
import torch

from pyskick.evaluation.stats import improvement_pct, summarize


def test_hand_computed_summary() -> None:
    summary = summarize(torch.tensor([0.010, 0.020, 0.030, 0.040]))
    assert summary.n_samples == 4
    assert summary.mean_x1000 == pytest.approx(25.0)
    std = math.sqrt(((15**2) + (5**2) * 2 + 15**2) / 3)  # deviations in 1e-3 units, ddof 1
    assert summary.std_x1000 == pytest.approx(std)
    assert summary.stderr_x1000 == pytest.approx(std / 2)


def test_single_sample_and_errors() -> None:
    assert summarize(torch.tensor([0.5])).std_x1000 == 0.0
    with pytest.raises(ValueError, match="empty"):
        summarize(torch.tensor([]))
    with pytest.raises(ValueError, match="NaN"):
        summarize(torch.tensor([0.1, float("nan")]))


def test_improvement_matches_table_1() -> None:
    # SUN360 avg: one-view 38.31, ltla 24.94 -> 34.89 % in the paper.
    assert improvement_pct(24.94, 38.31) == pytest.approx(34.90, abs=0.01)
    with pytest.raises(ValueError, match="positive"):
        improvement_pct(1.0, 0.0)
