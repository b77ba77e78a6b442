"""Issue 25, items 2 and 10: a full disk is one line naming the file (exit 1), never a crash,
a library's words or a temporary left behind.

The child processes run under a file-size limit (``RLIMIT_FSIZE``, with ``SIGXFSZ`` ignored, so
that a write past it fails with EFBIG as a full disk fails with ENOSPC): no privileges needed.
Before, ``data make`` printed its line and then died of a segmentation fault in HDF5's
teardown (exit 139), and a checkpoint on a full disk was an "internal error" in torch's words
(``inline_container.cc:672 ... unexpected pos``).
"""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from pyskick.data.builtin import make_builtin

LIMIT = 1 << 20


def _limited() -> None:
    resource.setrlimit(resource.RLIMIT_FSIZE, (LIMIT, LIMIT))
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)


def _pyskick(*args: object) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYSKICK_PROGRESS": "off", "OMP_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-m", "pyskick", *map(str, args)],
        preexec_fn=_limited,
        capture_output=True,
        text=True,
        env=env,
        timeout=240,
        check=False,
    )


def _assert_one_line_naming(result: subprocess.CompletedProcess[str], path: Path) -> None:
    assert result.returncode == 1, result.stderr
    lines = [line for line in result.stderr.splitlines() if line.startswith("Error")]
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("Error: DiskFullError: cannot write"), lines[0]
    assert str(path) in lines[0]
    assert "internal error" not in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.timeout(300)
def test_a_data_file_that_does_not_fit_is_one_line_and_no_crash(tmp_path: Path) -> None:
    out = tmp_path / "big.h5"
    result = _pyskick("data", "make", "synthetic-scenes", "--num", "200", "--out", out)
    _assert_one_line_naming(result, out)
    assert sorted(p.name for p in tmp_path.iterdir()) == []


@pytest.mark.timeout(300)
def test_a_checkpoint_that_does_not_fit_is_one_line_naming_it(tmp_path: Path) -> None:
    data = make_builtin("synthetic-scenes", tmp_path / "s.h5", 48, 1)
    run = tmp_path / "run"
    result = _pyskick(
        "pretrain", "--dataset", data, "--preset", "cpu-demo", "--epochs", "1", "--out", run
    )
    _assert_one_line_naming(result, run / "latest.pt")
    assert not [p for p in run.iterdir() if ".tmp-" in p.name]


@pytest.mark.timeout(300)
def test_an_export_that_does_not_fit_is_one_line_and_leaves_no_folder(tmp_path: Path) -> None:
    data = make_builtin("synthetic-scenes", tmp_path / "s.h5", 48, 1)
    run = tmp_path / "run"
    pretrained = subprocess.run(
        [sys.executable, "-m", "pyskick", "pretrain", "--dataset", str(data), "--preset",
         "cpu-demo", "--epochs", "1", "--out", str(run)],
        capture_output=True, text=True, env={**os.environ, "PYSKICK_PROGRESS": "off"},
        timeout=240, check=False,
    )  # fmt: skip
    assert pretrained.returncode == 0, pretrained.stderr
    assert (run / "best.pt").stat().st_size > LIMIT  # the weights cannot fit under the limit
    out = tmp_path / "exported"
    _assert_one_line_naming(_pyskick("export", run, "--out", out), out)
    assert not out.exists()
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".exported.")]
