"""Issue 25, item 1: two starts of one new run folder. The "holds a run" decision is made again
under the folder's lock, so a start that set up while another trained into the folder is
refused instead of resetting it (before, both printed "finished" and the folder held only the
second run).

Set-up stays before the lock, so that a refused command has written nothing (not even the
folder); what the second writer loses is its set-up work, never the first writer's run.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from pyskick.config import train_preset
from pyskick.data.builtin import make_builtin
from pyskick.errors import UserError
from pyskick.files import file_digest
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


def test_a_second_reproduce_in_one_folder_is_refused_before_any_work(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 25, item 6: a second ``reproduce`` retrained one-view inside the first's folder
    before it was refused; the folder is now locked for the whole call."""
    data = make_builtin("synthetic-scenes", tmp_path / "s.h5", 48, 1)
    out = tmp_path / "rep"
    hold = "import sys, time; from pyskick.run_dir import RunDir; RunDir(sys.argv[1]).acquire()"
    holder = subprocess.Popen(
        [sys.executable, "-c", f"{hold}; print('held', flush=True); time.sleep(60)", str(out)],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert holder.stdout is not None
        assert holder.stdout.readline().strip() == "held"
        with pytest.raises(SystemExit) as exited:
            main(["reproduce", "--dataset", str(data), "--preset", "cpu-demo", "--methods",
                  "ltla", "--seeds", "1", "--epochs", "1", "--pretrain-epochs", "1",
                  "--no-report", "--out", str(out)])  # fmt: skip
        assert exited.value.code == 2
        (line,) = capsys.readouterr().err.splitlines()
        assert f"pid {holder.pid}" in line
        assert sorted(p.name for p in out.iterdir()) == [".lock"]
    finally:
        holder.kill()
        holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
