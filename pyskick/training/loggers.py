"""Metric loggers: ``metrics.jsonl`` always, TensorBoard when installed.

Keys are namespaced (``train/...``, ``val/...``, ``perf/...``, ``sidekick/...``). Only rank 0
writes; other ranks get a :class:`NullLogger`.
"""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any, Protocol

from pyskick.run_dir import trim_log


class Logger(Protocol):
    """Something that records a dict of scalar metrics at a step."""

    def write(self, metrics: dict[str, float], step: int) -> None: ...

    def close(self) -> None: ...


class NullLogger:
    """Discards everything (non-zero ranks)."""

    def write(self, metrics: dict[str, float], step: int) -> None:
        pass

    def close(self) -> None:
        pass


class JsonlLogger:
    """Appends one JSON object per ``write`` to ``metrics.jsonl``: ``{"step", "time", **metrics}``.

    With ``keep_until_step`` the file is first cut (atomically) to the records of steps
    ``<= keep_until_step``, so that the log holds exactly the epochs a checkpoint covers: a
    resumed run's log then matches an uninterrupted one's, and ``-1`` (a run starting from
    scratch) drops every record of an abandoned attempt.
    """

    def __init__(self, path: str | os.PathLike[str], *, keep_until_step: int | None = None) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if keep_until_step is not None:
            trim_log(self.path, keep_until_step)
        self._handle = self.path.open("a")

    def write(self, metrics: dict[str, float], step: int) -> None:
        record: dict[str, Any] = {"step": step, "time": time.time()}
        for key, value in metrics.items():
            value = float(value)
            record[key] = value if math.isfinite(value) else None
        self._handle.write(json.dumps(record) + "\n")
        self._handle.flush()

    def close(self) -> None:
        self._handle.close()


class TensorBoardLogger:
    """Scalars to TensorBoard (``torch.utils.tensorboard``; needs the ``tensorboard`` package)."""

    def __init__(self, log_dir: str | os.PathLike[str], *, purge_step: int | None = None) -> None:
        from torch.utils.tensorboard import SummaryWriter

        # purge_step hides the events of steps >= it that an interrupted attempt wrote.
        self._writer = SummaryWriter(log_dir=str(log_dir), purge_step=purge_step)

    def write(self, metrics: dict[str, float], step: int) -> None:
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, step)
        self._writer.flush()

    def close(self) -> None:
        self._writer.close()


class Dispatcher:
    """Fans every record out to several loggers."""

    def __init__(self, loggers: list[Logger]) -> None:
        self.loggers = loggers

    def write(self, metrics: dict[str, float], step: int) -> None:
        for logger in self.loggers:
            logger.write(metrics, step)

    def close(self) -> None:
        for logger in self.loggers:
            logger.close()


def tensorboard_available() -> bool:
    """True when the ``tensorboard`` package can be imported."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def make_logger(
    run_dir: str | os.PathLike[str], *, rank: int = 0, keep_until_step: int | None = None
) -> Logger:
    """The run's logger: JSONL (+ TensorBoard when installed) on rank 0, nothing elsewhere.

    ``keep_until_step``: the last step the run's checkpoint covers (``-1`` for a run starting
    from scratch); records of later steps are dropped (see :class:`JsonlLogger`).
    """
    if rank != 0:
        return NullLogger()
    run_dir = Path(run_dir)
    loggers: list[Logger] = [
        JsonlLogger(run_dir / "metrics.jsonl", keep_until_step=keep_until_step)
    ]
    if tensorboard_available():
        purge = None if keep_until_step is None else keep_until_step + 1
        loggers.append(TensorBoardLogger(run_dir / "tensorboard", purge_step=purge))
    return Dispatcher(loggers)


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
