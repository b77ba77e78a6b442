"""Issue 24, item 5: one command opens its dataset once and hashes it once. ``train`` opened
the HDF5 file 3 times and hashed it up to 3 times (the resume check, the one-view cache key,
``dataset.json``); the opened :class:`~pyskick.data.ViewgridFile` now travels down as the
command's reference to its dataset and keeps its digest."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pyskick import run_dir
from pyskick.data import ViewgridFile, hdf5_read
from pyskick.distributed import resolve_device


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of the dataset file's openings and hashings (by file name)."""
    counts: Counter[str] = Counter()
    opened, hashed = ViewgridFile.__init__, hdf5_read.file_digest

    def opening(self: ViewgridFile, path: Any) -> None:
        counts[f"open {Path(path).name}"] += 1
        opened(self, path)

    def hashing(path: Any) -> str:
        counts[f"hash {Path(path).name}"] += 1
        return hashed(path)

    monkeypatch.setattr(ViewgridFile, "__init__", opening)
    monkeypatch.setattr(hdf5_read, "file_digest", hashing)
    monkeypatch.setattr(run_dir, "file_digest", hashing)
    return counts


def test_train_opens_and_hashes_its_dataset_once(
    tmp_path: Path,
    tiny_scenes: Path,
    cli_runner: Any,
    counted: Counter[str],
    monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))  # the one-view cache: cold
    name = tiny_scenes.name
    args = ["--dataset", tiny_scenes, "--preset", "cpu-demo", "--batch-size", "8",
            "--out", tmp_path / "run"]  # fmt: skip
    # A cold one-view cache: keyed by the digest, pretrained, recorded; then the run recorded.
    code, _, err = cli_runner("train", *args, "--epochs", "1")
    assert code == 0, err
    assert counted == {f"open {name}": 1, f"hash {name}": 1}
    # cpu-demo's device is "auto" (issue 26); config.json records what it resolved to.
    config = json.loads((tmp_path / "run" / "config.json").read_text())
    assert (config["device"], config["device_used"]) == ("auto", str(resolve_device("auto")))
    counted.clear()
    # A resume: the record is checked against the file, then the run recorded again.
    code, _, err = cli_runner("train", *args, "--epochs", "2", "--resume")
    assert code == 0, err
    assert counted == {f"open {name}": 1, f"hash {name}": 1}
