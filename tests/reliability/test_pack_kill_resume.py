"""A pack of runs killed in the middle of committing its checkpoints (SIGKILL of a real
process) resumes with every run at one epoch and ends bit-identical to a pack that ran through
(the two-phase commit of pyskick.training.pack)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch

from pyskick.checkpoint import load_checkpoint

ENTRY = Path(__file__).with_name("pack_entry.py")
RUNS = ("a", "b", "c")
EPOCHS = 3


def _run(out: Path, resume: bool, moment: str = "none", signal_file: Path | None = None):
    args = [sys.executable, str(ENTRY), str(out), str(EPOCHS), "resume" if resume else "new"]
    args += [moment, str(signal_file or out / "unused")]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(args, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)


@pytest.fixture(scope="module")
def through(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("through")
    proc = _run(out, resume=False)
    _, err = proc.communicate(timeout=300)
    assert proc.returncode == 0, err.decode()
    return out


@pytest.mark.parametrize(
    ("moment", "epochs_left"),
    [
        # Epoch 1's commit after 2 of its pending files: every run still at epoch 0 (undone).
        ("pending:1:2", {0}),
        # After 2 of them were renamed into place: runs at epochs 0 and 1 (finished on restart).
        ("renamed:1:2", {0, 1}),
    ],
)
def test_a_pack_killed_mid_commit_resumes_exactly(
    through: Path, tmp_path: Path, moment: str, epochs_left: set[int]
) -> None:
    signal_file = tmp_path / "stopped"
    proc = _run(tmp_path, resume=False, moment=moment, signal_file=signal_file)
    deadline = time.monotonic() + 300
    while not signal_file.exists():
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode}: {proc.stderr.read().decode()}")
        assert time.monotonic() < deadline, f"never reached {moment}"
        time.sleep(0.05)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.stderr is not None
    proc.stderr.close()
    assert list(tmp_path.glob("*/*.next"))  # the commit was left half done
    left = {load_checkpoint(tmp_path / run / "latest.pt")["epoch"] for run in RUNS}
    assert left == epochs_left
    resumed = _run(tmp_path, resume=True)
    _, err = resumed.communicate(timeout=300)
    assert resumed.returncode == 0, err.decode()
    assert not list(tmp_path.glob("*/*.next"))
    for run in RUNS:
        got = load_checkpoint(tmp_path / run / "latest.pt")
        want = load_checkpoint(through / run / "latest.pt")
        assert got["epoch"] == want["epoch"] == EPOCHS - 1
        for key, tensor in want["model"].items():
            assert torch.equal(got["model"][key], tensor), (run, key)
        assert got["history"] == want["history"]
        assert got["optimizer"]["state"].keys() == want["optimizer"]["state"].keys()
