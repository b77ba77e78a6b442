"""Wall time of named spans of device work, true on every device.

On the CPU, work runs when Python calls it: ``time.perf_counter`` around a span measures it.
On a GPU, a call only queues kernels, so a host clock measures the queueing. :class:`SpanTimer`
records CUDA events there instead and reads them once, in :meth:`SpanTimer.totals` (the one
synchronisation, at an epoch's end), so timing never adds a host synchronisation to a step.
"""

from __future__ import annotations

import contextlib
import time
from collections import defaultdict
from collections.abc import Iterator

import torch


class SpanTimer:
    """Seconds spent in named spans on ``device``, summed until :meth:`totals` reads them.

    Args:
        device: where the timed work runs.
    """

    def __init__(self, device: torch.device | str) -> None:
        self.device = torch.device(device)
        self._cuda = self.device.type == "cuda"
        self._seconds: dict[str, float] = defaultdict(float)
        self._events: dict[str, list[tuple[torch.cuda.Event, torch.cuda.Event]]] = defaultdict(list)

    @contextlib.contextmanager
    def span(self, name: str) -> Iterator[None]:
        """Add the time of the block's device work to ``name``."""
        if not self._cuda:
            tick = time.perf_counter()
            try:
                yield
            finally:
                self._seconds[name] += time.perf_counter() - tick
            return
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        start.record()
        try:
            yield
        finally:
            end.record()
            self._events[name].append((start, end))

    def totals(self) -> dict[str, float]:
        """Seconds per span name since the last call (waits for the device once), then reset."""
        if self._events:
            torch.cuda.synchronize(self.device)
            for name, pairs in self._events.items():
                self._seconds[name] += sum(a.elapsed_time(b) for a, b in pairs) / 1e3
            self._events.clear()
        out = dict(self._seconds)
        self._seconds.clear()
        return out


def synchronize(device: torch.device) -> None:
    """Wait for ``device``'s queued work (nothing to wait for on the CPU): for timings taken
    with a host clock at an epoch's boundaries."""
    if device.type == "cuda":
        torch.cuda.synchronize(device)


def span(timer: SpanTimer | None, name: str) -> contextlib.AbstractContextManager[None]:
    """``timer.span(name)``, or a block that times nothing when ``timer`` is None."""
    return timer.span(name) if timer is not None else contextlib.nullcontext()
