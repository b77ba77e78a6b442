"""The mlflow logger: one MLflow run per pyskick run (and stage), continued when it resumes.

A new pyskick run creates an MLflow run named after the run folder, tagged with the folder and
the stage, with the run's config as parameters (``sidekick_options`` flattened to
``sidekick_options.KEY``). Its id is kept in ``RUN/mlflow.json`` with the tracking store and
stage, so a resumed pyskick run logs its next epochs to the same MLflow run (a longer
``--epochs`` does not rewrite the parameters; MLflow's are write-once). Steps are the 0-based
epochs; a resumed run logs again from the epoch after its checkpoint, and MLflow keeps every
value, the later one last. At the end the MLflow run is marked ``FINISHED`` when the last epoch
was logged, else ``KILLED`` (training failed or was interrupted).
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from pyskick.training.loggers import RunInfo

RECORD = "mlflow.json"
"""The run folder's record of its MLflow run: ``tracking_uri``, ``experiment_id``, ``run_id``,
``stage``."""
DEFAULT_EXPERIMENT = "pyskick"


def flat_params(config: Mapping[str, Any], prefix: str = "") -> dict[str, str]:
    """``config`` as MLflow parameters: nested mappings flattened with dots, values as text."""
    out: dict[str, str] = {}
    for key, value in config.items():
        if isinstance(value, Mapping):
            out.update(flat_params(value, f"{prefix}{key}."))
        else:
            out[f"{prefix}{key}"] = str(value)
    return out


class MlflowLogger:
    """Sends a run's metrics to MLflow (:mod:`pyskick_mlflow.logger`).

    Building it imports MLflow (``ImportError`` without ``mlflow-skinny``) and reads where to
    log: ``MLFLOW_TRACKING_URI`` (MLflow's default without it) and ``MLFLOW_EXPERIMENT_NAME``
    (default ``pyskick``). The store is opened (a new sqlite file created) by :meth:`start`.
    """

    def __init__(self) -> None:
        import mlflow
        from mlflow.entities import Metric, Param
        from mlflow.tracking import MlflowClient

        self._metric, self._param, self._client_class = Metric, Param, MlflowClient
        self.tracking_uri = mlflow.get_tracking_uri()
        self.experiment = os.environ.get("MLFLOW_EXPERIMENT_NAME") or DEFAULT_EXPERIMENT
        self.client: Any = None
        self.run_id: str | None = None
        self._last_step = -1
        self._steps = 0

    def start(self, run: RunInfo) -> None:
        """Create the MLflow run, or continue the one a resumed run recorded."""
        record_path = Path(run.run_dir) / RECORD
        self._steps = run.steps
        self.client = self._client_class(self.tracking_uri)
        record = _read(record_path)
        if (
            run.first_step > 0
            and record.get("tracking_uri") == self.tracking_uri
            and record.get("stage") == run.stage
        ):
            self.run_id = str(record["run_id"])
            self.client.update_run(self.run_id, status="RUNNING")
            return
        experiment = self.client.get_experiment_by_name(self.experiment)
        experiment_id = (
            experiment.experiment_id
            if experiment is not None
            else self.client.create_experiment(self.experiment)
        )
        folder = Path(run.run_dir).resolve()
        created = self.client.create_run(
            experiment_id,
            run_name=folder.name,
            tags={"pyskick.run_dir": str(folder), "pyskick.stage": run.stage},
        )
        self.run_id = created.info.run_id
        params = {"stage": run.stage, **flat_params(run.config)}
        self.client.log_batch(
            self.run_id, params=[self._param(key, value) for key, value in params.items()]
        )
        folder.mkdir(parents=True, exist_ok=True)
        record = {
            "tracking_uri": self.tracking_uri,
            "experiment_id": experiment_id,
            "run_id": self.run_id,
            "stage": run.stage,
        }
        record_path.write_text(json.dumps(record, indent=2) + "\n")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        """One epoch's metrics at ``step`` (NaN is kept: MLflow stores it)."""
        if self.run_id is None:
            raise RuntimeError("the mlflow logger logs before start()")
        stamp = int(time.time() * 1000)
        self.client.log_batch(
            self.run_id,
            metrics=[
                self._metric(key, float(value), stamp, step) for key, value in metrics.items()
            ],
        )
        self._last_step = max(self._last_step, step)

    def close(self) -> None:
        """Mark the MLflow run FINISHED if the run's last epoch was logged, else KILLED."""
        if self.run_id is None:
            return
        done = self._last_step >= self._steps - 1
        self.client.set_terminated(self.run_id, status="FINISHED" if done else "KILLED")
        self.run_id = None


def _read(path: Path) -> dict[str, Any]:
    """The run folder's MLflow record; empty without one, or for one that is not JSON (a run
    then starts a new MLflow run)."""
    try:
        record = json.loads(path.read_text())
    except (OSError, ValueError):
        return {}
    return record if isinstance(record, dict) and "run_id" in record else {}
