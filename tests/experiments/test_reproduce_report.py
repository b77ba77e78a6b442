"""build_table over several seeds, the ordering verdicts and the Markdown table."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from pyskick.evaluation.evaluate import EvalResult
from pyskick.evaluation.stats import summarize
from pyskick.experiments import build_table, format_table, ordering_checks
from pyskick.experiments.layout import eval_path

SETTINGS = {"n_test": 5, "preset": "cpu-demo"}


def _save(out: Path, method: str, seed: int, metric: str, per_sample: torch.Tensor) -> None:
    per_sample = per_sample.double()
    result = EvalResult(
        metric=metric,
        actor="learned",
        T=4,
        starts=torch.arange(2),
        per_start=per_sample[:, None].repeat(1, 2),
        per_sample=per_sample,
        summary=summarize(per_sample),
    )
    result.save(eval_path(out, method, seed, metric).with_suffix(".npz"))


def test_seeds_are_averaged_with_both_standard_errors(tmp_path: Path) -> None:
    one = torch.tensor([0.050, 0.060, 0.055, 0.052, 0.058])
    seeds = [one * 0.5, one * 0.7]
    for metric in ("avg", "adv"):
        _save(tmp_path, "one-view", 0, metric, one)
        for k, errors in enumerate(seeds):
            _save(tmp_path, "ltla", k, metric, errors)
    table = build_table(tmp_path, ["one-view", "ltla"], seeds=2, settings=SETTINGS)
    base, ltla = table["rows"]
    assert base["seeds"] == 1
    assert ltla["seeds"] == 2
    entry = ltla["avg"]
    means = [float(s.double().mean()) * 1000 for s in seeds]
    assert entry["mean_x1000"] == pytest.approx(sum(means) / 2)
    averaged = (seeds[0].double() + seeds[1].double()) / 2
    assert entry["stderr_x1000"] == pytest.approx(summarize(averaged).stderr_x1000)
    assert entry["stderr_seeds_x1000"] == pytest.approx(abs(means[0] - means[1]) / 2)
    assert entry["improvement_pct"] == pytest.approx(40.0)  # 0.6 of one-view's error
    assert base["avg"]["improvement_pct"] is None
    assert base["avg"]["stderr_seeds_x1000"] is None
    md = format_table(table)
    assert (
        f"| ltla | 2 | {entry['mean_x1000']:.2f} ± {entry['stderr_x1000']:.2f} "
        f"({entry['stderr_seeds_x1000']:.2f}) | 40.00 |" in md
    )
    assert "5 test viewgrids" in md


def _row(method: str, mean: float, se: float) -> dict:
    entry = {"mean_x1000": mean, "stderr_x1000": se, "stderr_seeds_x1000": None}
    return {"method": method, "avg": entry, "adv": entry}


def test_ordering_verdicts() -> None:
    table = {
        "rows": [
            _row("one-view", 40.0, 0.3),
            _row("ltla", 30.0, 0.3),
            _row("ours(rew)", 29.8, 0.3),  # better than ltla by less than one standard error
            _row("ours(demo)", 31.0, 0.3),  # worse than ltla by more than one standard error
            _row("ours(rew)+ac", 30.2, 0.3),  # worse by less than one
            _row("asymm-ac", 25.0, 0.3),
        ]
    }
    verdicts = {(c.better, c.worse): c for c in ordering_checks(table) if c.metric == "avg"}
    assert verdicts[("ltla", "one-view")].verdict == "holds"
    assert verdicts[("ours(rew)", "ltla")].verdict == "holds within one standard error"
    assert verdicts[("ours(demo)", "ltla")].verdict == "reversed"
    assert verdicts[("ours(rew)+ac", "ltla")].verdict == "reversed within one standard error"
    assert ("asymm-ac", "ltla") not in verdicts  # the paper's claim is about sidekicks only
    assert verdicts[("ours(rew)", "ltla")].stderr_x1000 == pytest.approx(math.hypot(0.3, 0.3))
    assert verdicts[("ours(rew)", "ltla")].gap_x1000 == pytest.approx(0.2)
    assert len(ordering_checks(table)) == 2 * (5 + 3)
