"""Run folders under bad requests (issue 14: F1, F2, F5 --seed, F10 and the smaller items).

Every refused ``train``/``pretrain``/``score``/``evaluate`` below exits 2 with one line naming
what is wrong and leaves the whole test world (datasets, one-view runs, a ``rew`` run, the
caches, the folder ``--out`` names) byte-identical: a refusal is decided before the run
folder is created, locked or recorded. A resume refused with another ``--init`` does not
change the run, so the next correct ``--resume`` ends bit-identical to an uninterrupted run.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import torch

from pyskick._io import temporaries, temporary_path
from pyskick.checkpoint import EXPORT_MARKER, load_checkpoint
from pyskick.data.builtin import make_builtin
from pyskick.run_dir import (
    LOCK,
    REPRODUCE_RECORD,
    RunDir,
    RunLockedError,
    load_policy,
    trim_log,
)
from pyskick_cli.main import main

FAST = ["--preset", "cpu-demo", "--device", "cpu"]
B8 = ["--batch-size", "8"]


@dataclass(frozen=True)
class World:
    """Everything the refused commands could damage; all of it lives under ``root``."""

    root: Path
    base: Path  # 40 synthetic scenes (32 train)
    other: Path  # the same shapes, other contents
    ov: Path  # a one-view run of base
    ov2: Path  # another one (another seed)
    ov_objects: Path  # a one-view run of another data shape
    trunc: Path  # the first half of ov's best.pt
    rew: Path  # one epoch of ours(rew) from ov
    rew_trunc: Path  # rew with a truncated latest.pt
    empty: Path  # an empty folder
    afile: Path  # a plain file
    bad_toml: Path  # a config with an unknown key
    t1_toml: Path  # a config of one glimpse
    big_seed_toml: Path  # a config with a seed out of range
    table: Path  # a reproduce folder (its settings record)
    export: Path  # an export folder (its marker)

    @property
    def new(self) -> Path:
        """A run folder that does not exist (and must not be created)."""
        return self.root / "new"


def pyskick(args: list[Any]) -> int:
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


def truncated_copy(source: Path, target: Path) -> Path:
    data = source.read_bytes()
    target.write_bytes(data[: len(data) // 2])
    return target


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[World]:
    root = tmp_path_factory.mktemp("world")
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSKICK_CACHE_DIR", str(root / "cache"))
        base = make_builtin("synthetic-scenes", root / "base.h5", 40, 1)
        objects = make_builtin("synthetic-objects", root / "objects.h5", 16, 0)
        pre = ["pretrain", *FAST, *B8, "--epochs", "1"]
        assert pyskick([*pre, "--dataset", base, "--out", root / "ov"]) == 0
        assert pyskick([*pre, "--dataset", base, "--seed", "7", "--out", root / "ov2"]) == 0
        assert pyskick([*pre, "--dataset", objects, "--out", root / "ov_objects"]) == 0
        rew = root / "rew"
        assert pyskick(rew_args(base, root / "ov", rew, epochs=1)) == 0
        rew_trunc = root / "rew_trunc"
        shutil.copytree(rew, rew_trunc)
        truncated_copy(rew / "latest.pt", rew_trunc / "latest.pt")
        (root / "empty").mkdir()
        (root / "afile.txt").write_text("not a folder\n")
        (root / "bad.toml").write_text("no_such_field = 1\n")
        (root / "t1.toml").write_text("T = 1\n")
        (root / "seed.toml").write_text("seed = 99999999999\n")
        (root / "table").mkdir()
        (root / "table" / REPRODUCE_RECORD).write_text("{}\n")
        (root / "export").mkdir()
        (root / "export" / EXPORT_MARKER).write_text("{}\n")
        (root / "export" / "config.json").write_text("{}\n")  # as an export records it
        yield World(
            root=root,
            base=base,
            other=make_builtin("synthetic-scenes", root / "other.h5", 40, 2),
            ov=root / "ov",
            ov2=root / "ov2",
            ov_objects=root / "ov_objects",
            trunc=truncated_copy(root / "ov" / "best.pt", root / "trunc.pt"),
            rew=rew,
            rew_trunc=rew_trunc,
            empty=root / "empty",
            afile=root / "afile.txt",
            bad_toml=root / "bad.toml",
            t1_toml=root / "t1.toml",
            big_seed_toml=root / "seed.toml",
            table=root / "table",
            export=root / "export",
        )


def _leftovers(folder: Path, *others: str) -> Path:
    """``folder`` holding what an interrupted first study call leaves (its lock, a temporary of
    its settings record), and ``others``."""
    folder.mkdir(exist_ok=True)
    (folder / LOCK).write_text("")
    temporary_path(folder / REPRODUCE_RECORD).write_text("{")
    for name in others:
        (folder / name).write_text("mine\n")
    return folder


def rew_args(data: Path, init: Path | None, out: Path, *, epochs: int) -> list[Any]:
    init_args = ["--init", init] if init is not None else []
    return ["train", "--dataset", data, *FAST, *B8, "--epochs", str(epochs), "--sidekick", "rew",
            *init_args, "--out", out]  # fmt: skip


def train(w: World, *args: Any, out: Path | None = None) -> list[Any]:
    """``train`` on base from ov into a new folder, with ``args`` appended."""
    return ["train", "--dataset", w.base, *FAST, *B8, "--epochs", "1", "--init", w.ov,
            "--out", out or w.new, *args]  # fmt: skip


def pretrain(w: World, *args: Any, out: Path | None = None) -> list[Any]:
    return ["pretrain", "--dataset", w.base, *FAST, *B8, "--epochs", "1",
            "--out", out or w.new, *args]  # fmt: skip


def resume_rew(w: World, *args: Any, run: Path | None = None) -> list[Any]:
    """A resume of the rew run (one more epoch), with ``args`` appended."""
    return [*rew_args(w.base, None, run or w.rew, epochs=2), "--resume", *args]


def reproduce(w: World, out: Path) -> list[Any]:
    """A one-seed ltla ``reproduce`` on base into ``out``."""
    return ["reproduce", "--dataset", w.base, *FAST, *B8, "--methods", "ltla", "--seeds", "1",
            "--epochs", "1", "--out", out]  # fmt: skip


def score(w: World, out: Path) -> list[Any]:
    return ["score", "--sidekick", "rew", "--model", w.ov, "--dataset", w.base, "--out", out]


def evaluate_save(w: World, save: Path, *, run: Path | None = None) -> list[Any]:
    return ["evaluate", run or w.ov / "best.pt", "--dataset", w.base, "--save", save]


NO_CUDA = pytest.mark.skipif(torch.cuda.is_available(), reason="needs a machine without CUDA")

Case = tuple[Callable[[World], list[Any]], tuple[Callable[[World], str] | str, ...]]

CASES: dict[str, Case] = {
    # F1: refused before the run folder exists (nothing created, no dataset.json).
    "train batch over the split": (
        lambda w: train(w, "--batch-size", "1000"),
        ("batch_size 1000 exceeds the 32 training viewgrids",),
    ),
    "train --init a folder that is no run": (
        lambda w: [*train(w), "--init", w.empty],
        (lambda w: str(w.empty / "best.pt"), "does not exist"),
    ),
    "train --init a data file": (
        lambda w: [*train(w), "--init", w.base],
        (lambda w: str(w.base), "not a readable pyskick checkpoint"),
    ),
    "train --init another architecture": (
        lambda w: [*train(w), "--init", w.ov_objects],
        (lambda w: str(w.ov_objects), "another architecture or data shape"),
    ),
    "train --init a truncated checkpoint": (
        lambda w: [*train(w), "--init", w.trunc],
        (lambda w: str(w.trunc), "not a readable pyskick checkpoint"),
    ),
    "train --seed overflowing": (
        lambda w: train(w, "--seed", "99999999999999999999"),
        ("--seed", "99999999999999999999", "out of range"),
    ),
    "train --seed negative": (lambda w: train(w, "--seed", "-1"), ("seed", "-1")),
    "train --resume an empty folder": (
        lambda w: train(w, "--resume", out=w.empty),
        (lambda w: str(w.empty), "no run to resume"),
    ),
    "train --resume a missing folder": (
        lambda w: train(w, "--resume"),
        (lambda w: str(w.new), "no run to resume"),
    ),
    "train unknown sidekick option": (
        lambda w: train(w, "--sidekick", "rew", "--sidekick-option", "nms=2"),
        ("sidekick 'rew' has no option 'nms'",),
    ),
    "train unknown critic": (lambda w: train(w, "--critic", "nope"), ("unknown critic 'nope'",)),
    "train config with an unknown key": (
        lambda w: train(w, "--config", w.bad_toml),
        ("no_such_field",),
    ),
    "train --config with a seed out of range": (
        lambda w: train(w, "--config", w.big_seed_toml),
        (lambda w: f"config file {w.big_seed_toml}: seed 99999999999 is out of range",),
    ),
    "reproduce --config with a seed out of range": (
        lambda w: [*reproduce(w, w.new), "--config", w.big_seed_toml],
        (lambda w: f"config file {w.big_seed_toml}: seed 99999999999 is out of range",),
    ),
    "train --config of one glimpse": (
        lambda w: train(w, "--config", w.t1_toml),
        (lambda w: f"config file {w.t1_toml}: T is 1: a policy run needs at least 2",),
    ),
    "reproduce --config of one glimpse": (
        lambda w: [*reproduce(w, w.new), "--config", w.t1_toml],
        (lambda w: f"config file {w.t1_toml}: T is 1: a policy run needs at least 2",),
    ),
    "train --out a file": (lambda w: train(w, out=w.afile), (lambda w: str(w.afile),)),
    "train --out under a file": (
        lambda w: train(w, out=w.afile / "run"),
        (lambda w: str(w.afile), "not a folder"),
    ),
    "pretrain batch over the split": (
        lambda w: pretrain(w, "--batch-size", "1000"),
        ("batch_size 1000 exceeds",),
    ),
    "pretrain --seed overflowing": (
        lambda w: pretrain(w, "--seed", "99999999999999999999"),
        ("--seed", "out of range"),
    ),
    "pretrain --resume an empty folder": (
        lambda w: pretrain(w, "--resume", out=w.empty),
        ("no run to resume",),
    ),
    # F2: a refused resume leaves the run (and its dataset.json) as it was.
    "resume with another --lr": (
        lambda w: resume_rew(w, "--lr", "0.5"),
        ("cannot resume: config field lr is 0.5",),
    ),
    "resume with another --lr and --init": (
        lambda w: resume_rew(w, "--lr", "0.5", "--init", w.ov2),
        ("cannot resume", "--init", lambda w: str(w.ov2)),
    ),
    "resume with another --init": (
        lambda w: resume_rew(w, "--init", w.ov2),
        ("cannot resume: the run started from", lambda w: str(w.ov), "leave --init out"),
    ),
    "resume with another --seed": (
        lambda w: resume_rew(w, "--seed", "5"),
        ("config field seed is 5",),
    ),
    "resume with another sidekick option": (
        lambda w: resume_rew(w, "--sidekick-option", "decay_every=5"),
        ("option decay_every is 5",),
    ),
    "resume with another sidekick": (
        lambda w: [*resume_rew(w), "--sidekick", "demo"],
        ("the run used sidekick 'rew', not 'demo'",),
    ),
    "resume on other data": (
        lambda w: [*resume_rew(w), "--dataset", w.other],
        (lambda w: str(w.other), "has other contents"),
    ),
    "resume a truncated latest.pt": (
        lambda w: resume_rew(w, run=w.rew_trunc),
        (lambda w: str(w.rew_trunc / "latest.pt"), "not a readable pyskick checkpoint"),
    ),
    "resume a train run as pretrain": (
        lambda w: pretrain(w, "--resume", out=w.rew),
        ("cannot resume a 'train' run as a 'pretrain' run",),
    ),
    "resume a pretrain run as train": (
        lambda w: train(w, "--resume", out=w.ov),
        ("cannot resume a 'pretrain' run as a 'train' run",),
    ),
    "start over an existing run": (
        lambda w: train(w, out=w.rew),
        (lambda w: str(w.rew), "already holds a run"),
    ),
    # Another command's folder: the run's files would mix with its own.
    "train into a reproduce folder": (
        lambda w: train(w, out=w.table),
        (lambda w: str(w.table), "is a reproduce folder", "not a run folder"),
    ),
    "pretrain into an export folder": (
        lambda w: pretrain(w, out=w.export),
        (lambda w: str(w.export), "is an export folder, not a run folder"),
    ),
    "reproduce into a run folder": (
        lambda w: reproduce(w, w.rew),
        (lambda w: str(w.rew), "holds a training run, not a reproduce folder"),
    ),
    "demo into a run folder": (
        lambda w: ["demo", "--out", w.rew, "--num", "40", "--seeds", "1", "--epochs", "1"],
        (lambda w: str(w.rew), "holds a training run, not a reproduce folder"),
    ),
    "reproduce into a folder of another call's leftovers": (
        lambda w: reproduce(w, _leftovers(w.root / "leftovers", "notes.txt")),
        (lambda w: str(w.root / "leftovers"), "is not empty (notes.txt) and is no reproduce"),
    ),
    "reproduce into a folder of other files": (
        lambda w: reproduce(w, w.root),
        (lambda w: str(w.root), "is not empty (", "and is no reproduce folder"),
    ),
    "demo into a folder of other files": (
        lambda w: ["demo", "--out", w.root, "--num", "40", "--seeds", "1", "--epochs", "1"],
        (lambda w: str(w.root), "is not empty (", "and is no reproduce folder"),
    ),
    "reproduce into an export folder": (
        lambda w: reproduce(w, w.export),
        (lambda w: str(w.export), "holds an export, not a reproduce folder"),
    ),
    # The smaller items: an output that cannot be written is named before any work.
    "score --out under a file": (
        lambda w: score(w, w.afile / "s.h5"),
        ("--out", lambda w: str(w.afile), "not a folder"),
    ),
    "evaluate --save under a file": (
        lambda w: evaluate_save(w, w.afile / "e.npz"),
        ("--save", lambda w: str(w.afile), "not a folder"),
    ),
    # An output that is one of the command's inputs, even with --overwrite.
    "evaluate --save onto the checkpoint it evaluates": (
        lambda w: [*evaluate_save(w, w.ov / "best.pt"), "--overwrite"],
        ("--save", "is one of this command's inputs"),
    ),
    "evaluate --save onto a record beside the checkpoint it evaluates": (
        lambda w: [*evaluate_save(w, w.ov / "config.json"), "--overwrite"],
        ("--save", "is one of this command's inputs"),
    ),
    "evaluate --save onto its dataset": (
        lambda w: [*evaluate_save(w, w.base), "--overwrite"],
        ("--save", "is one of this command's inputs"),
    ),
    "evaluate --save onto the one-view model of the run it evaluates": (
        lambda w: [*evaluate_save(w, w.ov / "best.pt", run=w.rew), "--overwrite"],
        ("--save", "is one of this command's inputs"),
    ),
    "score --out onto the dataset it scores": (
        lambda w: [*score(w, w.base), "--overwrite"],
        ("--out", "is one of this command's inputs"),
    ),
    "score --out onto the model that scores": (
        lambda w: [*score(w, w.ov / "best.pt"), "--overwrite"],
        ("--out", "is one of this command's inputs"),
    ),
}
CUDA_CASES: dict[str, Case] = {
    "train --device cuda without a GPU": (
        lambda w: [*train(w), "--device", "cuda"],
        ("'cuda' requested but no CUDA device",),
    ),
    "pretrain --device cuda without a GPU": (
        lambda w: [*pretrain(w), "--device", "cuda"],
        ("'cuda' requested but no CUDA device",),
    ),
}


@pytest.fixture
def world_cache(world: World, monkeypatch: pytest.MonkeyPatch) -> None:
    """The world's cache as ``PYSKICK_CACHE_DIR`` for the test: where its runs' cached one-view
    models and scores are."""
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(world.root / "cache"))


def _check(refuse: Any, world: World, case: Case, monkeypatch: pytest.MonkeyPatch) -> None:
    args, needles = case
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(world.root / "cache"))
    resolved = [n(world) if callable(n) else n for n in needles]
    refuse(args(world), 2, *resolved, watch=[world.root])
    assert not world.new.exists()


@pytest.mark.parametrize("name", list(CASES))
def test_refused_before_anything_is_written(
    refuse: Any, world: World, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(refuse, world, CASES[name], monkeypatch)


@NO_CUDA
@pytest.mark.parametrize("name", list(CUDA_CASES))
def test_cuda_without_a_gpu_is_refused_before_anything_is_written(
    refuse: Any, world: World, name: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    _check(refuse, world, CUDA_CASES[name], monkeypatch)


def test_refused_resume_with_another_init_then_resume_matches_an_uninterrupted_run(
    refuse: Any,
    world: World,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    world_cache: None,
) -> None:
    # F2: the refused resume named another one-view model; the rew sidekick of the next
    # resume must still score with the run's own (the checkpoints then match bit for bit).
    full = tmp_path / "full"
    assert pyskick(rew_args(world.base, world.ov, full, epochs=2)) == 0
    cut = tmp_path / "cut"
    shutil.copytree(world.rew, cut)
    capsys.readouterr()
    refuse(resume_rew(world, "--lr", "0.5", "--init", world.ov2, run=cut), 2, watch=[cut])
    assert pyskick(resume_rew(world, run=cut)) == 0
    for name in ("latest.pt", "best.pt"):
        a, b = load_checkpoint(full / name), load_checkpoint(cut / name)
        assert a["epoch"] == b["epoch"] == 1
        for key, tensor in a["model"].items():
            assert torch.equal(tensor, b["model"][key]), (name, key)
        assert a["sidekick"] == b["sidekick"]
    assert json.loads((cut / "dataset.json").read_text())["init"] == str(world.ov.resolve())


@pytest.mark.parametrize("sidekick", ["rew", "none"])
def test_a_run_whose_one_view_folder_moved_resumes_from_it_and_from_no_other(
    refuse: Any,
    world: World,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    sidekick: str,
    world_cache: None,
) -> None:
    # A project folder moved: the run's recorded one-view path is gone. --init at its new
    # place (the same checkpoint bytes) continues the run and records the new place; another
    # model there, or a file that is no model, is refused, with or without a scoring sidekick
    # (ltla's "none" has no scores to tell).
    before, after, run = tmp_path / "before", tmp_path / "after", tmp_path / "run"
    shutil.copytree(world.ov, before)

    def args(epochs: int, *more: Any) -> list[Any]:
        base = rew_args(world.base, None, run, epochs=epochs)
        base[base.index("rew")] = sidekick
        return [*base, *more]

    assert pyskick(args(1, "--init", before)) == 0
    digest = hashlib.sha256((before / "best.pt").read_bytes()).hexdigest()
    assert load_checkpoint(run / "latest.pt")["init_sha256"] == digest
    assert json.loads((run / "dataset.json").read_text())["init_sha256"] == digest
    before.rename(after)
    capsys.readouterr()
    for other in (world.ov2, world.afile):
        refuse(args(2, "--resume", "--init", other), 2, "--init", str(other), watch=[run])
    assert pyskick(args(2, "--resume", "--init", after)) == 0
    state = load_checkpoint(run / "latest.pt")
    assert (state["epoch"], state["init"], state["init_sha256"]) == (1, str(after), digest)
    record = json.loads((run / "dataset.json").read_text())
    assert (record["init"], record["init_sha256"]) == (str(after), digest)
    assert load_policy(run).init == after  # whichever epoch best.pt holds


def test_checkpoints_without_the_digest_take_a_moved_one_view_run_of_their_weights(
    refuse: Any,
    world: World,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    world_cache: None,
) -> None:
    # Checkpoints that predate init_sha256: a copy of the one-view run is taken while the
    # recorded one is still there to compare bytes with; once it is gone, by the run's frozen
    # Sense and Fuse, which another model does not have.
    before, after, run = tmp_path / "before", tmp_path / "after", tmp_path / "run"
    shutil.copytree(world.ov, before)
    assert pyskick(rew_args(world.base, before, run, epochs=1)) == 0
    state = load_checkpoint(run / "latest.pt")
    record = json.loads((run / "dataset.json").read_text())
    for key in ("init_sha256", "init_relative"):
        del state[key], record[key]
    torch.save(state, run / "latest.pt")
    (run / "dataset.json").write_text(json.dumps(record))
    shutil.copytree(before, after)
    copied = tmp_path / "copied"
    shutil.copytree(run, copied)
    assert pyskick(resume_rew(world, "--init", after, run=copied)) == 0
    assert load_checkpoint(copied / "latest.pt")["init"] == str(after)
    shutil.rmtree(before)
    capsys.readouterr()
    refuse(
        resume_rew(world, "--init", world.ov2, run=run),
        2,
        "nothing shows",
        "frozen weights differ",
        "put that one-view run back",
        watch=[run],
    )
    assert pyskick(resume_rew(world, "--init", after, run=run)) == 0
    assert load_checkpoint(run / "latest.pt")["init"] == str(after)


def test_an_ltla_run_goes_on_without_its_one_view_run_and_protects_it_where_it_moved(
    refuse: Any,
    world: World,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    world_cache: None,
) -> None:
    # ltla reads its one-view run only at its start: gone, the run goes on. Moved with the
    # run, it is found there, and evaluate --save refuses to replace it.
    project = tmp_path / "a"
    shutil.copytree(world.ov, project / "ov")
    run = project / "run"
    ltla = ["train", "--dataset", world.base, *FAST, *B8, "--out", run]
    assert pyskick([*ltla, "--epochs", "1", "--init", project / "ov"]) == 0
    project.rename(tmp_path / "b")
    run, moved = tmp_path / "b" / "run", tmp_path / "b" / "ov"
    capsys.readouterr()
    save = [*evaluate_save(world, moved / "best.pt", run=run), "--overwrite"]
    refuse(save, 2, "--save", "is one of this command's inputs", watch=[tmp_path])
    shutil.rmtree(moved)
    ltla[ltla.index("--out") + 1] = run
    assert pyskick([*ltla, "--epochs", "2", "--resume"]) == 0
    state = load_checkpoint(run / "latest.pt")
    assert (state["epoch"], state["init"]) == (1, str(project / "ov"))


def test_a_run_started_without_a_one_view_model_resumes_without_one(
    world: World, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # train() from Python without init (nothing frozen): `train --resume` goes on as it
    # started, without pretraining a cached one-view model for it.
    from pyskick.config import train_preset
    from pyskick.training import TrainData
    from pyskick.training import train as train_run

    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    run = tmp_path / "run"
    config = train_preset("cpu-demo").replace(device="cpu", batch_size=8, epochs=1)
    train_run(config, run, TrainData.from_file(world.base))
    args = ["train", "--dataset", world.base, *FAST, *B8, "--epochs", "2", "--resume"]
    assert pyskick([*args, "--out", run]) == 0
    state = load_checkpoint(run / "latest.pt")
    assert (state["epoch"], state["init"], state["frozen"]) == (1, None, [])
    assert not (tmp_path / "cache").exists()


def test_score_creates_a_missing_output_folder(
    world: World, tmp_path: Path, world_cache: None
) -> None:
    out = tmp_path / "a" / "b" / "scores.h5"
    args = ["score", "--sidekick", "rew", "--model", world.ov, "--dataset", world.base,
            "--preset", "cpu-demo", "--device", "cpu", "--splits", "val", "--out", out]  # fmt: skip
    assert pyskick(args) == 0
    assert out.is_file()
    assert sorted(p.name for p in out.parent.iterdir()) == ["scores.h5"]


# ------------------------------------------------------------------ read-only output folders
def _digests(root: Path) -> dict[str, str]:
    return {
        str(p): "dir" if p.is_dir() else hashlib.sha256(p.read_bytes()).hexdigest()
        for p in [root, *sorted(root.rglob("*"))]
    }


@pytest.fixture(scope="module")
def read_only(world: World, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A folder ``ro`` and a run folder ``ro_run`` nobody may write, with data and a run."""
    root = tmp_path_factory.mktemp("read-only")
    ro, ro_run = root / "ro", root / "ro_run"
    ro.mkdir()
    shutil.copytree(world.ov, ro_run)
    for folder in (ro, ro_run):
        folder.chmod(0o555)
    yield root
    for folder in (ro, ro_run):
        folder.chmod(0o755)


