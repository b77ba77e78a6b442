"""pretrain / train / evaluate / demo from the command line, on a tiny synthetic dataset."""

from __future__ import annotations

import json
from pathlib import Path

import click
import pytest
import torch
import torch._dynamo

import pyskick.evaluation
from pyskick.checkpoint import load_checkpoint
from pyskick.data.builtin import make_builtin
from pyskick_cli.main import main

FAST = ["--preset", "cpu-demo", "--epochs", "1", "--batch-size", "8", "--device", "cpu"]


def run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    with pytest.raises(SystemExit) as exc:
        main(args)
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_builtin("synthetic-scenes", tmp_path_factory.mktemp("data") / "s.h5", 40, 1)


@pytest.mark.filterwarnings(  # --compile: dynamo hides it through warnings.showwarning
    "ignore:The .grad attribute of a Tensor that is not a leaf Tensor:UserWarning"
)
def test_pretrain_train_evaluate(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(torch.backends.cudnn, "benchmark", False)  # --cudnn-benchmark sets it
    one, ltla = tmp_path / "one", tmp_path / "ltla"
    code, _, err = run(["pretrain", "--dataset", str(scenes), *FAST, "--out", str(one)], capsys)
    assert code == 0, err
    assert load_checkpoint(one / "best.pt")["stage"] == "pretrain"
    code, _, err = run(
        ["train", "--dataset", str(scenes), *FAST, "--init", str(one), "--out", str(ltla)], capsys
    )
    assert code == 0, err
    state = load_checkpoint(ltla / "latest.pt")
    assert state["stage"] == "train"
    assert state["config"]["T"] == 4
    code, out, err = run(
        ["evaluate", str(ltla), "--dataset", str(scenes), "--one-view", str(one), "--json"], capsys
    )
    assert code == 0, err
    report = json.loads(out)
    assert report["metric"] == "avg"
    assert report["split"] == "test"
    assert report["n_samples"] == 4
    assert {"mean_x1000", "std_x1000", "stderr_x1000", "improvement_pct"} <= set(report)
    # A policy run where a one-view model is asked for: refused before any work.
    policy = f"{ltla / 'best.pt'} is a checkpoint of a 'train' run, not a one-view model"
    code, out, err = run(["evaluate", str(ltla), "--one-view", str(ltla)], capsys)
    assert code == 2
    assert out == ""
    assert err.count("\n") == 1
    assert f"--one-view {policy}" in err
    again = tmp_path / "again"
    code, _, err = run(
        ["train", "--dataset", str(scenes), *FAST, "--init", str(ltla), "--out", str(again)],
        capsys,
    )
    assert code == 2
    assert err.count("\n") == 1
    assert f"init {policy}" in err
    assert not again.exists()
    # --resume with more epochs continues the same run, here with channels-last convolutions,
    # compiled networks, the glimpses decoded once and cuDNN's autotuner (where and how fast it
    # computes: a resumed run may change it).
    torch._dynamo.reset()  # compiled from nothing, whatever this process compiled before
    code, _, err = run(
        ["train", "--dataset", str(scenes), *FAST[:2], "--epochs", "2", "--batch-size", "8",
         "--device", "cpu", "--out", str(ltla), "--resume", "--channels-last", "--compile",
         "--decode-once", "--cudnn-benchmark"],
        capsys,
    )  # fmt: skip
    assert code == 0, err
    state = load_checkpoint(ltla / "latest.pt")
    assert state["epoch"] == 1
    assert state["config"]["channels_last"] is True
    assert state["config"]["compile"] is True
    assert state["config"]["decode_once"] is True
    assert state["config"]["cudnn_benchmark"] is True


def test_train_without_init_pretrains_once_and_reuses(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    for name in ("a", "b"):
        code, _, err = run(
            ["train", "--dataset", str(scenes), *FAST, "--out", str(tmp_path / name)], capsys
        )
        assert code == 0, err
    cached = [p for p in (tmp_path / "cache" / "one-view").iterdir() if p.is_dir()]
    assert len(cached) == 1  # the second run reused the first one's one-view model
    assert (cached[0] / "best.pt").exists()


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["train", "--dataset", "no-such-dataset"], "unknown dataset 'no-such-dataset'"),
        (["train", "--dataset", "missing.h5"], "does not exist"),
        (["train", "--preset", "bogus"], "'bogus' is not one of"),
        (["train", "--config", "missing.toml"], "missing.toml"),
        (["train", "--init", "no-such-run"], "no-such-run"),
        (["train", "--epochs", "0"], "--epochs"),
        (["evaluate", "RUN", "--metric", "median"], "--metric"),
    ],
)
def test_bad_input_exits_2_and_writes_nothing(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    args: list[str],
    message: str,
) -> None:
    out = tmp_path / "run"
    if args[0] == "evaluate":
        args = ["evaluate", str(tmp_path), "--dataset", str(scenes), *args[2:]]
    else:
        if "--dataset" not in args:
            args = [*args, "--dataset", str(scenes)]
        args = [*args, "--out", str(out)]
    code, _, err = run(args, capsys)
    assert code == 2
    assert message in err
    assert not out.exists()


