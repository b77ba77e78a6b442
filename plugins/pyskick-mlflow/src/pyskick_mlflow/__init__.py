"""pyskick-mlflow: a pyskick logger plugin that sends every run's metrics to MLflow.

``pyskick train --logger mlflow`` (also ``pretrain`` and ``reproduce``) logs the run's config
as MLflow parameters and its per-epoch metrics (``train/...``, ``val/...``, ``perf/...``) to
the tracking store MLflow is set up for: ``MLFLOW_TRACKING_URI`` (a local
``sqlite:///path/mlflow.db`` works offline; without it MLflow's default, ``sqlite:///mlflow.db``
in the working folder), in the experiment ``MLFLOW_EXPERIMENT_NAME`` (default ``pyskick``).

This module only registers the logger: every ``pyskick`` command loads the plugins, so MLflow
is imported when a run asks for the logger.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import pyskick

if TYPE_CHECKING:
    from pyskick.hookspecs import Register
    from pyskick_mlflow.logger import MlflowLogger

__all__ = ["mlflow_logger", "pyskick_register_loggers"]


def mlflow_logger(**_: object) -> MlflowLogger:
    """The run's config and metrics to MLflow (MLFLOW_TRACKING_URI; default sqlite:///mlflow.db)."""
    from pyskick_mlflow.logger import MlflowLogger

    return MlflowLogger()


@pyskick.hookimpl
def pyskick_register_loggers(register: Register) -> None:
    register("mlflow", mlflow_logger)
