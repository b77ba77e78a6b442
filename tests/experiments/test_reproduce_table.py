"""reproduce(): the table's structure and numbers, skipping, resuming and refusals."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import torch

from pyskick.checkpoint import load_checkpoint
from pyskick.data import ViewgridFile
from pyskick.evaluation import evaluate
from pyskick.experiments import reproduce
from pyskick.experiments.layout import TIMINGS_FILE, run_dir
from pyskick.experiments.reproduce import epochs_done
from pyskick.training import trainer as trainer_module
from pyskick.training.loggers import read_metrics

FAST = {
    "preset": "cpu-demo",
    "epochs": 1,
    "pretrain_epochs": 1,
    "batch_size": 8,
    "device": "cpu",
    "seeds": 1,
}
METHODS = ["rnd-actions", "ltla", "ours(rew)"]


def _timings(out: Path) -> list[dict]:
    return [json.loads(line) for line in (out / TIMINGS_FILE).read_text().splitlines()]


def test_table_matches_direct_evaluation(finished: Path, scenes: Path, auto_repeat: Any) -> None:
    table = json.loads((finished / "table.json").read_text())
    assert [row["method"] for row in table["rows"]] == ["one-view", *METHODS]
    assert table["settings"]["n_test"] == 4
    source = ViewgridFile(scenes)
    test = source.split("test").load()
    mean = source.spec.channel_mean
    base = {
        m: evaluate(finished / "one-view", test, m, channel_mean=mean, seed=123)
        for m in ("avg", "adv")
    }
    for row in table["rows"]:
        assert row["seeds"] == 1
        assert row["n_test"] == 4
        run = (
            finished / "one-view"
            if row["method"] == "one-view"
            else finished / row["method"] / "seed-0"
        )
        for metric in ("avg", "adv"):
            direct = evaluate(
                run, test, metric, channel_mean=mean, seed=123,
                baseline=None if row["method"] == "one-view" else base[metric],
            )  # fmt: skip
            entry = row[metric]
            assert entry["mean_x1000"] == auto_repeat.approx(direct.summary.mean_x1000, 1e-9)
            assert entry["stderr_x1000"] == auto_repeat.approx(direct.summary.stderr_x1000, 1e-9)
            assert entry["stderr_seeds_x1000"] is None
            if direct.improvement_pct is None:
                assert entry["improvement_pct"] is None
            else:
                assert entry["improvement_pct"] == pytest.approx(direct.improvement_pct)
            saved = json.loads(
                (finished / "eval" / f"{row['method']}-seed0-{metric}.json").read_text()
            )
            assert saved["n_samples"] == 4
            assert (finished / "eval" / f"{row['method']}-seed0-{metric}.npz").is_file()
    # ours(rew) trained with the reward sidekick's NMS radius (sun360-like preset: 1).
    rew = load_checkpoint(finished / "ours(rew)" / "seed-0" / "latest.pt")
    assert rew["sidekick_name"] == "rew"
    assert (
        load_checkpoint(finished / "rnd-actions" / "seed-0" / "latest.pt")["config"]["actor"]
        == "random"
    )
    md = (finished / "table.md").read_text()
    assert md.startswith("| method | seeds | avg ×1000 |")
    ltla = table["rows"][2]
    assert (
        f"| ltla | 1 | {ltla['avg']['mean_x1000']:.2f} ± {ltla['avg']['stderr_x1000']:.2f} |" in md
    )
    assert {check["worse"] for check in table["ordering"]} == {"one-view", "rnd-actions", "ltla"}
    assert {check["kind"] for check in table["ordering"]} == {"samples"}  # one seed


def test_rerun_skips_finished_work(finished: Path, scenes: Path) -> None:
    runs = [finished / "one-view", *(finished / m / "seed-0" for m in METHODS)]
    before = {run: (run / "latest.pt").stat().st_mtime_ns for run in runs}
    n_records = len(_timings(finished))
    result = reproduce(scenes, finished, methods=METHODS, report=False, **FAST)
    assert {run: (run / "latest.pt").stat().st_mtime_ns for run in runs} == before
    assert len(_timings(finished)) == n_records  # nothing trained or evaluated again
    assert result.table == json.loads((finished / "table.json").read_text())


def test_interrupted_run_resumes_and_more_epochs_extend(
    scenes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    out = tmp_path / "out"
    save = trainer_module.Trainer.save

    def save_then_die(self: trainer_module.Trainer, epoch: int, *, best: bool) -> None:
        save(self, epoch, best=best)
        if self.stage == "train":
            raise KeyboardInterrupt  # killed after the first epoch of ltla

    monkeypatch.setattr(trainer_module.Trainer, "save", save_then_die)
    settings = {**FAST, "epochs": 2}
    with pytest.raises(KeyboardInterrupt):
        reproduce(scenes, out, methods=["ltla"], report=False, **settings)
    run = out / "ltla" / "seed-0"
    assert epochs_done(run) == 1
    first = read_metrics(run / "metrics.jsonl")[0]
    monkeypatch.setattr(trainer_module.Trainer, "save", save)
    reproduce(scenes, out, methods=["ltla"], report=False, **settings)
    assert epochs_done(run) == 2
    records = read_metrics(run / "metrics.jsonl")
    assert [r["step"] for r in records] == [0, 1]
    assert records[0] == first
    assert [(t["stage"], t["epochs"]) for t in _timings(out) if t["stage"] != "evaluate"] == [
        ("pretrain", 1), ("train", 1),
    ]  # fmt: skip
    # More epochs extend the run; the evaluations follow its new best.pt.
    reproduce(scenes, out, methods=["ltla"], report=False, **{**settings, "epochs": 3})
    assert epochs_done(run) == 3
    assert json.loads((out / "reproduce.json").read_text())["epochs"] == 3
    with pytest.raises(ValueError, match="cannot shorten"):
        reproduce(scenes, out, methods=["ltla"], report=False, **settings)


def test_a_moved_study_continues_and_records_where_its_one_view_run_is(
    scenes: Path, tmp_path: Path
) -> None:
    # The study folder moved between two calls: the runs continue from the one-view run at
    # its new place (the same checkpoint bytes), and record that place.
    import shutil

    settings = {**FAST, "epochs": 1}
    reproduce(scenes, tmp_path / "a", methods=["ltla"], report=False, **settings)
    shutil.move(tmp_path / "a", tmp_path / "b")
    out = tmp_path / "b"
    reproduce(scenes, out, methods=["ltla"], report=False, **{**settings, "epochs": 2})
    run = out / "ltla" / "seed-0"
    state = load_checkpoint(run / "latest.pt")
    assert (state["epoch"], state["init"]) == (1, str((out / "one-view").resolve()))
    assert json.loads((run / "dataset.json").read_text())["init"] == state["init"]


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"pretrain_epochs": 2}, "pretrain_epochs 1, not 2"),
        ({"batch_size": 4}, "batch_size 8, not 4"),
        ({"num_test": 2}, "n_test 4, not 2"),
        ({"preset": "paper-sun360"}, "preset 'cpu-demo', not 'paper-sun360'"),
    ],
)
def test_changed_settings_are_refused(
    finished: Path, scenes: Path, change: dict, message: str
) -> None:
    record = (finished / "reproduce.json").read_text()
    with pytest.raises(ValueError, match=message.replace("(", r"\(")):
        reproduce(scenes, finished, methods=["ltla"], report=False, **{**FAST, **change})
    assert (finished / "reproduce.json").read_text() == record


def test_other_dataset_is_refused(finished: Path, tmp_path: Path) -> None:
    from pyskick.data.builtin import make_builtin

    other = make_builtin("synthetic-scenes", tmp_path / "o.h5", 40, 2)
    with pytest.raises(ValueError, match="another dataset"):
        reproduce(other, finished, methods=["ltla"], report=False, **FAST)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"methods": ["bogus"]}, ValueError, "unknown method 'bogus'"),
        ({"methods": ["ltla", "ltla"]}, ValueError, "listed twice"),
        ({"seeds": 0}, ValueError, "seeds must be positive"),
        ({"num_test": 5}, ValueError, "num_test 5 exceeds the 4 test"),
        ({"batch_size": 64}, ValueError, "batch_size 64 exceeds the 32 training"),
    ],
)
def test_bad_input_writes_nothing(
    scenes: Path, tmp_path: Path, kwargs: dict, error: type, message: str
) -> None:
    out = tmp_path / "out"
    with pytest.raises(error, match=message):
        reproduce(scenes, out, report=False, **{**FAST, "methods": ["ltla"], **kwargs})
    assert not out.exists()


def test_missing_dataset(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match="does not exist"):
        reproduce(tmp_path / "none.h5", tmp_path / "out", methods=["ltla"], **FAST)
    assert not (tmp_path / "out").exists()


def test_eval_files_hold_the_per_sample_errors(finished: Path) -> None:
    import numpy as np

    saved = np.load(finished / "eval" / "ltla-seed0-adv.npz")
    assert saved["per_start"].shape == (4, 32)  # adv: every start of the 4 x 8 grid
    assert float(saved["mean_x1000"]) == pytest.approx(
        float(torch.from_numpy(saved["per_sample"]).mean()) * 1000
    )


def test_a_study_on_the_validation_split(scenes: Path, tmp_path: Path, auto_repeat: Any) -> None:
    out = tmp_path / "study"
    result = reproduce(scenes, out, methods=["ltla"], report=False, eval_split="val", **FAST)
    assert result.table["settings"]["eval_split"] == "val"
    source = ViewgridFile(scenes)
    val = source.split("val").load()
    direct = evaluate(
        out / "ltla" / "seed-0", val, "avg", channel_mean=source.spec.channel_mean, seed=123
    )
    ltla = result.table["rows"][1]
    assert ltla["n_test"] == val.shape[0]
    assert ltla["avg"]["mean_x1000"] == auto_repeat.approx(direct.summary.mean_x1000, 1e-9)
    text = (out / "table.md").read_text()
    assert "4 val viewgrids" in text
    assert "standard error across val samples" in text
    assert "test samples" not in text
    assert "across val samples" in result.table["stderr"]
    with pytest.raises(ValueError, match="holds results of eval_split 'val', not 'test'"):
        reproduce(scenes, out, methods=["ltla"], report=False, **FAST)
    with pytest.raises(ValueError, match="eval_split must be 'test' or 'val'"):
        reproduce(scenes, tmp_path / "x", methods=["ltla"], eval_split="train", **FAST)
    # A folder written before a TrainConfig field existed is refused, naming the field.
    record = out / "reproduce.json"
    saved = json.loads(record.read_text())
    del saved["train_config"]["critic_gate"]
    record.write_text(json.dumps(saved))
    with pytest.raises(ValueError, match="older pyskick, before the setting critic_gate"):
        reproduce(scenes, out, methods=["ltla"], report=False, eval_split="val", **FAST)
    assert json.loads(record.read_text()) == saved  # refused before anything was written


def test_packed_runs_give_the_table_of_runs_alone(
    scenes: Path, finished: Path, tmp_path: Path
) -> None:
    """pack="on": rnd-actions, ltla and ours(rew) train as one pack (each run records it),
    and the table is the one of the runs trained alone, up to float32 rounding."""
    out = tmp_path / "packed"
    result = reproduce(scenes, out, methods=METHODS, report=False, pack="on", **FAST)
    alone = json.loads((finished / "table.json").read_text())
    runs = [run_dir(out, name, 0) for name in ("rnd-actions", "ltla", "ours(rew)")]
    for run in runs:
        record = load_checkpoint(run / "latest.pt")["pack"]
        assert record["runs"] == [f"{name}/seed-0" for name in ("rnd-actions", "ltla", "ours(rew)")]
    timings = [json.loads(line) for line in (out / "timings.jsonl").read_text().splitlines()]
    packs = [t for t in timings if "pack" in t]
    assert [len(t["pack"]) for t in packs] == [3]
    for packed_row, solo_row in zip(result.table["rows"], alone["rows"], strict=True):
        assert packed_row["method"] == solo_row["method"]
        for metric in ("avg", "adv"):
            assert packed_row[metric]["mean_x1000"] == pytest.approx(
                solo_row[metric]["mean_x1000"], rel=1e-3
            )
    # Rerun: nothing left to train; more epochs continue the pack as that pack.
    again = reproduce(
        scenes, out, methods=METHODS, report=False, pack="on", **{**FAST, "epochs": 2}
    )
    assert all(load_checkpoint(run / "latest.pt")["epoch"] == 1 for run in runs)
    assert again.table["rows"]


def test_runs_are_grouped_by_what_they_share() -> None:
    from pyskick.experiments.reproduce import TrainJob, group_jobs

    def job(name, key, device="cuda", recorded=None) -> TrainJob:
        member = SimpleNamespace(config=SimpleNamespace(device=device), out_dir=Path(name))
        method = SimpleNamespace(name=name)
        return TrainJob(method, 0, 0, member, key, recorded)  # type: ignore[arg-type]

    def names(groups):
        return [[j.method.name for j in g] for g in groups]

    jobs = [job("a", (1,)), job("b", (2,)), job("c", (1,))]
    assert names(group_jobs(jobs, "on")) == [["a", "c"], ["b"]]
    assert names(group_jobs(jobs, "off")) == [["a"], ["b"], ["c"]]
    on_cpu = [job("a", (1,), "cpu"), job("c", (1,), "cpu")]
    assert names(group_jobs(on_cpu, "auto")) == [["a"], ["c"]]
    assert names(group_jobs(on_cpu, "on")) == [["a", "c"]]
    # A run that started continues as it started, whatever --pack says now.
    started = [
        job("a", (1,), recorded=("x/a", "x/c")),
        job("b", (1,), recorded=("x/b",)),
        job("c", (1,), recorded=("x/a", "x/c")),
    ]
    assert names(group_jobs(started, "off")) == [["a", "c"], ["b"]]
    assert names(group_jobs(started, "on")) == [["a", "c"], ["b"]]
    with pytest.raises(ValueError, match="pack must be one of auto, on, off"):
        reproduce("x.h5", "out", pack="sometimes")