def test_existing_run_is_refused_before_any_work(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    one = tmp_path / "one"
    assert run(["pretrain", "--dataset", str(scenes), *FAST, "--out", str(one)], capsys)[0] == 0
    code, _, err = run(["train", "--dataset", str(scenes), *FAST, "--out", str(one)], capsys)
    assert code == 2
    assert "already holds a run" in err
    assert not (tmp_path / "cache").exists()  # no one-view model was pretrained first


def test_evaluate_and_resume_default_to_the_runs_dataset_and_resume_checks_it(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    data_dir = tmp_path / "data-dir"  # where the default dataset would be generated
    monkeypatch.setenv("PYSKICK_DATA_DIR", str(data_dir))
    copy = tmp_path / "copy.h5"
    copy.write_bytes(scenes.read_bytes())
    one = tmp_path / "one"
    assert run(["pretrain", "--dataset", str(copy), *FAST, "--out", str(one)], capsys)[0] == 0
    code, out, err = run(["evaluate", str(one), "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["n_samples"] == 4
    other = make_builtin("synthetic-scenes", tmp_path / "other.h5", 40, 2)
    code, _, err = run(
        ["pretrain", "--dataset", str(other), *FAST, "--out", str(one), "--resume"], capsys
    )
    assert code == 2
    assert "has other contents" in err
    # Without --dataset a resume continues on the run's own data: nothing is generated.
    longer = [*FAST[:2], "--epochs", "2", *FAST[4:]]
    code, _, err = run(["pretrain", *longer, "--out", str(one), "--resume"], capsys)
    assert code == 0, err
    assert load_checkpoint(one / "latest.pt")["epoch"] == 1
    assert not data_dir.exists()
    # Its data file gone, the resume names the fix, generating nothing and changing nothing.
    copy.unlink()
    before = sorted((p.name, p.stat().st_mtime_ns) for p in one.iterdir())
    code, _, err = run(["pretrain", *longer, "--out", str(one), "--resume"], capsys)
    assert code == 2
    assert err.count("\n") == 1
    assert f"was trained on {copy}, which is not here; pass --dataset" in err
    assert sorted((p.name, p.stat().st_mtime_ns) for p in one.iterdir()) == before
    assert not data_dir.exists()
    # --resume of a folder that holds no run: refused before the default dataset is opened.
    empty = tmp_path / "empty"
    empty.mkdir()
    code, _, err = run(["pretrain", *longer, "--out", str(empty), "--resume"], capsys)
    assert code == 2
    assert "holds no run to resume" in err
    assert not data_dir.exists()


def test_a_resume_finds_the_default_dataset_by_name_where_its_file_is_gone(
    scenes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A run trained on the default dataset, its cache file since moved (another data folder,
    # another machine): found again by the file's name, its contents still checked.
    from pyskick.data.builtin import BUILTIN_DATASETS, builtin_of_cache_file, cache_file_name
    from pyskick_cli.shared_options import DEFAULT_DATASET, training_dataset

    generate, num, seed = BUILTIN_DATASETS[DEFAULT_DATASET]
    name = cache_file_name(DEFAULT_DATASET, generate, num, seed)
    assert builtin_of_cache_file(tmp_path / "old-cache" / name) == DEFAULT_DATASET
    assert builtin_of_cache_file(scenes) is None
    run_dir = tmp_path / "run"
    run_dir.mkdir()
    record = {"path": str(tmp_path / "old-cache" / name), "sha256": "0" * 64}
    (run_dir / "dataset.json").write_text(json.dumps(record))
    assert training_dataset(None, run_dir, resume=True) == DEFAULT_DATASET
    assert training_dataset(None, run_dir, resume=False) == DEFAULT_DATASET
    assert training_dataset(str(scenes), run_dir, resume=True) == str(scenes)
    # Any other file that is gone is the user's to give.
    record["path"] = str(tmp_path / "gone.h5")
    (run_dir / "dataset.json").write_text(json.dumps(record))
    with pytest.raises(click.BadParameter, match="which is not here; pass --dataset"):
        training_dataset(None, run_dir, resume=True)
    # Present, the recorded file is taken as it is.
    record["path"] = str(scenes)
    (run_dir / "dataset.json").write_text(json.dumps(record))
    assert training_dataset(None, run_dir, resume=True) == str(scenes)
    # A run that records no dataset resumes on the default, as before.
    (run_dir / "dataset.json").unlink()
    assert training_dataset(None, run_dir, resume=True) == DEFAULT_DATASET


def test_preset_choices_match_the_library() -> None:
    from pyskick.training import TRAIN_PRESETS
    from pyskick_cli.shared_options import TRAIN_PRESET_NAMES

    assert tuple(TRAIN_PRESETS) == TRAIN_PRESET_NAMES


def test_incompatible_checkpoint_and_dataset(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    one = tmp_path / "one"
    assert run(["pretrain", "--dataset", str(scenes), *FAST, "--out", str(one)], capsys)[0] == 0
    objects = make_builtin("synthetic-objects", tmp_path / "o.h5", 8, 0)
    code, _, err = run(["evaluate", str(one), "--dataset", str(objects)], capsys)
    assert code == 2
    assert f"{objects} (split 'test') does not fit RUN {one}: grids must have shape" in err
    assert len(err.strip().splitlines()) == 1
    assert not (one / "eval").exists()
    # A --one-view model the data do not fit is named as that.
    two = tmp_path / "two"
    pretrain = ["pretrain", "--dataset", str(objects), *FAST, "--batch-size", "4"]  # 4 grids
    assert run([*pretrain, "--out", str(two)], capsys)[0] == 0
    code, _, err = run(["evaluate", str(one), "--dataset", str(scenes), "--one-view", str(two)],
                       capsys)  # fmt: skip
    assert code == 2
    assert f"{scenes} (split 'test') does not fit --one-view {two}: grids must" in err
    assert not (one / "eval").exists()
    # A RUN the data do not fit is refused before the --one-view model is evaluated.
    evaluated = []
    monkeypatch.setattr(pyskick.evaluation, "evaluate", lambda *a, **k: evaluated.append(a))
    code, _, err = run(["evaluate", str(two), "--dataset", str(scenes), "--one-view", str(one)],
                       capsys)  # fmt: skip
    assert code == 2
    assert f"{scenes} (split 'test') does not fit RUN {two}: grids must" in err
    assert evaluated == []
    assert not (two / "eval").exists()


def test_demo_writes_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "demo"
    args = ["demo", "--out", str(out), "--num", "30", "--epochs", "1", "--pretrain-epochs", "1",
            "--batch-size", "8", "--methods", "rnd-actions,ltla"]  # fmt: skip
    code, stdout, err = run(args, capsys)
    assert code == 0, err
    assert "| ltla |" in stdout
    assert f"report in {out / 'index.html'}" in err
    table = json.loads((out / "table.json").read_text())
    assert [row["method"] for row in table["rows"]] == ["one-view", "rnd-actions", "ltla"]
    assert table["rows"][2]["avg"]["improvement_pct"] is not None
    assert (out / "synthetic-scenes-n30-s123-v16.h5").is_file()  # 16-pixel views
    # Re-running skips every finished part and gives the same table.
    code, again, _ = run(args, capsys)
    assert code == 0
    assert again == stdout


def test_sidekick_options_are_recorded_and_kept_on_resume(
    scenes: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    one, rew = tmp_path / "one", tmp_path / "rew"
    base = ["--dataset", str(scenes), *FAST]
    assert run(["pretrain", *base, "--out", str(one)], capsys)[0] == 0
    toml = tmp_path / "rew.toml"
    toml.write_text('start_zeroing = "view"\n\n[sidekick]\nname = "rew"\nscale = 0.05\n')
    args = ["train", *base, "--init", str(one), "--config", str(toml), "--out", str(rew)]
    code, _, err = run([*args, "--sidekick-option", "decay_every=3"], capsys)
    assert code == 0, err
    recorded = json.loads((rew / "config.json").read_text())
    assert recorded["sidekick"] == "rew"
    assert recorded["start_zeroing"] == "view"
    # The file's option, the command line's, and every other option at its default.
    assert recorded["sidekick_options"] == {
        "scale": 0.05, "decay_every": 3, "decay_factor": 2.0, "k": 4, "radius": 1,
    }  # fmt: skip
    assert (
        load_checkpoint(rew / "latest.pt")["config"]["sidekick_options"]
        == (recorded["sidekick_options"])
    )
    before = {p.name: p.stat().st_mtime_ns for p in rew.iterdir()}
    # Resuming with another value is refused before anything is written.
    resume = [a if a != "1" else "2" for a in args] + ["--resume"]
    code, _, err = run([*resume, "--sidekick-option", "decay_every=5"], capsys)
    assert code == 2
    assert "cannot resume: sidekick 'rew' option decay_every is 5 but the run used 3" in err
    assert {p.name: p.stat().st_mtime_ns for p in rew.iterdir()} == before
    # An unknown option names the valid ones, also before anything is written.
    code, _, err = run([*args[:-1], str(tmp_path / "x"), "--sidekick-option", "nms=2"], capsys)
    assert code == 2
    assert "sidekick 'rew' has no option 'nms'; valid options: scale, decay_every" in err
    assert not (tmp_path / "x").exists()
    # The same options again continue the run, keeping the recorded ones.
    code, _, err = run([*resume, "--sidekick-option", "decay_every=3"], capsys)
    assert code == 0, err
    state = load_checkpoint(rew / "latest.pt")
    assert state["epoch"] == 1
    assert state["config"]["sidekick_options"] == recorded["sidekick_options"]
    # Without the config file or --sidekick, a resume continues the run's own sidekick and
    # options.
    bare = ["train", *base[:-6], "--epochs", "3", "--batch-size", "8", "--device", "cpu",
            "--out", str(rew), "--resume"]  # fmt: skip
    code, _, err = run(bare, capsys)
    assert code == 0, err
    state = load_checkpoint(rew / "latest.pt")
    assert state["epoch"] == 2
    assert state["config"]["sidekick"] == "rew"
    assert state["config"]["sidekick_options"] == recorded["sidekick_options"]


def test_pretrain_epochs_sets_the_cached_one_view_model(
    scenes: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Issue 26: without --init, paper settings pretrained 100 epochs and nothing shortened it."""
    from pyskick.training.loggers import read_metrics

    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    out = tmp_path / "run"
    args = ["train", "--dataset", str(scenes), *FAST, "--out", str(out)]
    code, _, err = run([*args, "--pretrain-epochs", "2"], capsys)
    assert code == 0, err
    (one_view,) = [p for p in (tmp_path / "cache" / "one-view").iterdir() if p.is_dir()]
    assert len(read_metrics(one_view / "metrics.jsonl")) == 2
    assert json.loads((out / "config.json").read_text())["pretrain_epochs"] == 2
    # With --init (or --resume) nothing is pretrained: refused before any work.
    code, _, err = run([*args[:-1], str(tmp_path / "b"), "--init", str(one_view),
                        "--pretrain-epochs", "2"], capsys)  # fmt: skip
    assert code == 2
    assert "--pretrain-epochs sets the one-view model pretrained when there is no --init" in err
    assert not (tmp_path / "b").exists()


def test_an_init_of_another_preset_names_the_fix(
    tmp_path: Path, tiny_scenes: Path, tiny_one_view: Path, tiny_objects: Path, cli_runner
) -> None:
    """Issue 26: ``--init`` of a cpu-demo run without ``--preset cpu-demo`` named neither the
    init's preset nor the fix."""
    args = ["train", "--dataset", tiny_scenes, "--init", tiny_one_view, "--out", tmp_path / "r"]
    code, _, err = cli_runner(*args)
    assert code == 2
    (line,) = err.strip().splitlines()
    assert line.endswith(
        ": it is a 'cpu-demo' model; train with --preset cpu-demo, whose model it is"
    )
    # Another data shape: said so, not a preset to pick.
    objects = ["--dataset", tiny_objects, "--preset", "cpu-demo", "--batch-size", "8"]
    code, _, err = cli_runner("train", *objects, "--init", tiny_one_view, "--out", tmp_path / "o")
    assert code == 2
    assert "it was trained on viewgrids [4, 8, 3, 32, 32], so use data of that shape" in err
