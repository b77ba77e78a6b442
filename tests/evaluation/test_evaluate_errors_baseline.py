"""Issue 26: ``evaluate(baseline="runs/x")`` raised a raw TypeError from deep inside; a
baseline of another type is refused first, in one line naming what it must be."""

from __future__ import annotations

from pathlib import Path

import pytest
import torch

from pyskick.evaluation import evaluate


@pytest.mark.parametrize("baseline", ["runs/x", True, [0.1]])
def test_a_baseline_of_another_type_is_refused_first(baseline: object, tmp_path: Path) -> None:
    grids = torch.zeros(1, 2, 2, 1, 16, 16, dtype=torch.uint8)
    with pytest.raises(TypeError, match=r"^baseline must be the one-view model's EvalResult "
                       r"\(or its mean error, a number\), got ") as refused:  # fmt: skip
        # A missing run: the refusal comes before the run is looked at.
        evaluate(tmp_path / "missing", grids, channel_mean=[0.0], baseline=baseline)
    assert "\n" not in str(refused.value)
