"""build_table over several seeds, paired gaps, the ordering verdicts and the Markdown table."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path

import pytest
import torch

from pyskick.evaluation.compare import compare_errors
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
        samples_sha256="0" * 64,
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


def _table(tmp_path: Path, errors: dict[str, list[torch.Tensor]]) -> dict:
    """Save ``errors`` (method -> per-seed per-sample errors, both metrics) and build the
    table."""
    seeds = max(len(rows) for rows in errors.values())
    for method, rows in errors.items():
        for k, per_sample in enumerate(rows):
            for metric in ("avg", "adv"):
                _save(tmp_path, method, k, metric, per_sample)
    settings = {**SETTINGS, "n_test": errors["one-view"][0].numel()}
    return build_table(tmp_path, list(errors), seeds=seeds, settings=settings)


def test_paired_gaps_and_gain_ratios(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(0)
    difficulty = 0.015 + 0.01 * torch.rand(40, generator=g, dtype=torch.float64)

    def method(offset: float, spread: float) -> list[torch.Tensor]:
        return [
            difficulty * 0.8 - offset - spread * k + 1e-4 * torch.randn(40, generator=g)
            for k in range(3)
        ]

    errors = {
        "one-view": [difficulty],
        "rnd-actions": method(0.000, 0.0001),
        "ltla": method(0.002, 0.0001),
        "ours(rew)": method(0.003, 0.0001),
    }
    table = _table(tmp_path, errors)
    rows = {row["method"]: row for row in table["rows"]}
    ours = rows["ours(rew)"]
    assert set(ours["paired"]) == {"ltla", "rnd-actions", "one-view"}
    assert set(rows["ltla"]["paired"]) == {"rnd-actions", "one-view"}
    assert rows["one-view"]["paired"].keys() == {"ltla", "rnd-actions"}
    entry = ours["paired"]["ltla"]["avg"]
    expected = compare_errors(
        torch.stack(errors["ltla"]), torch.stack(errors["ours(rew)"]), metric="avg"
    )
    assert entry["kind"] == "seeds"
    assert entry["n_seeds"] == 3
    assert entry["n_samples"] == 40
    assert entry["diff_x1000"] == pytest.approx(expected.diff_x1000)
    assert entry["ci95_x1000"] == pytest.approx(list(expected.ci95_x1000))
    assert entry["p"] == pytest.approx(expected.p)
    assert entry["diff_x1000"] == pytest.approx(1.0, abs=0.1)  # ltla - ours(rew)
    # Against one-view (trained once) every seed pairs with its single run.
    assert ours["paired"]["one-view"]["avg"]["n_seeds"] == 3
    ratio = ours["policy_gain_ratio"]["avg"]
    assert ratio == pytest.approx(
        ours["avg"]["improvement_pct"] / rows["rnd-actions"]["avg"]["improvement_pct"]
    )
    assert rows["rnd-actions"]["policy_gain_ratio"]["adv"] == pytest.approx(1.0)
    assert rows["one-view"]["policy_gain_ratio"] == {"avg": None, "adv": None}
    md = format_table(table)
    assert "| gain ratio avg / adv |" in md
    assert "vs ltla avg" in md
    assert f"{entry['diff_x1000']:+.2f} [" in md


def test_ordering_verdicts(tmp_path: Path) -> None:
    g = torch.Generator().manual_seed(1)
    difficulty = 0.02 + 0.01 * torch.rand(50, generator=g, dtype=torch.float64)

    def method(offset: float, seed_noise: list[float]) -> list[torch.Tensor]:
        return [
            difficulty - offset - noise + 2e-4 * torch.randn(50, generator=g)
            for noise in seed_noise
        ]

    table = _table(
        tmp_path,
        {
            "one-view": [difficulty + 0.01],
            "rnd-actions": method(0.0, [0.0, 0.0001, -0.0001]),
            "ltla": method(0.002, [0.0, 0.0001, -0.0001]),
            # Better than ltla in every seed, consistently.
            "ours(rew)": method(0.003, [0.0, 0.0001, -0.0001]),
            # Worse than ltla in every seed.
            "ours(demo)": method(0.0005, [0.0, 0.0001, -0.0001]),
            # Better on average, but the seeds disagree: the interval contains zero.
            "ours(rew)+ac": method(0.0022, [0.001, -0.0012, 0.0005]),
            "asymm-ac": method(0.004, [0.0, 0.0, 0.0]),
        },
    )
    verdicts = {(c.better, c.worse): c for c in ordering_checks(table) if c.metric == "avg"}
    assert verdicts[("ltla", "one-view")].verdict == "holds"
    assert verdicts[("ltla", "rnd-actions")].verdict == "holds"
    assert verdicts[("ours(rew)", "ltla")].verdict == "holds"
    assert verdicts[("ours(demo)", "ltla")].verdict == "reversed"
    assert verdicts[("ours(rew)+ac", "ltla")].verdict.startswith("unresolved")
    assert ("asymm-ac", "ltla") not in verdicts  # the paper's claim is about sidekicks only
    assert ("asymm-ac", "rnd-actions") not in verdicts
    check = verdicts[("ours(rew)", "ltla")]
    assert check.kind == "seeds"
    assert check.n_seeds == 3
    assert check.gap_x1000 == pytest.approx(1.0, abs=0.1)
    # one-view: 6 methods; rnd-actions: ltla + 3 ours; ltla: 3 ours; both metrics.
    assert len(ordering_checks(table)) == 2 * (6 + 4 + 3)
    assert table["ordering"] == [asdict(c) for c in ordering_checks(table)]