READ_ONLY: dict[str, tuple[Callable[[World, Path], list[Any]], Callable[[Path], Path], str]] = {
    "train --out": (lambda w, r: train(w, out=r / "ro" / "run"), lambda r: r / "ro", "--out"),
    "pretrain --out": (lambda w, r: pretrain(w, out=r / "ro" / "run"), lambda r: r / "ro", "--out"),
    "score --out": (
        lambda w, r: score(w, r / "ro" / "s.h5"),
        lambda r: r / "ro",
        "--out",
    ),
    "evaluate --save": (
        lambda w, r: evaluate_save(w, r / "ro" / "e.npz"),
        lambda r: r / "ro",
        "--save",
    ),
    "reproduce --out": (lambda w, r: reproduce(w, r / "ro" / "t"), lambda r: r / "ro", "--out"),
    "demo --out": (
        lambda w, r: ["demo", "--out", r / "ro" / "d", "--num", "40", "--seeds", "1"],
        lambda r: r / "ro",
        "--out",
    ),
    "evaluate a read-only run folder": (
        lambda w, r: ["evaluate", r / "ro_run", "--dataset", w.base],
        lambda r: r / "ro_run",
        "best.pt",
    ),
}


@pytest.mark.parametrize("name", list(READ_ONLY))
def test_a_read_only_output_folder_is_bad_input_named_before_any_work(
    world: World, read_only: Path, name: str, unprivileged
) -> None:
    # In a subprocess: it cannot write the folder even when the tests run as root.
    args, folder, option = READ_ONLY[name]
    before = _digests(world.root), _digests(read_only)
    env = {**os.environ, "PYSKICK_CACHE_DIR": str(world.root / "cache")}
    done = unprivileged(args(world, read_only), env)
    lines = done.stderr.strip().splitlines()
    assert done.returncode == 2, done.stderr
    assert len(lines) == 1, done.stderr
    assert "Traceback" not in done.stderr
    for needle in (str(folder(read_only)), "permission denied", option):
        assert needle in lines[0]
    assert (_digests(world.root), _digests(read_only)) == before


