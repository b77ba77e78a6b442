"""Bad input that exited 1 ("internal error") exits 2 with one line now (issue 25, item 11):
an evaluation ``.npz`` whose ``per_sample`` is not numbers, and ``PYSKICK_PROGRESS`` (or a
torchrun ``RANK``) set to nonsense. (An export whose ``config.json`` does not fit its weights:
``tests/cli/test_export_cli.py``.)
"""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from pyskick_cli.main import main

from .conftest import Refuse, save_evaluation


def _with_per_sample(good: Path, bad: Path, per_sample: np.ndarray) -> Path:
    with np.load(good, allow_pickle=False) as data:
        arrays = {key: data[key] for key in data.files}
    arrays["per_sample"] = per_sample
    np.savez(bad, **arrays)
    return bad


@pytest.mark.parametrize(
    ("per_sample", "why"),
    [
        (np.array(["0.01", "0.02", "0.03"]), "must be a 1-D array of numbers, got <U4 [3]"),
        (np.array([[0.01, 0.02, 0.03]]), "must be a 1-D array of numbers, got float64 [1, 3]"),
        (np.array([0.01 + 0j, 0.02, 0.03]), "must be a 1-D array of numbers, got complex128 [3]"),
        (np.array([0.01, np.nan, np.inf]), "holds 2 non-finite values (nan or inf)"),
        (np.array([0.01, -0.02, 0.03]), "holds 1 negative errors"),
        (np.array([], dtype=np.float64), "is empty"),
    ],
)
def test_an_evaluation_file_whose_errors_are_not_numbers_is_refused(
    refuse: Refuse, tmp_path: Path, per_sample: np.ndarray, why: str
) -> None:
    good = save_evaluation(tmp_path / "a.npz", [0.01, 0.02, 0.03])
    bad = _with_per_sample(good, tmp_path / "b.npz", per_sample)
    refuse(
        ["compare", good, bad],
        2,
        f"{bad} is not an evaluation file: per_sample {why}",
        watch=[tmp_path],
    )


@pytest.mark.parametrize(
    ("variable", "value", "needle"),
    [
        (
            "PYSKICK_PROGRESS",
            "nonsense",
            "PYSKICK_PROGRESS='nonsense': expected one of bars, lines, off",
        ),
        ("RANK", "first", "RANK='first': expected an integer"),
    ],
)
def test_a_nonsense_environment_variable_exits_2(
    refuse: Refuse,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    value: str,
    needle: str,
) -> None:
    monkeypatch.setenv(variable, value)
    out = tmp_path / "s.h5"
    refuse(
        ["data", "make", "synthetic-scenes", "--num", "5", "--out", out],
        2,
        needle,
        watch=[tmp_path],
    )


@pytest.mark.parametrize(
    ("variable", "args"),
    [
        ("PYSKICK_DATA_DIR", ["data", "info", "synthetic-objects"]),
        (
            "PYSKICK_CACHE_DIR",
            ["train", "--dataset", "synthetic-scenes", "--preset", "cpu-demo", "--out", "run"],
        ),
    ],
)
def test_a_cache_variable_naming_a_file_exits_2(
    refuse: Refuse,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    variable: str,
    args: list[str],
) -> None:
    # Was exit 1 with a bare FileExistsError or NotADirectoryError that named no variable.
    plain = tmp_path / "plainfile"
    plain.write_text("not a folder\n")
    monkeypatch.setenv("PYSKICK_DATA_DIR", str(tmp_path / "datasets"))
    monkeypatch.setenv(variable, str(plain))
    monkeypatch.chdir(tmp_path)
    refuse(args, 2, f"{variable}='{plain}' is not a folder", watch=[tmp_path])


def test_a_cache_variable_under_a_file_exits_2_and_help_and_info_still_answer(
    refuse: Refuse, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    plain = tmp_path / "plainfile"
    plain.write_text("not a folder\n")
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(plain / "sub"))
    refuse(["data", "list"], 2, f"PYSKICK_CACHE_DIR='{plain / 'sub'}' is not a folder")
    for args in (["info"], ["train", "--help"]):
        with pytest.raises(SystemExit) as exited:
            main(args)
        assert exited.value.code == 0


def test_a_dataset_that_is_no_regular_file_or_empty_is_named_so(
    refuse: Refuse, tmp_path: Path
) -> None:
    # Both were called a missing file ("does not exist"; "dataset . is a folder").
    fifo = tmp_path / "pipe.h5"
    os.mkfifo(fifo)  # not watched: reading it would wait for a writer
    refuse(["data", "info", fifo], 2, f"dataset {fifo} is not a regular file")
    refuse(["data", "info", ""], 2, "the dataset is empty")
