"""The mlflow logger, offline: a local sqlite tracking store, real pyskick runs, the metrics
read back with MLflow's own client."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pyskick.data.builtin import make_builtin
from pyskick.training.loggers import RunInfo, make_loggers, read_metrics

# MLflow's sqlite store maps its tables with a loader strategy SQLAlchemy 2.1 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:The ``noload`` loader strategy:DeprecationWarning")


@pytest.fixture(scope="session")
def tracking_uri(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A local sqlite tracking store shared by the tests (creating one runs MLflow's schema
    migrations: seconds), each test in an experiment of its own."""
    from mlflow.tracking import MlflowClient

    uri = f"sqlite:///{tmp_path_factory.mktemp('mlflow') / 'mlruns.db'}"
    MlflowClient(uri).search_experiments()  # creates the tables
    return uri


@pytest.fixture
def store(tracking_uri: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shared store, with this test's experiment (named after its tmp_path) selected."""
    monkeypatch.setenv("MLFLOW_TRACKING_URI", tracking_uri)
    monkeypatch.setenv("MLFLOW_EXPERIMENT_NAME", tmp_path.name)
    return tracking_uri


def _runs(uri: str) -> list:
    from mlflow.tracking import MlflowClient

    client = MlflowClient(uri)
    experiment = client.get_experiment_by_name(os.environ["MLFLOW_EXPERIMENT_NAME"])
    return [] if experiment is None else client.search_runs([experiment.experiment_id])


def _history(uri: str, run_id: str, key: str) -> list[tuple[int, float]]:
    from mlflow.tracking import MlflowClient

    return [(m.step, m.value) for m in MlflowClient(uri).get_metric_history(run_id, key)]


def test_logger_creates_then_continues_one_mlflow_run(store: str, tmp_path: Path) -> None:
    run_dir = tmp_path / "run"
    config = {"T": 4, "lr": 1e-4, "sidekick": "rew", "sidekick_options": {"k": 2}}
    logger = make_loggers(["mlflow"])
    assert logger.names == ["jsonl", "mlflow"]
    logger.start(RunInfo(run_dir, "train", config, first_step=0, steps=3))
    logger.log(0, {"val/rec_error": 0.5, "train/rec_error": float("nan")})
    logger.log(1, {"val/rec_error": 0.4})
    logger.close()  # interrupted: the last of 3 epochs was not logged
    (run,) = _runs(store)
    assert run.info.status == "KILLED"
    assert run.info.run_name == "run"
    assert run.data.tags["pyskick.run_dir"] == str(run_dir.resolve())
    assert run.data.params == {
        "stage": "train", "T": "4", "lr": "0.0001", "sidekick": "rew", "sidekick_options.k": "2",
    }  # fmt: skip
    # Resumed after epoch 0 (its checkpoint), with more epochs: the same MLflow run goes on.
    resumed = make_loggers(["mlflow"])
    resumed.start(RunInfo(run_dir, "train", {**config, "epochs": 9}, first_step=1, steps=3))
    resumed.log(1, {"val/rec_error": 0.3})
    resumed.log(2, {"val/rec_error": 0.2})
    resumed.close()
    (run,) = _runs(store)
    assert run.info.status == "FINISHED"
    assert "epochs" not in run.data.params  # parameters are the run's first
    history = _history(store, run.info.run_id, "val/rec_error")
    assert sorted(history) == [(0, 0.5), (1, 0.3), (1, 0.4), (2, 0.2)]
    assert run.data.metrics["val/rec_error"] == 0.2
    # metrics.jsonl holds what the checkpoints cover, the stale epoch-1 record dropped.
    assert [(r["step"], r["val/rec_error"]) for r in read_metrics(run_dir / "metrics.jsonl")] == [
        (0, 0.5),
        (1, 0.3),
        (2, 0.2),
    ]
    # A run that starts again from scratch in the folder gets a new MLflow run.
    again = make_loggers(["mlflow"])
    again.start(RunInfo(run_dir, "train", config, first_step=0, steps=1))
    again.close()
    assert len(_runs(store)) == 2


def _cli(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    """``pyskick ARGS`` in this process (torch and MLflow are imported once); exit code and
    stderr."""
    from pyskick_cli.main import main

    with pytest.raises(SystemExit) as exc:
        main(list(args))
    return int(exc.value.code or 0), capsys.readouterr().err


def test_pretrain_logs_to_mlflow_and_resume_keeps_the_logger(
    store: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = make_builtin("synthetic-scenes", tmp_path / "s.h5", 20, 1)
    run_dir = tmp_path / "one-view"
    args = ["pretrain", "--dataset", str(data), "--preset", "cpu-demo", "--batch-size", "8"]
    args += ["--device", "cpu", "--out", str(run_dir)]
    code, err = _cli(capsys, *args, "--epochs", "1", "--logger", "mlflow")
    assert code == 0, err
    assert json.loads((run_dir / "config.json").read_text())["loggers"] == ["jsonl", "mlflow"]
    # --resume without --logger continues with the loggers the run recorded.
    code, err = _cli(capsys, *args, "--epochs", "2", "--resume")
    assert code == 0, err
    (run,) = _runs(store)
    assert run.info.status == "FINISHED"
    assert run.data.params["stage"] == "pretrain"
    logged = read_metrics(run_dir / "metrics.jsonl")
    history = _history(store, run.info.run_id, "val/rec_error")
    assert history == [(r["step"], r["val/rec_error"]) for r in logged]
    assert [step for step, _ in history] == [0, 1]
    assert set(run.data.metrics) == {k for k in logged[-1] if k not in ("step", "time")}


def test_unknown_logger_is_refused_before_anything_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "run"
    code, err = _cli(capsys, "pretrain", "--dataset", str(tmp_path / "none.h5"), "--out", str(out),
                     "--logger", "mlflw")  # fmt: skip
    assert code == 2
    assert "--logger" in err
    assert "unknown logger 'mlflw'; valid names: jsonl, mlflow, tensorboard" in err
    assert not out.exists()
