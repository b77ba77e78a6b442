"""Learning curves read from real metrics.jsonl files."""

from __future__ import annotations

import math
import sys

import pytest

from pyskick.training.loggers import JsonlLogger, RunInfo
from pyskick.viz import plot_learning_curves
from pyskick.viz.curves import read_curve


def _log(folder, values):
    logger = JsonlLogger()
    logger.start(RunInfo(folder))
    for step, value in enumerate(values):
        logger.log(step, {"val/rec_error": value, "train/rec_error": 2 * value})
    logger.close()
    return folder


def test_reads_and_plots_several_runs(tmp_path, assert_real_png):
    a = _log(tmp_path / "a", [0.05, 0.04, math.nan, 0.03])
    b = _log(tmp_path / "b", [0.06, 0.05])
    assert read_curve(a, "val/rec_error") == ([0, 1, 3], [0.05, 0.04, 0.03])  # NaN skipped
    assert read_curve(b / "metrics.jsonl", "train/rec_error") == ([0, 1], [0.12, 0.1])
    out = plot_learning_curves({"ltla": a, "ours": b}, tmp_path / "fig" / "curves.png")
    assert out == tmp_path / "fig" / "curves.png"
    assert_real_png(out)
    assert [p.name for p in out.parent.iterdir()] == ["curves.png"]  # no temp file left


def test_reads_a_trained_run(tiny_runs, tmp_path, assert_real_png):
    steps, values = read_curve(tiny_runs.ltla, "val/rec_error")
    assert steps == [0, 1]
    assert all(0 < v < 1 for v in values)
    assert_real_png(plot_learning_curves({"ltla": tiny_runs.ltla}, tmp_path / "c.png"))
    svg = plot_learning_curves({"ltla": tiny_runs.ltla}, tmp_path / "c.svg")
    assert svg.read_text().lstrip().startswith("<?xml")


def test_bad_inputs_write_nothing(tmp_path):
    run = _log(tmp_path / "run", [0.1])
    out = tmp_path / "out" / "c.png"
    with pytest.raises(ValueError, match="non-empty mapping"):
        plot_learning_curves({}, out)
    with pytest.raises(FileNotFoundError, match=r"has no metrics\.jsonl"):
        plot_learning_curves({"x": tmp_path / "missing"}, out)
    with pytest.raises(ValueError, match="no finite 'val/nope' values"):
        plot_learning_curves({"x": run}, out, key="val/nope")
    with pytest.raises(ValueError, match=r"must end with \.png"):
        plot_learning_curves({"x": run}, tmp_path / "c.jpg")
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "metrics.jsonl").write_text('{"step": 0}\nnot json\n')
    with pytest.raises(ValueError, match=r"metrics\.jsonl:2 is not JSON"):
        plot_learning_curves({"x": tmp_path / "bad"}, out)
    assert not (tmp_path / "out").exists()
    assert not (tmp_path / "c.jpg").exists()


def test_missing_matplotlib_is_one_line(tmp_path, monkeypatch):
    run = _log(tmp_path / "run", [0.1])
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    with pytest.raises(ImportError, match=r"pip install 'pyskick\[viz\]'"):
        plot_learning_curves({"x": run}, tmp_path / "c.png")
    assert not (tmp_path / "c.png").exists()


def test_seeds_are_drawn_as_a_mean_with_a_band(tmp_path, assert_real_png):
    from pyskick.viz.curves import mean_curve

    seeds = [
        _log(tmp_path / "s0", [0.05, 0.04, 0.03]),
        _log(tmp_path / "s1", [0.07, 0.05, 0.04, 0.035]),  # one epoch more: not shared
        _log(tmp_path / "s2", [0.06, 0.03, 0.02]),
    ]
    epochs, mean, stderr = mean_curve(seeds, "val/rec_error")
    assert epochs == [0, 1, 2]
    assert mean.tolist() == pytest.approx([0.06, 0.04, 0.03])
    # Epoch 0: values 0.05, 0.07, 0.06 -> sd 0.01, se 0.01 / sqrt(3).
    assert float(stderr[0]) == pytest.approx(0.01 / math.sqrt(3))
    one = mean_curve(seeds[:1], "val/rec_error")
    assert one[2].tolist() == [0.0, 0.0, 0.0]
    out = plot_learning_curves({"ltla": seeds, "one": seeds[0]}, tmp_path / "band.svg")
    text = out.read_text()
    assert "ltla (3 seeds)" in text  # the legend says how many seeds the band summarises
    assert_real_png(plot_learning_curves({"ltla": seeds}, tmp_path / "band.png"))
    with pytest.raises(TypeError, match="non-empty list of paths"):
        plot_learning_curves({"ltla": []}, tmp_path / "x.png")
    apart = _log(tmp_path / "apart", [])
    (apart / "metrics.jsonl").write_text('{"step": 7, "val/rec_error": 0.1}\n')
    with pytest.raises(ValueError, match="share no epoch"):
        mean_curve([seeds[0], apart], "val/rec_error")


def test_curves_count_epochs_from_one_and_stay_apart(tmp_path, monkeypatch):
    """Issue 26: the plots counted epochs from 0 (the tables from 1), and ltla's curve hid
    under ours(rew)'s: every curve now has its own marker and dash besides its colour."""
    from matplotlib.figure import Figure

    saved: list[Figure] = []
    real = Figure.savefig
    monkeypatch.setattr(
        Figure, "savefig", lambda fig, *a, **k: (saved.append(fig), real(fig, *a, **k))[1]
    )
    same = [0.05, 0.04, 0.03]
    runs = {name: _log(tmp_path / name, same) for name in ("ltla", "ours(rew)", "ours(demo)")}
    plot_learning_curves(runs, tmp_path / "c.png")
    (figure,) = saved
    lines = figure.axes[0].get_lines()
    assert [list(line.get_xdata()) for line in lines] == [[1, 2, 3]] * 3
    assert len({(line.get_marker(), line.get_linestyle()) for line in lines}) == 3
    assert figure.axes[0].get_xlabel().startswith("epoch (1 = after the first)")
