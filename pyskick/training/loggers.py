"""Metric loggers: the :class:`Logger` protocol, the built-in ``jsonl`` and ``tensorboard``
loggers, and building a run's loggers from registered names.

Loggers are plugins (``pyskick_register_loggers``, :mod:`pyskick.hookspecs`). A run always
writes ``RUN/metrics.jsonl`` (the ``jsonl`` logger: resuming, ``reproduce``'s learning curves
and ``visualize`` read it); ``--logger NAME`` (repeatable) chooses the others, by default
``tensorboard`` when the ``tensorboard`` package is installed. Keys are namespaced
(``train/...``, ``val/...``, ``perf/...``, ``sidekick/...``). Only rank 0 logs; other ranks get
an empty :class:`Dispatcher`.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from pyskick.run_dir import METRICS, trim_log

_LOG = logging.getLogger(__name__)

ALWAYS = "jsonl"
"""The logger every run has: ``RUN/metrics.jsonl`` is part of the run folder."""


@dataclass(frozen=True)
class RunInfo:
    """What a logger learns when a run (or a resumed run) starts.

    Attributes:
        run_dir: the run folder.
        stage: ``"pretrain"`` or ``"train"``.
        config: the run's ``TrainConfig.to_dict()``.
        first_step: the first step this attempt logs: 0 for a new run, the epoch after the
            checkpoint for a resumed one. Records of steps ``>= first_step`` left by an
            interrupted attempt are stale.
        steps: the run's epochs (its last step is ``steps - 1``).
    """

    run_dir: Path
    stage: str = "train"
    config: Mapping[str, Any] = field(default_factory=dict)
    first_step: int = 0
    steps: int = 0


class Logger(Protocol):
    """What the trainer calls, on rank 0: ``start`` once, ``log`` after every epoch,
    ``close`` once at the end (also when training failed)."""

    def start(self, run: RunInfo) -> None: ...

    def log(self, step: int, metrics: Mapping[str, float]) -> None: ...

    def close(self) -> None: ...


class JsonlLogger:
    """Appends one JSON object per ``log`` to ``metrics.jsonl``: ``{"step", "time", **metrics}``
    (non-finite values become null, so the file stays JSON).

    ``start`` first cuts the file (atomically) to the records of steps before
    ``run.first_step``, so that the log holds exactly the epochs a checkpoint covers: a resumed
    run's log then matches an uninterrupted one's, and a run starting from scratch drops every
    record of an abandoned attempt.

    Args:
        path: the file; None: ``RUN/metrics.jsonl`` of the run given to :meth:`start`.
    """

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = None if path is None else Path(path)
        self._handle: Any = None

    def start(self, run: RunInfo) -> None:
        path = self.path = self.path or Path(run.run_dir) / METRICS
        path.parent.mkdir(parents=True, exist_ok=True)
        trim_log(path, run.first_step - 1)
        self._handle = path.open("a")

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        record: dict[str, Any] = {"step": step, "time": time.time()}
        for key, value in metrics.items():
            value = float(value)
            record[key] = value if math.isfinite(value) else None
        self._handle.write(json.dumps(record) + "\n")
        self._handle.flush()

    def close(self) -> None:
        if self._handle is not None:
            self._handle.close()


class TensorBoardLogger:
    """Scalars to TensorBoard event files in ``RUN/tensorboard`` (``torch.utils.tensorboard``;
    needs the ``tensorboard`` package, the ``tb`` extra)."""

    def __init__(self) -> None:
        from torch.utils.tensorboard import SummaryWriter  # raises without tensorboard

        self._writer_class = SummaryWriter
        self._writer: Any = None

    def start(self, run: RunInfo) -> None:
        folder = Path(run.run_dir) / "tensorboard"
        # purge_step hides the events of steps >= it that an interrupted attempt wrote.
        self._writer = self._writer_class(log_dir=str(folder), purge_step=run.first_step)
        _LOG.info("TensorBoard logs in %s (view them: tensorboard --logdir %s)", folder, folder)

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for key, value in metrics.items():
            self._writer.add_scalar(key, value, step)
        self._writer.flush()

    def close(self) -> None:
        if self._writer is not None:
            self._writer.close()


class Dispatcher:
    """Fans every call out to several loggers (none: discards everything); ``close`` closes
    them all, then re-raises the first failure.

    Attributes:
        loggers: the loggers.
        names: the run's logger names (what ``config.json`` records), also on ranks that log
            nothing.
    """

    def __init__(self, loggers: Sequence[Logger], names: Sequence[str] = ()) -> None:
        self.loggers = list(loggers)
        self.names = list(names)

    def start(self, run: RunInfo) -> None:
        for i, logger in enumerate(self.loggers):
            try:
                logger.start(run)
            except Exception:
                for started in self.loggers[:i]:  # release what the others opened
                    started.close()
                raise

    def log(self, step: int, metrics: Mapping[str, float]) -> None:
        for logger in self.loggers:
            logger.log(step, metrics)

    def close(self) -> None:
        failure: BaseException | None = None
        for logger in self.loggers:
            try:
                logger.close()
            except Exception as exc:
                failure = failure or exc
        if failure is not None:
            raise failure


def tensorboard_available() -> bool:
    """True when the ``tensorboard`` package can be imported."""
    try:
        import tensorboard  # noqa: F401
    except ImportError:
        return False
    return True


def default_loggers() -> list[str]:
    """The loggers of a run given none: ``jsonl``, and ``tensorboard`` when installed."""
    return [ALWAYS, *(["tensorboard"] if tensorboard_available() else [])]


def logger_names(names: Sequence[str] | None) -> list[str]:
    """``names`` as a run uses them: :func:`default_loggers` for None, else ``jsonl`` first
    (always on) and each registered name once, by its primary name.

    Raises:
        UnknownNameError: (a ValueError) a name no plugin registers; lists the valid ones.
    """
    from pyskick.plugins import lookup

    if names is None:
        return default_loggers()
    if isinstance(names, str):
        raise TypeError("loggers must be a sequence of logger names, not a string")
    resolved = [ALWAYS]
    for name in names:
        primary = lookup("logger", name).name
        if primary not in resolved:
            resolved.append(primary)
    return resolved


def make_loggers(names: Sequence[str] | None = None, *, rank: int = 0) -> Dispatcher:
    """The run's loggers, built from registered names (see :func:`logger_names`) and not yet
    started; on rank != 0 none are built (an empty :class:`Dispatcher`). Writes nothing.

    Raises:
        UnknownNameError: an unknown name.
        RuntimeError: a logger that cannot be built (a missing package), naming it.
        TypeError: a factory that returned no logger.
    """
    from pyskick.plugins import lookup

    resolved = logger_names(names)
    loggers = []
    for name in resolved if rank == 0 else ():
        entry = lookup("logger", name)
        try:
            logger = entry.factory()
        except ImportError as exc:
            raise RuntimeError(
                f"logger {name!r} (plugin {entry.plugin}) cannot start: {exc}; install what it "
                "needs or leave it out of --logger"
            ) from None
        missing = [m for m in ("start", "log", "close") if not callable(getattr(logger, m, None))]
        if missing:
            raise TypeError(
                f"logger {name!r} (plugin {entry.plugin}) built a {type(logger).__name__} "
                f"without {', '.join(missing)}()"
            )
        loggers.append(logger)
    return Dispatcher(loggers, resolved)


def read_metrics(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """All records of a ``metrics.jsonl`` file."""
    return [json.loads(line) for line in Path(path).read_text().splitlines() if line.strip()]