def test_a_study_folder_left_by_an_interrupted_first_call_is_taken_again(tmp_path: Path) -> None:
    from pyskick.errors import UserError
    from pyskick.experiments.reproduce import check_reproduce_out

    # Killed while writing its settings record, or (the demo) while generating its data into
    # the folder: the rerun goes on.
    folder = _leftovers(tmp_path / "study")
    data = folder / "scenes.h5"
    temporary_path(data).write_bytes(b"half")
    check_reproduce_out(folder, own=[data.name])
    data.write_bytes(b"whole")
    check_reproduce_out(folder, own=[data.name])
    with pytest.raises(UserError, match=r"is not empty \(\.scenes\.h5\.tmp-"):
        check_reproduce_out(folder)  # not the call's own data file


# -------------------------------------------------------------------------- RunDir itself
def test_only_the_runs_own_stale_temporaries_are_removed_when_it_is_locked(
    tmp_path: Path,
) -> None:
    run = RunDir(tmp_path / "run")
    run.path.mkdir()
    # Today's names (.NAME.tmp-HOST-PID-RANDOM.SUFFIX, here of this live process: under the
    # lock no one else writes the run's files) and earlier versions' mkstemp names.
    stale = [
        run.path / ".latest.pt.k3_x9a0q.tmp",
        temporary_path(run.latest),
        run.path / ".metrics.jsonl.abcdefgh.tmp",
    ]
    foreign = [
        run.path / ".notes.txt.abcdefgh.tmp",
        run.path / "latest.pt.tmp",
        run.path / ".latest.pt.tmp-12-0123abcd.json",
        run.path / "x",
    ]
    for path in stale + foreign:
        path.write_text("left by a killed writer")
    assert temporaries(run.latest) == sorted(stale[:2])
    with run.locked():
        assert run.is_locked_here()
        assert sorted(p.name for p in run.path.iterdir()) == sorted(
            [".lock", *(p.name for p in foreign)]
        )
        assert (run.path / ".lock").read_text() == f"{os.getpid()}\n"
        with run.locked():  # re-entrant within a process
            run.write_record("config.json", {"stage": "pretrain"})
        assert run.is_locked_here()
    assert not run.is_locked_here()
    with pytest.raises(RuntimeError, match="without holding its lock"):
        run.write_record("config.json", {"stage": "train"})
    assert run.recorded_stage() == "pretrain"


