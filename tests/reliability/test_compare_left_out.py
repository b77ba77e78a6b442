"""``compare --metric all`` says which metrics it left out and why (issue 25, item 12).

A run holding avg evaluations of two test sets had its avg silently dropped under the default
``--metric all`` (``--metric avg`` alone exited 2 correctly). Every metric left out is now
named on stderr with the reason, and in the JSON under ``left_out``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pyskick.experiments.error_sets import run_eval_file

from .conftest import run_cli, save_evaluation


def _evaluate(run: Path, metric: str, digest: str, errors: list[float]) -> None:
    """``run``'s evaluation of ``metric`` on the test set ``digest``, where evaluate puts it."""
    save_evaluation(
        run_eval_file(run, "test", metric, digest), errors, metric=metric, samples_sha256=digest
    )


@pytest.fixture
def runs(tmp_path: Path) -> tuple[Path, Path]:
    """A and B: adv on one test set; avg on two test sets (both runs)."""
    a, b = tmp_path / "a", tmp_path / "b"
    for run, shift in ((a, 0.0), (b, -0.001)):
        _evaluate(run, "adv", "aa" * 32, [0.02 + shift, 0.03 + shift, 0.04 + shift])
        for digest in ("bb" * 32, "cc" * 32):
            _evaluate(run, "avg", digest, [0.01 + shift, 0.012 + shift, 0.013 + shift])
    return a, b


def test_a_metric_left_out_is_named_with_its_reason(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = runs
    code, out, err = run_cli(["compare", a, b], capsys)
    assert code == 0, err
    assert "adv: gap" in out
    assert "avg: gap" not in out
    assert err.strip() == (
        f"compare: avg left out: {a} and {b} share several evaluated test sets; name the "
        "evaluation files (RUN/eval/*.npz) instead"
    )
    code, out, err = run_cli(["compare", a, b, "--json"], capsys)
    assert code == 0, err
    payload = json.loads(out)
    assert set(payload["metrics"]) == {"adv"}
    assert set(payload["left_out"]) == {"avg"}
    assert "several evaluated test sets" in payload["left_out"]["avg"]
    # Asked for alone, the metric is refused (exit 2) with the same reason.
    code, _, err = run_cli(["compare", a, b, "--metric", "avg"], capsys)
    assert code == 2
    assert "share several evaluated test sets" in err


def test_nothing_is_said_when_every_metric_is_compared(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    a, b = tmp_path / "a", tmp_path / "b"
    for run in (a, b):
        for metric in ("avg", "adv"):
            _evaluate(run, metric, "dd" * 32, [0.01, 0.02, 0.015])
    code, out, err = run_cli(["compare", a, b, "--json"], capsys)
    assert code == 0, err
    assert err == ""
    assert json.loads(out)["left_out"] == {}


def test_a_damaged_evaluation_file_stops_compare_all(
    runs: tuple[Path, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    """Left out means not evaluated comparably; a damaged file is an error (exit 2)."""
    a, b = runs
    (damaged,) = (b / "eval").glob("test-adv-*.npz")
    damaged.write_bytes(b"not an npz")
    code, out, err = run_cli(["compare", a, b], capsys)
    assert code == 2
    assert out == ""
    assert f"{damaged} is not a readable evaluation file" in err
