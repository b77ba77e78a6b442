"""Built-in loggers: jsonl (``RUN/metrics.jsonl``, every run has it) and tensorboard.

A logger factory is called as ``factory()`` and returns a
:class:`pyskick.training.loggers.Logger` (``start(run)``, ``log(step, metrics)``, ``close()``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyskick.hookspecs import Register, hookimpl

if TYPE_CHECKING:
    from pyskick.training.loggers import Logger


def jsonl_logger(**_: object) -> Logger:
    """One JSON line per epoch in RUN/metrics.jsonl (always on: resume and reports read it)."""
    from pyskick.training.loggers import JsonlLogger

    return JsonlLogger()


def tensorboard_logger(**_: object) -> Logger:
    """TensorBoard event files in RUN/tensorboard (needs the tensorboard package)."""
    from pyskick.training.loggers import TensorBoardLogger

    return TensorBoardLogger()


@hookimpl
def pyskick_register_loggers(register: Register) -> None:
    register("jsonl", jsonl_logger)
    register("tensorboard", tensorboard_logger, aliases=("tb",))
