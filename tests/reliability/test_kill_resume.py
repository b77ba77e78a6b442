"""SIGKILL at several moments of a real ``pyskick pretrain`` process, then ``--resume``.

Each case ends bit-identical to an uninterrupted run (``torch.equal`` on every tensor of
``latest.pt`` and ``best.pt``), with no temporary file left and a log without duplicate or
abandoned epochs. A run folder has one writer at a time: a second ``pyskick`` is refused with
the holder's pid, and the lock of a killed process does not block.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

from pyskick.checkpoint import load_checkpoint
from pyskick.data.builtin import make_builtin
from pyskick.training.loggers import read_metrics
from pyskick_cli.main import main

ENTRY = Path(__file__).with_name("kill_entry.py")
EPOCHS = 3
ARGS = ["pretrain", "--preset", "cpu-demo", "--batch-size", "8", "--device", "cpu"]
RUN_FILES = {".lock", "config.json", "dataset.json", "latest.pt", "best.pt", "metrics.jsonl"}


@pytest.fixture(autouse=True)
def _one_thread(one_thread: None) -> None:
    """On one thread, as the killed processes are (``one_thread``, pyskick.testing)."""


@pytest.fixture(scope="module")
def scenes(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return make_builtin("synthetic-scenes", tmp_path_factory.mktemp("data") / "s.h5", 40, 1)


def pyskick(args: list[Any]) -> int:
    """``pyskick ARGS`` in this process -> exit code."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    return int(exc.value.code or 0)


@pytest.fixture(scope="module")
def uninterrupted(scenes: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    run = tmp_path_factory.mktemp("full") / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        assert pyskick([*ARGS, "--dataset", scenes, "--epochs", EPOCHS, "--out", run]) == 0
    finally:
        torch.set_num_threads(threads)
    return run


def start_and_stop(moment: str, args: list[Any], tmp_path: Path) -> subprocess.Popen[bytes]:
    """Start ``pyskick ARGS`` in a subprocess and wait until it stops at ``moment``."""
    signal_file = tmp_path / f"stopped-{moment.replace(':', '-')}"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.Popen(
        [sys.executable, str(ENTRY), moment, str(signal_file), *map(str, args)],
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 240
    while not signal_file.exists():
        if proc.poll() is not None:
            raise AssertionError(f"exited {proc.returncode} before {moment}: {proc.stderr.read()}")
        assert time.monotonic() < deadline, f"never reached {moment}"
        time.sleep(0.05)
    assert int(signal_file.read_text()) == proc.pid
    return proc


def kill(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    assert proc.returncode == -signal.SIGKILL
    assert proc.stderr is not None
    proc.stderr.close()


def assert_same_run(run: Path, reference: Path) -> None:
    """Bit-identical checkpoints, the same log, nothing else in the folder."""
    assert {p.name for p in run.iterdir()} == RUN_FILES
    for name in ("latest.pt", "best.pt"):
        got, want = load_checkpoint(run / name), load_checkpoint(reference / name)
        assert got["epoch"] == want["epoch"]
        assert got["model"].keys() == want["model"].keys()
        for key, tensor in want["model"].items():
            assert torch.equal(got["model"][key], tensor), (name, key)
        assert got["history"] == want["history"]
        assert got["best_val"] == want["best_val"]

    def strip(path: Path) -> list[dict[str, Any]]:
        return [
            {k: v for k, v in r.items() if not k.startswith(("time", "perf/"))}
            for r in read_metrics(path)
        ]

    log = strip(run / "metrics.jsonl")
    assert [r["step"] for r in log] == list(range(EPOCHS))  # no duplicate, none abandoned
    assert log == strip(reference / "metrics.jsonl")


@pytest.mark.parametrize(
    ("moment", "left_behind", "again"),
    [
        # Before the first checkpoint: nothing logged yet / epoch 0 logged (F9); started again
        # with --resume or without, the abandoned epoch 0 is not logged twice.
        ("start:0", set(), "--resume"),
        ("logged:0", set(), "--resume"),
        ("logged:0", set(), None),
        # Mid-write of the first checkpoint, and of a later one (F8: its temporary is removed).
        ("writing:0", {".latest.pt.tmp-*"}, "--resume"),
        ("writing:1", {"latest.pt", "best.pt", ".latest.pt.tmp-*"}, "--resume"),
        # Between epochs.
        ("start:2", {"latest.pt", "best.pt"}, "--resume"),
    ],
)
def test_killed_run_resumes_to_the_uninterrupted_result(
    scenes: Path,
    uninterrupted: Path,
    tmp_path: Path,
    moment: str,
    left_behind: set[str],
    again: str | None,
) -> None:
    run = tmp_path / "run"
    args = [*ARGS, "--dataset", scenes, "--epochs", EPOCHS, "--out", run]
    kill(start_and_stop(moment, args, tmp_path))
    left = {p.name for p in run.iterdir()}
    temporaries = {name for name in left if name.startswith(".latest.pt.tmp-")}
    assert len(temporaries) == (1 if moment.startswith("writing") else 0), left
    seen = (left - temporaries) | ({".latest.pt.tmp-*"} if temporaries else set())
    assert seen == {".lock", "config.json", "dataset.json", "metrics.jsonl"} | left_behind
    assert pyskick([*args, *([again] if again else [])]) == 0
    assert_same_run(run, uninterrupted)


def test_a_second_writer_is_refused_and_a_killed_writer_does_not_block(
    scenes: Path,
    uninterrupted: Path,
    tmp_path: Path,
    refuse: Any,
) -> None:
    run = tmp_path / "run"
    args = [*ARGS, "--dataset", scenes, "--epochs", EPOCHS, "--out", run]
    first = start_and_stop("start:1", args, tmp_path)
    try:
        holder = f"pid {first.pid}"
        # Another run in the same folder, or a resume of it, while the first one trains.
        refuse(args, 2, str(run), "in use", holder, watch=[run])
        refuse([*args, "--resume"], 2, str(run), "in use", holder, watch=[run])
        # The lock file names the holder.
        assert (run / ".lock").read_text().strip() == str(first.pid)
    finally:
        kill(first)
    # The kernel released the killed process's lock: the run resumes and ends as if whole.
    assert pyskick([*args, "--resume"]) == 0
    assert_same_run(run, uninterrupted)