def test_another_process_holding_the_lock_is_named(tmp_path: Path) -> None:
    run = RunDir(tmp_path / "run")
    code = (
        "import sys, time; from pyskick.run_dir import RunDir; RunDir(sys.argv[1]).acquire(); "
        "print('locked', flush=True); time.sleep(600)"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(run.path)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "locked"
        with pytest.raises(RunLockedError, match=rf"in use by .*\(pid {holder.pid}\)"):
            run.check_free()
        with pytest.raises(RunLockedError) as refused:
            run.acquire()
        assert refused.value.pid == holder.pid
    finally:
        holder.kill()
        holder.wait()
        assert holder.stdout is not None
        holder.stdout.close()
    run.check_free()  # the kernel released the killed holder's lock
    with run.locked():
        assert (run.path / ".lock").read_text() == f"{os.getpid()}\n"


def test_trim_log_keeps_the_checkpointed_steps_and_drops_a_torn_line(tmp_path: Path) -> None:
    log = tmp_path / "metrics.jsonl"
    log.write_text("".join(json.dumps({"step": s, "x": s}) + "\n" for s in range(3)) + '{"st')
    trim_log(log, 1)
    assert [json.loads(line)["step"] for line in log.read_text().splitlines()] == [0, 1]
    trim_log(log, -1)
    assert log.read_text() == ""


# ------------------------------------------------------------- existing output files (F7)
OUTPUT_FILES: dict[str, tuple[Callable[[World, Path], list[Any]], str]] = {
    "score --out": (score, "--out"),
    "evaluate --save": (evaluate_save, "--save"),
}


@pytest.mark.parametrize("name", list(OUTPUT_FILES))
def test_an_existing_output_file_is_kept_unless_overwrite(
    world: World, tmp_path: Path, refuse, name: str, world_cache: None
) -> None:
    make_args, option = OUTPUT_FILES[name]
    out = tmp_path / "existing.bin"
    out.write_text("somebody's file\n")
    refuse(make_args(world, out), 2, option, str(out), "already exists", "--overwrite",
           watch=[tmp_path, world.root])  # fmt: skip
    assert pyskick([*make_args(world, out), "--overwrite"]) == 0
    assert out.read_bytes() != b"somebody's file\n"


@pytest.mark.parametrize("content", ["{not json", "[1, 2]", '{"path": "x.h5"}'])
def test_a_damaged_dataset_record_is_named(
    world: World, tmp_path: Path, refuse, content: str, world_cache: None
) -> None:
    run = tmp_path / "run"
    shutil.copytree(world.rew, run, ignore=shutil.ignore_patterns(".lock"))
    (run / "dataset.json").write_text(content)
    refuse(resume_rew(world, run=run), 2, str(run / "dataset.json"), watch=[run, world.root])
