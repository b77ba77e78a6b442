"""``pyskick visualize`` end to end on tiny runs; bad input exits 2 and writes nothing."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest
from PIL import Image

from pyskick.config import train_preset
from pyskick.training.data import TrainData
from pyskick.training.trainer import pretrain
from pyskick_cli.main import main


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


def test_all_figures(tiny_runs, tmp_path, capsys, assert_real_png):
    out = tmp_path / "figs"
    code, stdout, err = run(
        ["visualize", str(tiny_runs.ltla), "--out", str(out), "--examples", "1", "--seed", "2",
         "--curves", str(tiny_runs.one_view), "--sidekick-maps", "--device", "cpu"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    written = [Path(line) for line in stdout.splitlines()]
    kinds = ["episode", "heatmaps", "curves", "reward_maps", "coverage"]
    assert len(written) == len(kinds)
    for path, kind in zip(written, kinds, strict=True):
        assert kind in path.name
        assert_real_png(path)
    assert sorted(p.name for p in out.iterdir()) == sorted(p.name for p in written)


def test_one_view_run_and_no_heatmaps(tiny_runs, tmp_path, capsys):
    out = tmp_path / "figs"
    code, stdout, err = run(
        ["visualize", str(tiny_runs.one_view / "best.pt"), "--out", str(out), "--split", "val",
         "--examples", "2", "--no-heatmaps", "--sidekick-maps", "--device", "cpu"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    names = [Path(line).name for line in stdout.splitlines()]
    assert sum(name.endswith("_episode.png") for name in names) == 2
    assert "learning_curves.png" in names  # the checkpoint's folder has metrics.jsonl
    assert not any("heatmaps" in name for name in names)
    assert sum(name.endswith("_coverage.png") for name in names) == 2


def test_bad_input_exits_2_and_writes_nothing(tiny_runs, tmp_path, capsys, write_tiny_dataset):
    out = tmp_path / "never"
    bare = tmp_path / "bare"
    shutil.copytree(tiny_runs.ltla, bare)
    (bare / "dataset.json").unlink()
    other = write_tiny_dataset(tmp_path / "other.h5", size=24)
    other_run = tmp_path / "other-run"  # a one-view run of 24-pixel views
    config = train_preset("cpu-demo").replace(batch_size=8, pretrain_epochs=1, eval_batch_size=64)
    pretrain(config, other_run, TrainData.from_file(other))
    cases = [
        ([str(tiny_runs.ltla), "--split", "nope"], "split 'nope' is not in"),
        ([str(tiny_runs.ltla), "--curves", str(tmp_path)], "has no metrics.jsonl"),
        ([str(bare)], "does not record its dataset; pass --dataset"),
        ([str(bare), "--dataset", str(tiny_runs.dataset), "--sidekick-maps"], "pass --one-view"),
        # Named by the file and split the grids came from, and the model they do not fit.
        (
            [str(tiny_runs.ltla), "--dataset", str(other)],
            f"{other} (split 'test') does not fit RUN {tiny_runs.ltla}: grids must ",
        ),
        (
            [str(tiny_runs.ltla), "--sidekick-maps", "--one-view", str(other_run)],
            f"(split 'test') does not fit the one-view run {other_run}: grids must ",
        ),
        ([str(tmp_path / "missing")], "does not exist"),
        # A policy run where the one-view run is asked for.
        (
            [str(tiny_runs.ltla), "--sidekick-maps", "--one-view", str(tiny_runs.ltla)],
            f"--one-view {tiny_runs.ltla / 'best.pt'} is a checkpoint of a 'train' run, not a "
            "one-view model",
        ),
    ]
    for args, message in cases:
        code, _, err = run(["visualize", *args, "--out", str(out), "--device", "cpu"], capsys)
        assert code == 2, (args, err)
        assert message in err, (args, err)
        assert sum(line.startswith("Error:") for line in err.splitlines()) == 1, err
        assert not out.exists(), args
    a_file = tmp_path / "file"
    a_file.write_text("x")
    code, _, err = run(["visualize", str(tiny_runs.ltla), "--out", str(a_file)], capsys)
    assert code == 2
    assert a_file.read_text() == "x"


def test_gif_animates_each_episode_and_refuses_to_overwrite(tiny_runs, tmp_path, capsys):
    out = tmp_path / "figs"
    args = ["visualize", str(tiny_runs.ltla), "--out", str(out), "--examples", "2",
            "--no-heatmaps", "--gif", "--device", "cpu"]  # fmt: skip
    code, stdout, err = run(args, capsys)
    assert code == 0, err
    written = [Path(line) for line in stdout.splitlines()]
    gifs = [path for path in written if path.suffix == ".gif"]
    assert [path.name.endswith("_episode.gif") for path in gifs] == [True, True]
    for path in gifs:
        assert path.with_suffix(".png").is_file()
        with Image.open(path) as image:
            assert image.n_frames == 3  # T glimpses
    # An existing animation is refused (exit 2) before anything is drawn, the PNG included.
    pngs = [path for path in written if path.suffix == ".png"]
    for path in pngs:
        path.unlink()
    before = gifs[0].read_bytes()
    code, _, err = run(args, capsys)
    assert code == 2
    assert f"{gifs[0]} already exists; pass --overwrite" in err
    assert not any(path.exists() for path in pngs)
    code, stdout, err = run([*args, "--overwrite"], capsys)
    assert code == 0, err
    assert all(path.is_file() for path in pngs)
    assert gifs[0].read_bytes() == before  # same seed, same animation


def test_mp4_without_imageio_ffmpeg_exits_2(tiny_runs, tmp_path, capsys, monkeypatch):
    monkeypatch.setitem(sys.modules, "imageio_ffmpeg", None)  # as if not installed
    out = tmp_path / "never"
    code, _, err = run(
        ["visualize", str(tiny_runs.ltla), "--out", str(out), "--mp4", "--device", "cpu"], capsys
    )
    assert code == 2
    assert "--mp4" in err, err
    assert "pip install imageio-ffmpeg" in err, err
    assert not out.exists()
