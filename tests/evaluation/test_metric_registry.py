"""The metric registry (pyskick.metrics): avg and adv defined once, and everything that names
metrics (TrainConfig, the CLI, the report, reproduce) derived from it."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from collections.abc import Mapping
from types import MappingProxyType

import pytest
import torch

from pyskick.config import TrainConfig
from pyskick.evaluation import evaluate_policy
from pyskick.experiments import table as report
from pyskick.metrics import (
    DEFAULT_METRIC,
    EVERY_START,
    METRICS,
    Metric,
    all_views,
    get_metric,
    metrics_help,
)
from pyskick.models import CompletionPolicy, preset
from pyskick_cli.commands.compare import METRIC_CHOICES
from pyskick_cli.commands.evaluate import evaluate as evaluate_command
from pyskick_cli.main import main

CFG = dataclasses.replace(
    preset("cpu-demo"), n_elevations=3, n_azimuths=4, channels=1, view_size=16
)


def test_the_paper_metrics() -> None:
    assert list(METRICS) == ["avg", "adv"]  # Table 1's order
    avg, adv = METRICS["avg"], METRICS["adv"]
    assert avg.starts(4, 8) == (0, 2, 4, 6, 16, 18, 20, 22)  # SUN360: 2 x 4 starts
    assert adv.starts(4, 8) == tuple(range(32))
    errors = torch.tensor([[1.0, 3.0], [2.0, 2.0]])
    assert avg.reduce(errors).tolist() == [2.0, 2.0]
    assert adv.reduce(errors).tolist() == [3.0, 2.0]
    assert DEFAULT_METRIC in METRICS
    assert get_metric("adv") is adv
    assert get_metric(EVERY_START) is EVERY_START
    with pytest.raises(ValueError, match="metric must be one of avg, adv, got 'max'"):
        get_metric("max")
    with pytest.raises(TypeError):
        METRICS["max"] = adv  # type: ignore[index]  # read-only
    # Every view, in view order: what the reward sidekick asks for; not a reported metric.
    assert EVERY_START.starts(3, 4) == all_views(3, 4) == tuple(range(12))
    assert EVERY_START.name not in METRICS


def test_every_start_evaluates_every_view_in_order() -> None:
    torch.manual_seed(0)
    policy = CompletionPolicy(CFG)
    grids = torch.randint(0, 256, (3, 3, 4, 1, 16, 16), dtype=torch.uint8)
    every = evaluate_policy(policy, grids, channel_mean=[120.0], T=1, metric=EVERY_START)
    adv = evaluate_policy(policy, grids, channel_mean=[120.0], T=1, metric="adv")
    assert every.metric == "every-start"
    assert every.starts.tolist() == list(range(12))
    torch.testing.assert_close(every.per_start, adv.per_start, atol=0, rtol=0)
    torch.testing.assert_close(every.per_sample, every.per_start.mean(1))


def test_the_config_and_the_cli_offer_the_registered_metrics() -> None:
    assert TrainConfig().val_metric == DEFAULT_METRIC
    with pytest.raises(ValueError, match=r"TrainConfig\.val_metric must be one of avg, adv"):
        TrainConfig(val_metric="max")
    assert (*METRICS, "all") == METRIC_CHOICES
    (option,) = [p for p in evaluate_command.params if p.name == "metric"]
    assert list(option.type.choices) == list(METRICS)  # type: ignore[attr-defined]
    assert option.default == DEFAULT_METRIC
    assert option.help == metrics_help()
    assert metrics_help() == (
        "avg: every other elevation and azimuth as starts, mean over starts; adv: all starts, "
        "worst start per sample."
    )


def test_an_unknown_metric_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["compare", "a.npz", "b.npz", "--metric", "max"])
    assert exc.value.code == 2
    assert "'max' is not one of 'avg', 'adv', 'all'" in capsys.readouterr().err


def test_evaluate_help_lists_the_metrics_without_importing_torch() -> None:
    script = (
        "import sys\n"
        "from pyskick_cli.main import main\n"
        "try:\n"
        "    main(['evaluate', '--help'])\n"
        "except SystemExit:\n"
        "    pass\n"
        "print('torch' in sys.modules)\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip().endswith("False")
    assert metrics_help() in " ".join(result.stdout.split())  # as wrapped by click


def _table(metrics: Mapping[str, Metric]) -> dict[str, object]:
    def entry(mean: float, pct: float | None) -> dict[str, object]:
        return {
            "mean_x1000": mean, "stderr_x1000": 0.5, "stderr_seeds_x1000": None,
            "improvement_pct": pct,
        }  # fmt: skip

    rows = [
        {"method": "one-view", "seeds": 1, "paired": {}, "policy_gain_ratio": None,
         **{m: entry(10.0, None) for m in metrics}},
        {"method": "ltla", "seeds": 1, "paired": {}, "policy_gain_ratio": dict.fromkeys(metrics),
         **{m: entry(8.0, 20.0) for m in metrics}},
    ]  # fmt: skip
    return {"rows": rows, "settings": {"n_test": 4}}


def test_the_report_columns_follow_the_registry(monkeypatch: pytest.MonkeyPatch) -> None:
    text = report.format_table(_table(METRICS))
    header, rule, one_view, ltla = text.splitlines()[:4]
    # The paper's columns, byte for byte as before the registry.
    assert header == (
        "| method | seeds | avg ×1000 | avg % better | adv ×1000 | adv % better "
        "| gain ratio avg / adv |"
    )
    assert rule == "|---|---|---|---|---|---|---|"
    assert one_view == "| one-view | 1 | 10.00 ± 0.50 | - | 10.00 ± 0.50 | - | - |"
    assert ltla == "| ltla | 1 | 8.00 ± 0.50 | 20.00 | 8.00 ± 0.50 | 20.00 | - / - |"
    # A third metric in the registry is a third pair of columns.
    every = Metric("every", "all starts, mean over starts", all_views, "mean")
    wider = MappingProxyType({**METRICS, "every": every})
    monkeypatch.setattr(report, "METRICS", wider)
    header, rule = report.format_table(_table(wider)).splitlines()[:2]
    assert header.endswith("| every ×1000 | every % better | gain ratio avg / adv / every |")
    assert rule == "|" + "---|" * 9
