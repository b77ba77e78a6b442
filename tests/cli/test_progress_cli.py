"""What `pyskick train` shows while it runs, when stderr is not a terminal (a pipe, as under
nohup, Slurm or `| tee`): one line per epoch with its metrics and the elapsed time."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

from pyskick.data.builtin import make_builtin
from pyskick.training.loggers import read_metrics

EPOCH_LINE = re.compile(
    r"^(?P<stage>pretrain|train): epoch (?P<k>\d+)/(?P<n>\d+) \| "
    r"train_error (?P<train>[\d.e-]+), val_error (?P<val>[\d.e-]+), loss [\d.e-]+ \| "
    r"elapsed \d\d:\d\d, left \d\d:\d\d \([\d.]+ (s/epoch|epoch/s)\)$"  # the rate, slow or fast
)


def test_train_prints_one_line_per_epoch_to_a_pipe(tmp_path: Path) -> None:
    data = make_builtin("synthetic-scenes", tmp_path / "s.h5", 12, 2)
    (tmp_path / "c.toml").write_text("pretrain_epochs = 1\n")
    env = {key: value for key, value in os.environ.items() if key != "PYSKICK_PROGRESS"}
    env["PYSKICK_CACHE_DIR"] = str(tmp_path / "cache")
    run = tmp_path / "run"
    proc = subprocess.run(
        [
            sys.executable, "-m", "pyskick_cli", "train", "--dataset", str(data),
            "--preset", "cpu-demo", "--config", str(tmp_path / "c.toml"), "--epochs", "2",
            "--batch-size", "8", "-T", "2", "--device", "cpu", "--out", str(run),
        ],
        capture_output=True, text=True, timeout=600, env=env,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ""
    assert "\r" not in proc.stderr  # no bars redrawn in place
    assert "\x1b" not in proc.stderr
    lines = proc.stderr.splitlines()
    epochs = [m for m in map(EPOCH_LINE.match, lines) if m]
    assert [(m["stage"], m["k"], m["n"]) for m in epochs] == [
        ("pretrain", "1", "1"),
        ("train", "1", "2"),
        ("train", "2", "2"),
    ]
    # The line's metrics are the epoch's logged ones.
    records = read_metrics(run / "metrics.jsonl")
    for match, record in zip(epochs[1:], records, strict=True):
        assert float(match["val"]) == float(f"{record['val/rec_error']:.4g}")
        assert float(match["train"]) == float(f"{record['train/rec_error']:.4g}")
    # Everything else on stderr: what the one-view cache did, the summary.
    others = [line for line in lines if not EPOCH_LINE.match(line)]
    assert others[0].startswith("pretraining one-view model ")
    assert others[-1].startswith("train finished: 2 epochs, best val error")
    assert len(others) == 2, proc.stderr
