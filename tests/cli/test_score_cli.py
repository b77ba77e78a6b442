"""`pyskick score` (one process and torchrun) and `pyskick train --scores`."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from pyskick.data import ViewgridFile
from pyskick.data.builtin import make_builtin
from pyskick.sidekicks.base import checkpoint_digest
from pyskick.sidekicks.reward import RewardSidekick
from pyskick.sidekicks.scores import read_score_meta, read_scores, score_key
from pyskick.testing import run_python
from pyskick_cli.main import main

FAST = ["--preset", "cpu-demo", "--batch-size", "8", "--device", "cpu"]
MEAN = (119.16, 107.68, 95.12)  # the synthetic-scenes channel mean


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """A 20-sample synthetic-scenes file (16 train, 2 val) and a one-epoch one-view run."""
    folder = tmp_path_factory.mktemp("score-cli")
    data = make_builtin("synthetic-scenes", folder / "s.h5", 20, 7)
    one = folder / "one"
    with pytest.raises(SystemExit) as exc:
        main(["pretrain", "--dataset", str(data), *FAST, "--epochs", "1", "--out", str(one)])
    assert exc.value.code in (0, None)
    return data, one


SCORE = ["score", "--sidekick", "rew", "--preset", "cpu-demo", "--device", "cpu"]


@pytest.fixture(scope="module")
def scored(scenes: tuple[Path, Path]) -> tuple[Path, str]:
    """``pyskick score`` of the train and val splits in one process: the file and stdout."""
    data, one = scenes
    out = one.parent / "S.h5"
    stdout = io.StringIO()
    with contextlib.redirect_stdout(stdout), pytest.raises(SystemExit) as exc:
        main([*SCORE, "--model", str(one), "--dataset", str(data), "--out", str(out)])
    assert exc.value.code in (0, None)
    return out, stdout.getvalue()


def test_score_then_train_with_the_scores(
    scenes: tuple[Path, Path],
    scored: tuple[Path, str],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    (data, one), (out, stdout) = scenes, scored
    assert "train: 16 viewgrids scored in" in stdout
    assert "val: 2 viewgrids scored in" in stdout
    meta = read_score_meta(out)
    assert meta["sidekick"] == "rew"
    mean = list(ViewgridFile(data).spec.channel_mean)
    assert meta["options"] == {
        "one_view_sha256": checkpoint_digest(one), "channel_mean": mean, "k": 4, "radius": 1,
    }  # fmt: skip
    assert list(meta["splits"]) == ["train", "val"]
    # The file holds what the sidekick computes, stamped with the key of each split's grids:
    # the scores of the class, so one built by hand (named by its class) reads them too.
    rew = RewardSidekick(one, channel_mean=MEAN, k=4, radius=1)
    assert rew.name == "pyskick.sidekicks.reward.RewardSidekick"
    source = ViewgridFile(data)
    train_grids, val_grids = source.split("train").load(), source.split("val").load()
    assert read_scores(out, "train", score_key(rew, train_grids, 4))["nms"].shape == (16, 4, 8)
    stored = read_scores(out, "val", score_key(rew, val_grids, 4))
    direct = rew.compute_scores(val_grids, T=4, device=torch.device("cpu"))
    assert stored.keys() == direct.keys() == {"normal", "nms"}
    for name in direct:
        torch.testing.assert_close(stored[name], direct[name], rtol=1e-5, atol=1e-6)
    run_dir = tmp_path / "rew"
    train = ["train", "--dataset", str(data), *FAST, "--epochs", "1", "--init", str(one)]
    code, _, err = run([*train, "--sidekick", "rew", "--scores", str(out), "--out", str(run_dir)],
                       capsys)  # fmt: skip
    assert code == 0, err
    assert "computing rew scores" not in err
    first = json.loads((run_dir / "metrics.jsonl").read_text().splitlines()[0])
    assert first["sidekick/reward_scale"] == pytest.approx(255e-4)
    assert not (tmp_path / "cache" / "scores").exists()  # the file, not the cache, was used


def test_stale_scores_are_refused_before_anything_is_written(
    scenes: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    data, one = scenes
    other = make_builtin("synthetic-scenes", tmp_path / "other.h5", 10, 8)  # same shapes
    scores = tmp_path / "other-scores.h5"
    args = [*SCORE, "--model", str(one), "--dataset", str(other), "--out", str(scores)]
    assert run([*args, "--splits", "train"], capsys)[0] == 0
    run_dir = tmp_path / "rew"
    train = ["train", "--dataset", str(data), *FAST, "--epochs", "1", "--init", str(one),
             "--out", str(run_dir), "--scores", str(scores)]  # fmt: skip
    code, _, err = run([*train, "--sidekick", "rew"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"Error: stale scores in {scores} (split 'train'): they were computed for other "
        "viewgrids (another data file or split); compute them again (pyskick score) or leave "
        "--scores out"
    ]
    code, _, err = run([*train, "--sidekick", "demo"], capsys)
    assert code == 2
    assert err.strip().splitlines() == [
        f"Error: {scores} holds scores of sidekick 'rew', not 'demo'; score with it (pyskick "
        "score --sidekick demo) or leave --scores out"
    ]
    code, _, err = run([*train, "--sidekick", "none"], capsys)
    assert code == 2
    assert "sidekick 'none' has no scores" in err
    # Without --init, refused before a one-view model is pretrained for the run (cached).
    no_init = [a for a in train if a not in ("--init", str(one))]
    code, _, err = run([*no_init, "--sidekick", "none"], capsys)
    assert code == 2
    assert "Error: Invalid value for --scores: sidekick 'none' has no scores" in err
    assert not run_dir.exists()
    assert not (tmp_path / "cache").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--sidekick", "nope"], "unknown sidekick 'nope'; valid names: "),
        (["--sidekick", "none"], "sidekick 'none' computes no scores"),
        (["--model", "no-such-run"], "'no-such-run' does not exist"),
        (["--model", "."], "model checkpoint best.pt does not exist"),  # a folder without a run
        (["--splits", "train,nope"], "no split 'nope'; its splits: train, val, test"),
        (["--config", "missing.toml"], "missing.toml"),
        (["--splits", "train,train"], "named twice"),
        (["--dataset", "missing.h5"], "dataset file missing.h5 does not exist"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    scenes: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    args: list[str],
    message: str,
) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    data, one = scenes
    options = {"--sidekick": "rew", "--model": str(one), "--dataset": str(data),
               "--out": "S.h5", **dict(zip(args[::2], args[1::2], strict=True))}  # fmt: skip
    code, _, err = run(["score", *[x for pair in options.items() for x in pair]], capsys)
    assert code == 2
    assert message in err
    assert err.strip().splitlines()[-1].startswith("Error:")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_score_defaults_to_the_cached_one_view_model(
    scenes: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    data, _ = scenes
    config = tmp_path / "small.toml"
    config.write_text("batch_size = 8\npretrain_epochs = 1\n")
    out = tmp_path / "S.h5"
    args = [*SCORE, "--dataset", str(data), "--config", str(config), "--splits", "val"]
    code, _, err = run([*args, "--out", str(out)], capsys)
    assert code == 0, err
    (cached,) = (tmp_path / "cache" / "one-view").glob("*/best.pt")
    assert read_score_meta(out)["options"]["one_view_sha256"] == checkpoint_digest(cached)
    # What the command read is no output, --overwrite or not: the config file, and the cached
    # one-view model's checkpoint and records.
    before = {f: f.read_bytes() for f in tmp_path.rglob("*") if f.is_file()}
    for target in (config, cached, cached.parent / "config.json"):
        code, _, err = run([*args, "--out", str(target), "--overwrite"], capsys)
        assert code == 2, err
        assert f"{target} is one of this command's inputs" in err
    assert {f: f.read_bytes() for f in tmp_path.rglob("*") if f.is_file()} == before


def test_torchrun_shards_and_writes_the_same_file(
    scenes: tuple[Path, Path], scored: tuple[Path, str], tmp_path: Path
) -> None:
    (data, one), (single, _) = scenes, scored
    sharded = tmp_path / "sharded.h5"
    args = [*SCORE, "--model", str(one), "--dataset", str(data), "--out", str(sharded)]
    proc = run_python("-m", "pyskick_cli", *args, cwd=tmp_path, ranks=2)
    assert "train: 16 viewgrids scored in" in proc.stdout
    assert "(2 processes)" in proc.stdout
    assert proc.stdout.count("wrote rew scores") == 1  # rank 0 alone writes
    assert read_score_meta(sharded) == read_score_meta(single)
    with h5py.File(single) as a, h5py.File(sharded) as b:
        for split in ("train", "val"):
            for name in ("normal", "nms"):
                np.testing.assert_allclose(b[split][name][()], a[split][name][()], atol=1e-6)


def test_a_sidekick_is_named_by_the_option_or_the_config(
    scenes: tuple[Path, Path],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # --sidekick is optional because --config may name one; neither is one line, exit 2.
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    data, one = scenes
    args = ["score", "--model", str(one), "--dataset", str(data), "--out", "S.h5"]
    code, _, err = run(args, capsys)
    assert code == 2
    assert "no sidekick named: give --sidekick NAME (or sidekick in --config)" in err
    assert sorted(p.name for p in tmp_path.iterdir()) == []
    config = tmp_path.parent / f"{tmp_path.name}-rew.toml"  # outside the folder checked above
    config.write_text('sidekick = "rew"\nbatch_size = 8\n')
    code, out, err = run([*args, "--config", str(config), "--splits", "val"], capsys)
    assert code == 0, err
    assert "wrote rew scores of val to S.h5" in out  # the config's sidekick, not "None"


def test_data_the_model_cannot_take_are_named(
    scenes: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _, one = scenes
    objects = make_builtin("synthetic-objects", tmp_path / "o.h5", 8, 0)
    out = tmp_path / "S.h5"
    for sidekick in ("rew", "demo"):
        code, _, err = run(
            ["score", "--sidekick", sidekick, "--model", str(one), "--dataset", str(objects),
             "--out", str(out), "--device", "cpu"],
            capsys,
        )  # fmt: skip
        assert code == 2
        assert f"{objects} (split 'train') does not fit --model {one}: grids must" in err
        assert not out.exists()
