"""Issue 25, item 1: two starts of one run folder. The lock is taken before any check or work
and held to the end, so a second start is refused at once with the first's pid (before, both
printed "finished" and the folder held only the second run); a refusal under the lock leaves the
disk as it was. For a Python caller that ran ``setup()`` unlocked, whether the folder holds a
run is decided again under the lock.
"""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import torch

from pyskick.checkpoint import load_checkpoint
from pyskick.config import TrainConfig, train_preset
from pyskick.data.builtin import make_builtin
from pyskick.errors import UserError
from pyskick.files import file_digest
from pyskick.run_dir import RunDir
from pyskick.sidekicks import NoSidekick
from pyskick.training import TrainData
from pyskick.training.trainer import Trainer, pretrain
from pyskick_cli.main import main


def _grids(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (n, 2, 3, 1, 16, 16), generator=generator, dtype=torch.uint8)


def test_a_start_that_set_up_while_another_trained_is_refused(tmp_path: Path) -> None:
    data = TrainData(_grids(8, 1), _grids(4, 2), (120.0,))
    config = train_preset("cpu-demo").replace(pretrain_epochs=1, batch_size=4)
    run = tmp_path / "run"
    late = Trainer(config.replace(seed=1), run, data, stage="pretrain").setup()
    pretrain(config.replace(seed=2), run, data)  # the other start, which finished first
    finished = file_digest(run / "latest.pt")
    with pytest.raises(UserError, match="holds a run now") as refused:
        late.fit()
    assert "\n" not in str(refused.value)
    assert file_digest(run / "latest.pt") == finished
    assert (run / "metrics.jsonl").read_text().count("\n") == 1


_PYSKICK = "from pyskick_cli.main import main; main()"


@pytest.fixture
def hold() -> Iterator[Callable[[Path], subprocess.Popen[str]]]:
    """``hold(folder)``: another process that locks ``folder`` (as a writer does) and waits."""
    holders: list[subprocess.Popen[str]] = []
    code = "import sys, time; from pyskick.run_dir import RunDir; RunDir(sys.argv[1]).acquire()"

    def start(folder: Path) -> subprocess.Popen[str]:
        holder = subprocess.Popen(
            [sys.executable, "-c", f"{code}; print('held', flush=True); time.sleep(60)", folder],
            stdout=subprocess.PIPE,
            text=True,
        )
        holders.append(holder)
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        return holder

    yield start
    for holder in holders:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()


def test_a_start_during_another_ones_set_up_is_refused(
    tmp_path: Path,
    tiny_scenes: Path,
    cli_runner: Callable[..., tuple[int, str, str]],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The issue's repro: ``train --seed 1`` and ``train --seed 2 --sidekick rew`` on one new
    folder, the second started while the first still set up (here: pretrained its one-view
    model into a cold cache). Both used to finish, and the folder held only the second run; the
    first start now holds the lock from its first step, so the second is refused at once."""
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cold"))
    monkeypatch.setenv("PYSKICK_PROGRESS", "lines")
    run = tmp_path / "run"
    common = ["--dataset", str(tiny_scenes), "--preset", "cpu-demo", "--epochs", "1",
              "--batch-size", "8", "--out", str(run)]  # fmt: skip
    first = subprocess.Popen(
        [sys.executable, "-c", _PYSKICK, "train", *common, "--seed", "1"],
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert first.stderr is not None
        assert first.stderr.readline()  # its first progress line: it is at work
        code, _, err = cli_runner("train", *common, "--seed", "2", "--sidekick", "rew")
        assert code == 2
        (line,) = err.splitlines()
        assert f"pid {first.pid}" in line
        assert first.wait(timeout=600) == 0
    finally:
        first.kill()
        first.wait()
        if first.stderr is not None:
            first.stderr.close()
    assert load_checkpoint(run / "latest.pt")["config"]["seed"] == 1


def test_a_refusal_under_the_lock_leaves_the_disk_as_it_was(
    tmp_path: Path, cli_runner: Callable[..., tuple[int, str, str]]
) -> None:
    """The lock creates the folder (and its parents); a refusal decided under it removes what
    it created, and gives an existing lock file back its pid and times."""
    missing = tmp_path / "nope.h5"
    nested = tmp_path / "a" / "b" / "run"
    code, _, err = cli_runner("pretrain", "--dataset", missing, "--out", nested)
    assert code == 2, err
    assert "nope.h5" in err
    assert not (tmp_path / "a").exists()
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("kept")
    code, _, _ = cli_runner("pretrain", "--dataset", missing, "--out", mine)
    assert code == 2
    assert sorted(p.name for p in mine.iterdir()) == ["notes.txt"]
    (mine / ".lock").write_text("12345\n")
    before = (mine / ".lock").stat().st_mtime_ns
    code, _, _ = cli_runner("train", "--dataset", missing, "--out", mine)
    assert code == 2
    assert (mine / ".lock").read_text() == "12345\n"
    assert (mine / ".lock").stat().st_mtime_ns == before


class _Watcher(NoSidekick):
    """Records whether the run folder was locked while it was prepared, then stops set-up."""

    def __init__(self, run: Path) -> None:
        self.run = run
        self.locked: bool | None = None

    def prepare(self, grids: torch.Tensor, *, T: int, device: torch.device) -> None:
        self.locked = RunDir(self.run).is_locked_here()
        raise KeyboardInterrupt  # as if interrupted while scoring


def test_fit_holds_the_lock_while_it_sets_up(
    tmp_path: Path, tiny_scenes: Path, tiny_one_view: Path, tiny_config: TrainConfig
) -> None:
    """From Python too: ``fit()`` locks before set-up (the sidekick's scoring is set-up work);
    interrupted there, it leaves no folder behind."""
    run = tmp_path / "run"
    watcher = _Watcher(run)
    data = TrainData.from_file(tiny_scenes)
    trainer = Trainer(tiny_config, run, data, stage="train", init=tiny_one_view, sidekick=watcher)
    with pytest.raises(KeyboardInterrupt):
        trainer.fit()
    assert watcher.locked is True
    assert not run.exists()


def test_a_second_reproduce_in_one_folder_is_refused_before_any_work(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    hold: Callable[[Path], subprocess.Popen[str]],
) -> None:
    """Issue 25, item 6: a second ``reproduce`` retrained one-view inside the first's folder
    before it was refused; the folder is now locked for the whole call."""
    data = make_builtin("synthetic-scenes", tmp_path / "s.h5", 48, 1)
    out = tmp_path / "rep"
    holder = hold(out)
    with pytest.raises(SystemExit) as exited:
        main(["reproduce", "--dataset", str(data), "--preset", "cpu-demo", "--methods",
              "ltla", "--seeds", "1", "--epochs", "1", "--pretrain-epochs", "1",
              "--no-report", "--out", str(out)])  # fmt: skip
    assert exited.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"pid {holder.pid}" in line
    assert sorted(p.name for p in out.iterdir()) == [".lock"]
