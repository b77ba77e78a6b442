"""The test kit (``pyskick.testing``) that pyskick's and plugins' tests use: its fixtures come
through the ``pytest11`` entry point, with no import, and do what they say."""

from __future__ import annotations

import importlib.metadata
from pathlib import Path

import pytest
import torch

from pyskick.data import ViewgridFile


def test_the_kit_is_a_registered_pytest_plugin() -> None:
    (entry,) = [e for e in importlib.metadata.entry_points(group="pytest11") if e.name == "pyskick"]
    assert entry.value == "pyskick.testing"


def test_one_thread_runs_the_test_on_one_thread(one_thread: None) -> None:
    assert torch.get_num_threads() == 1


def test_the_tiny_files_are_real_viewgrid_files(tiny_scenes: Path, tiny_objects: Path) -> None:
    scenes, objects = ViewgridFile(tiny_scenes), ViewgridFile(tiny_objects)
    assert scenes.spec.preset == "sun360"
    assert [scenes.num_samples(s) for s in ("train", "val", "test")] == [32, 4, 4]
    assert objects.spec.preset == "modelnet-hard"
    # Split by object class, as that generator splits them (its --num 40 makes 32 objects).
    assert [objects.num_samples(s) for s in ("train", "val", "test")] == [23, 3, 6]


def test_a_tiny_run_from_the_kits_one_view_through_the_command_line(
    tmp_path: Path, tiny_scenes: Path, tiny_one_view: Path, cli_runner, one_thread: None
) -> None:
    # What docs/plugins.md, "Tests", shows a plugin's test doing with its own --sidekick.
    assert (tiny_one_view / "best.pt").is_file()
    code, _, err = cli_runner(
        "train", "--dataset", tiny_scenes, "--init", tiny_one_view, "--preset", "cpu-demo",
        "--batch-size", "8", "--epochs", "1", "--sidekick", "rew", "--out", tmp_path / "run",
    )  # fmt: skip
    assert code == 0, err
    assert (tmp_path / "run" / "best.pt").is_file()
    code, _, err = cli_runner("train", "--dataset", tmp_path / "missing.h5")
    assert code == 2
    assert err.startswith("Error: ")


def test_run_python_returns_the_process_or_fails_the_test_with_its_stderr(tmp_path: Path) -> None:
    from pyskick.testing import run_python

    assert run_python("-c", "print('ok')", cwd=tmp_path).stdout == "ok\n"
    with pytest.raises(pytest.fail.Exception, match=r"exit 3:\n.*refused"):
        run_python("-c", "import sys; sys.stderr.write('refused'); sys.exit(3)", cwd=tmp_path)
