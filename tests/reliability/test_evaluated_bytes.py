"""An evaluation records the model it evaluated (issue 25, item 4).

``evaluate RUN`` digested ``best.pt`` *after* evaluating: a run still training could replace it
meanwhile, and the record paired the old model's errors with the new file's digest (``compare``
accepted it, ``export``'s model card printed another model's error). The checkpoint is now read
once and the digest is of those bytes.
"""

from __future__ import annotations

import importlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from pyskick.data.builtin import make_builtin
from pyskick.files import file_digest
from pyskick_cli.main import main

# The module (the package re-exports its function ``evaluate`` under the same name).
evaluate_module = importlib.import_module("pyskick.evaluation.evaluate")
FAST = ["--preset", "cpu-demo", "--epochs", "1", "--batch-size", "8", "--device", "cpu"]


def call(args: list[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(args)
    assert not exc.value.code, args


@pytest.fixture(scope="module")
def two_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    root = tmp_path_factory.mktemp("models")
    scenes = make_builtin("synthetic-scenes", root / "s.h5", 40, 1)
    one, ltla = root / "one", root / "ltla"
    call(["pretrain", "--dataset", str(scenes), *FAST, "--out", str(one)])
    call(["train", "--dataset", str(scenes), *FAST, "--init", str(one), "--out", str(ltla)])
    return {"one": one, "ltla": ltla}


def test_a_best_pt_replaced_during_evaluation_is_not_credited(
    two_models: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys
) -> None:
    run = tmp_path / "run"
    shutil.copytree(two_models["ltla"], run)
    evaluated = file_digest(run / "best.pt")
    real = evaluate_module.evaluate_policy

    def training_meanwhile(*args, **kwargs):
        # The run's trainer writes a new best.pt while the episodes run.
        shutil.copyfile(two_models["one"] / "best.pt", run / "best.pt")
        return real(*args, **kwargs)

    monkeypatch.setattr(evaluate_module, "evaluate_policy", training_meanwhile)
    with pytest.raises(SystemExit) as exc:
        main(["evaluate", str(run), "--metric", "avg", "--json"])
    assert not exc.value.code, capsys.readouterr().err
    assert file_digest(run / "best.pt") != evaluated  # it was replaced
    (record,) = (run / "eval").glob("*.npz")
    assert str(np.load(record)["checkpoint_sha256"]) == evaluated
    report = json.loads(capsys.readouterr().out)
    assert report["metric"] == "avg"
