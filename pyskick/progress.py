"""Progress of long operations, reported to whoever shows it (the CLI draws it).

Library code never writes to stderr. Whatever takes long (training epochs and their batches,
sidekick scoring, evaluation, generating and converting datasets, ``reproduce``) runs inside a
*stage* and advances it::

    from pyskick import progress

    with progress.stage("score rew", total=len(grids), unit="grid") as scoring:
        for batch in batches:
            ...
            scoring.advance(len(batch))

A stage reports three events, *started*, *advanced* and *finished*, to the :class:`ProgressSink`
installed for the current context with :func:`reporting`; by default that is :data:`NULL`, which
ignores them (a stage then costs a few attribute updates). Stages nest: a stage opened inside
another's ``with`` block has it as its ``parent``, so a renderer can draw one bar per open stage.
The sink and the innermost stage live in :mod:`contextvars`, so they reach any call depth
(plugin code included) without an argument, and every thread or asyncio task has its own.

Where no bars can be drawn (stderr is a log file, a pipe, a Slurm job), a renderer writes lines;
which events deserve a line is said where a stage is opened, with ``lines``:

- ``"end"`` (default): one line when the stage ends (scoring, an evaluation, a conversion);
- ``"each"``: one line per :meth:`Stage.advance` (the epochs of a run, the steps of
  ``reproduce``), with the metrics and the label that advance carries;
- ``"none"``: never (the batches of an epoch); a bar only.

Inside :func:`quiet` every stage opened is ``"none"`` (the validation of an epoch, whose result
is on the epoch's line).

Messages that are not progress (a reused cache entry, a skipped input file) go to the standard
:mod:`logging` module, to loggers under ``pyskick``; the CLI shows their INFO records on stderr,
a program that uses pyskick configures :mod:`logging` as it likes (records of WARNING and above
reach stderr through logging's last-resort handler when nothing is configured).

This module is at the bottom of the layering: it imports nothing from pyskick, and nothing from
a rendering library either (the CLI renders with ``tqdm``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Literal, Protocol

Lines = Literal["end", "each", "none"]
"""When a stage is written as a line where no bars are drawn (see the module docstring)."""

_LINES = ("end", "each", "none")


class Stage:
    """One long operation in progress: what it is, how far it got, what it measured.

    Built by :func:`stage`; the code that opened it calls :meth:`advance`. Renderers read the
    attributes.

    Attributes:
        name: what is done (``"train"``, ``"score rew"``, ``"train epoch 3/10"``).
        total: how many items it has (None: unknown).
        unit: what an item is (``"epoch"``, ``"batch"``, ``"grid"``, ``"step"``).
        lines: when it is written as a line without bars (:data:`Lines`).
        parent: the stage it runs in (None at the top).
        done: items done, those done before it started (``initial``) and skipped ones included.
        skipped: items of ``done`` that took no work (already done before; not in the rate).
        label: what the last advance finished (``"trained ltla seed 0"``), or None.
        metrics: what the last advance measured (name -> value), shown with it.
        started: ``time.perf_counter()`` when it started.
        ended: ``time.perf_counter()`` when it ended (None while it runs).
        failed: it ended with an exception.
    """

    def __init__(
        self,
        name: str,
        total: int | None,
        *,
        unit: str,
        lines: Lines,
        parent: Stage | None,
        sink: ProgressSink,
        initial: int,
    ) -> None:
        self.name = name
        self.total = total
        self.unit = unit
        self.lines: Lines = lines
        self.parent = parent
        self.done = initial
        self.skipped = initial
        self.label: str | None = None
        self.metrics: dict[str, float] = {}
        self.started = time.perf_counter()
        self.ended: float | None = None
        self.failed = False
        self._sink = sink

    def __repr__(self) -> str:
        total = "?" if self.total is None else self.total
        return f"Stage({self.name!r}, {self.done}/{total} {self.unit})"

    @property
    def depth(self) -> int:
        """0 for a stage at the top, 1 for one inside it, ..."""
        return 0 if self.parent is None else self.parent.depth + 1

    @property
    def elapsed(self) -> float:
        """Seconds since it started (until it ended, once it has)."""
        end = time.perf_counter() if self.ended is None else self.ended
        return end - self.started

    def advance(
        self,
        n: int = 1,
        *,
        label: str | None = None,
        metrics: Mapping[str, float] | None = None,
        skipped: bool = False,
    ) -> None:
        """Count ``n`` more items done.

        Args:
            n: items done.
            label: what they were (shown on the stage's line).
            metrics: what they measured, name -> value (shown on the stage's line).
            skipped: they took no work (already done): they do not count in the rate.
        """
        self.done += n
        if skipped:
            self.skipped += n
        self.label = label
        self.metrics = dict(metrics) if metrics is not None else {}
        self._sink.advanced(self, n)


class ProgressSink(Protocol):
    """Receives the events of every stage (a renderer, a test's recorder).

    Called in the thread that runs the stage; a sink that raises stops the operation.
    """

    def started(self, stage: Stage) -> None:
        """``stage`` began (its ``parent``, if any, is still open)."""

    def advanced(self, stage: Stage, n: int) -> None:
        """``stage.done`` grew by ``n`` (``stage.label`` and ``stage.metrics`` say what)."""

    def finished(self, stage: Stage) -> None:
        """``stage`` ended (``stage.failed`` when by an exception); it gets no more events."""


class NullSink:
    """Ignores every event: the sink when nothing shows progress."""

    def started(self, stage: Stage) -> None:
        pass

    def advanced(self, stage: Stage, n: int) -> None:
        pass

    def finished(self, stage: Stage) -> None:
        pass


NULL = NullSink()
"""The default sink."""

_SINK: ContextVar[ProgressSink] = ContextVar("pyskick_progress_sink", default=NULL)
_CURRENT: ContextVar[Stage | None] = ContextVar("pyskick_progress_stage", default=None)
_QUIET: ContextVar[bool] = ContextVar("pyskick_progress_quiet", default=False)


@contextmanager
def reporting(sink: ProgressSink) -> Iterator[ProgressSink]:
    """Send the events of the stages opened in this ``with`` block to ``sink``."""
    token = _SINK.set(sink)
    try:
        yield sink
    finally:
        _SINK.reset(token)


@contextmanager
def quiet() -> Iterator[None]:
    """Stages opened in this ``with`` block are never written as lines (``lines="none"``)."""
    token = _QUIET.set(True)
    try:
        yield
    finally:
        _QUIET.reset(token)


@contextmanager
def stage(
    name: str,
    total: int | None = None,
    *,
    unit: str = "item",
    lines: Lines = "end",
    initial: int = 0,
) -> Iterator[Stage]:
    """Run the ``with`` block as a stage of progress (see the module docstring).

    Args:
        name: what is done, for a person (``"score rew"``).
        total: how many items the stage has (None: unknown).
        unit: what an item is, singular (``"grid"``).
        lines: when it is written as a line where no bars are drawn.
        initial: items done before (a resumed run's epochs): counted in ``done``, not in the
            rate.

    Yields:
        The :class:`Stage`, to :meth:`~Stage.advance`.

    Raises:
        ValueError: a negative ``total`` or ``initial``, or an unknown ``lines``.
    """
    if total is not None and total < 0:
        raise ValueError(f"stage {name!r}: total must be >= 0, got {total}")
    if initial < 0:
        raise ValueError(f"stage {name!r}: initial must be >= 0, got {initial}")
    if lines not in _LINES:
        raise ValueError(f"stage {name!r}: lines must be one of {', '.join(_LINES)}, got {lines!r}")
    sink = _SINK.get()
    current = Stage(
        name,
        total,
        unit=unit,
        lines="none" if _QUIET.get() else lines,
        parent=_CURRENT.get(),
        sink=sink,
        initial=initial,
    )
    sink.started(current)
    token = _CURRENT.set(current)
    try:
        yield current
    except BaseException:
        current.failed = True
        raise
    finally:
        _CURRENT.reset(token)
        current.ended = time.perf_counter()
        sink.finished(current)


def current_stage() -> Stage | None:
    """The innermost open stage of this context, or None."""
    return _CURRENT.get()
