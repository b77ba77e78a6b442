"""The CLI's rendering of :mod:`pyskick.progress` (and of pyskick's log records) on stderr.

Two modes, chosen by whether stderr is a terminal (``PYSKICK_PROGRESS=bars|lines|off``
overrides):

- ``bars``: a ``tqdm`` bar per open stage (name, count, rate, elapsed and remaining time, the
  last metrics), redrawn in place; above them, the same lines as in ``lines`` mode;
- ``lines``: no bars, no carriage returns: one line per advance of a ``lines="each"`` stage
  (an epoch: its metrics, elapsed and remaining time; a ``reproduce`` step: k/N) and one line
  when a ``lines="end"`` stage ends (its count, time and rate). For logs, ``nohup``, Slurm,
  ``| tee``;
- ``off``: nothing (log records still reach stderr).

Only rank 0 of a ``torchrun`` launch renders; the other ranks stay silent.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING, Never, TextIO

from pyskick import progress
from pyskick.errors import UserError
from pyskick.progress import Stage

if TYPE_CHECKING:
    from tqdm import tqdm

MODES = ("bars", "lines", "off")
ENV = "PYSKICK_PROGRESS"

_ACTIVE: ContextVar[Renderer | None] = ContextVar("pyskick_cli_renderer", default=None)


def choose_mode(stream: TextIO, environ: dict[str, str] | None = None) -> str:
    """``$PYSKICK_PROGRESS`` when set, else ``bars`` on a terminal and ``lines`` elsewhere;
    ``off`` on the ranks other than 0 of a ``torchrun`` launch.

    Raises:
        UserError: an unknown ``$PYSKICK_PROGRESS`` or a ``$RANK`` that is not an integer
            (bad input: exit 2).
    """
    env = os.environ if environ is None else environ
    rank = env.get("RANK", "0").strip() or "0"
    try:
        if int(rank) != 0:
            return "off"
    except ValueError:
        raise UserError(f"RANK={rank!r}: expected an integer (torchrun sets it)") from None
    chosen = env.get(ENV, "").strip().lower()
    if chosen:
        if chosen not in MODES:
            raise UserError(f"{ENV}={chosen!r}: expected one of {', '.join(MODES)}")
        return chosen
    isatty = getattr(stream, "isatty", None)
    return "bars" if isatty is not None and isatty() else "lines"


def _duration(seconds: float) -> str:
    """``MM:SS``, or ``H:MM:SS`` from an hour on (as tqdm's bars show time)."""
    minutes, secs = divmod(int(max(seconds, 0.0)), 60)
    hours, minutes = divmod(minutes, 60)
    return f"{hours:d}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


def _rate(stage: Stage) -> float | None:
    """Items per second over the work done here (items skipped or done before excluded)."""
    worked = stage.done - stage.skipped
    elapsed = stage.elapsed
    return worked / elapsed if worked > 0 and elapsed > 0 else None


def _rate_text(rate: float, unit: str) -> str:
    return f"{rate:.3g} {unit}/s" if rate >= 1 else f"{1 / rate:.3g} s/{unit}"


def _metrics_text(metrics: dict[str, float]) -> str:
    return ", ".join(f"{name} {value:.4g}" for name, value in metrics.items())


def advance_line(stage: Stage) -> str:
    """The line of one advance of a ``lines="each"`` stage: where it is, what the advance
    finished and measured, elapsed and remaining time.

    E.g. ``train: epoch 3/10 | train_error 0.01231, val_error 0.01102 | elapsed 00:06, left
    00:14 (2.1 s/epoch)`` or ``reproduce: step 4/25 train ltla seed 0 | elapsed 01:02, left
    05:10 (15.5 s/step)``.
    """
    count = f"{stage.done}/{stage.total}" if stage.total is not None else f"{stage.done}"
    parts = [f"{stage.name}: {stage.unit} {count}" + (f" {stage.label}" if stage.label else "")]
    if stage.metrics:
        parts.append(_metrics_text(stage.metrics))
    timing = f"elapsed {_duration(stage.elapsed)}"
    rate = _rate(stage)
    if rate is not None:
        if stage.total is not None:
            timing += f", left {_duration((stage.total - stage.done) / rate)}"
        timing += f" ({_rate_text(rate, stage.unit)})"
    parts.append(timing)
    return " | ".join(parts)


def end_line(stage: Stage) -> str:
    """The line of a ``lines="end"`` stage that ended: count, time and rate.

    E.g. ``score rew: 320 grid in 00:12 (26.1 grid/s)``.
    """
    line = f"{stage.name}: {stage.done} {stage.unit} in {_duration(stage.elapsed)}"
    rate = _rate(stage)
    if rate is not None:
        line += f" ({_rate_text(rate, stage.unit)})"
    if stage.metrics:
        line += " | " + _metrics_text(stage.metrics)
    return line


class Renderer:
    """A :class:`~pyskick.progress.ProgressSink` that writes to ``stream`` in one of
    :data:`MODES` (see the module docstring).

    Args:
        stream: where to write (stderr).
        mode: ``"bars"``, ``"lines"`` or ``"off"``.
        mininterval: least seconds between two redraws of a bar.
    """

    def __init__(self, stream: TextIO, mode: str, *, mininterval: float = 0.1) -> None:
        if mode not in MODES:
            raise ValueError(f"mode must be one of {', '.join(MODES)}, got {mode!r}")
        self.stream = stream
        self.mode = mode
        self.mininterval = mininterval
        self._bars: dict[int, tqdm[Never]] = {}  # bars without an iterable

    # -------------------------------------------------------------------- the sink
    def started(self, stage: Stage) -> None:
        if self.mode != "bars":
            return
        from tqdm import tqdm  # here: a command that draws no bar does not pay its import

        self._bars[id(stage)] = tqdm(
            total=stage.total,
            initial=stage.done,
            desc=stage.name,
            unit=stage.unit,
            file=self.stream,
            leave=False,
            dynamic_ncols=True,
            mininterval=self.mininterval,
            smoothing=0,  # the average rate, as in the lines
            # Stages within stages below their parents.
            position=stage.depth,
        )

    def advanced(self, stage: Stage, n: int) -> None:
        bar = self._bars.get(id(stage))
        if bar is not None:
            if stage.skipped > bar.initial:
                # Done before: counted, not in the rate (tqdm's rate is (n - initial) / time).
                bar.initial = stage.skipped
            if stage.metrics:
                bar.set_postfix_str(_metrics_text(stage.metrics), refresh=False)
            bar.update(n)
        if stage.lines == "each":
            self.write(advance_line(stage))

    def finished(self, stage: Stage) -> None:
        bar = self._bars.pop(id(stage), None)
        if bar is not None:
            bar.close()
        if stage.lines == "end" and not stage.failed:
            self.write(end_line(stage))

    # ------------------------------------------------------------------------ lines
    def write(self, line: str) -> None:
        """Write one line (above the bars, which are redrawn below it)."""
        if self.mode == "off":
            return
        if self._bars:
            next(iter(self._bars.values())).write(line, file=self.stream)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def close(self) -> None:
        """Close the bars still open (a stage left by an exception closes its own)."""
        for bar in self._bars.values():
            bar.close()
        self._bars.clear()


class _RendererHandler(logging.Handler):
    """Log records as lines of the renderer (they do not tear its bars)."""

    def __init__(self, renderer: Renderer) -> None:
        super().__init__(logging.INFO)
        self.renderer = renderer

    def emit(self, record: logging.LogRecord) -> None:
        try:
            line = self.format(record)
            if self.renderer.mode == "off":
                self.renderer.stream.write(line + "\n")
            else:
                self.renderer.write(line)
        except Exception:
            self.handleError(record)


@contextmanager
def rendering(stream: TextIO | None = None, mode: str | None = None) -> Iterator[Renderer]:
    """Render pyskick's progress and its ``pyskick`` INFO log records on ``stream`` (default
    stderr) for the block.

    Args:
        stream: where to write (default ``sys.stderr``).
        mode: one of :data:`MODES`; default :func:`choose_mode`.
    """
    stream = sys.stderr if stream is None else stream
    renderer = Renderer(stream, choose_mode(stream) if mode is None else mode)
    handler = _RendererHandler(renderer)
    logger = logging.getLogger("pyskick")
    level = logger.level
    logger.addHandler(handler)
    logger.setLevel(logging.INFO)
    token = _ACTIVE.set(renderer)
    try:
        with progress.reporting(renderer):
            yield renderer
    finally:
        _ACTIVE.reset(token)
        renderer.close()
        logger.removeHandler(handler)
        logger.setLevel(level)


def echo(line: str) -> None:
    """Write one line to stderr without tearing the bars (through the active renderer)."""
    renderer = _ACTIVE.get()
    if renderer is not None and renderer.mode != "off":
        renderer.write(line)
    else:
        sys.stderr.write(line + "\n")
        sys.stderr.flush()
