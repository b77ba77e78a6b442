"""The training step replayed as a CUDA graph (``TrainConfig.cuda_graph``; docs/training.md,
"CUDA graphs").

On a GPU one eager step is bound by the host: ~1,200 kernel launches of a few microseconds
each keep an H100 busy 6 % of the time. A CUDA graph records the step's kernels once and
launches them all with one call. That is only correct for a step whose host side does the same
thing for every batch: it never reads the device (``pyskick.training.syncs.no_host_syncs``),
and the kernels it launches, with their arguments, depend on nothing but the batch's tensors
and a *key* (the epoch's schedule values). Both are checked on the CPU by the test suite
(tests/training/test_step_graph.py records the operator trace of consecutive steps).

:class:`StepGraph` keeps the graph of one key: the first call with a new key (or new batch
shapes) captures the step on static copies of the batch, the others copy the batch into them
and replay. State the step updates in place (weights, Adam's moments and step counts, the
baseline's sums, the metric outputs) lives at fixed addresses, so replays update it as the
eager step would; the random draws of the registered generators advance at every replay.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence
from typing import Any, NamedTuple

import torch
from torch import Tensor

STEP_WARMUP = 2
"""Eager steps before the first capture: cuBLAS and cuDNN set up their workspaces and pick
their algorithms outside of it (a capture may not allocate those)."""


class StepGraph:
    """A step ``batch -> outputs`` replayed as one CUDA graph per key.

    Args:
        step: the step: takes a NamedTuple of device tensors (a batch), then the call's
            ``args``, and returns a NamedTuple of device tensors; it must not read the device and
            must run the same kernels for every batch of one key.
        device: the CUDA device.
        generators: the step's own ``torch.Generator``s (the device's default one is always
            followed), registered with every graph so that each replay draws anew.
        warmup: eager steps before the first capture.
    """

    def __init__(
        self,
        step: Callable[..., Any],
        device: torch.device,
        generators: Sequence[torch.Generator] = (),
        warmup: int = STEP_WARMUP,
    ) -> None:
        if device.type != "cuda":
            raise ValueError(f"a CUDA graph needs a CUDA device, got {device}")
        self.step = step
        self.device = device
        self.generators = list(generators)
        self.warmup = warmup
        self.eager_steps = 0
        self.captures = 0
        self._graph: torch.cuda.CUDAGraph | None = None
        self._key: Hashable = None
        self._inputs: Any = None
        self._outputs: Any = None

    def __call__(self, batch: NamedTuple, key: Hashable, *args: Any) -> Any:
        """The step's outputs for ``batch``: static tensors, overwritten by the next call
        (read them, or queue work on them, before calling again).

        Args:
            batch: the batch (device tensors).
            key: what the step's host side depends on besides the batch (e.g. the epoch's
                schedule values): another key is another graph.
            args: passed to the step after the batch; a capture bakes them in, so they must
                be what ``key`` identifies.
        """
        if self.eager_steps < self.warmup:
            self.eager_steps += 1
            return self._side_stream_step(batch, args)
        if self._graph is None or key != self._key or not self._fits(batch):
            self._capture(batch, key, args)
        else:
            for static, tensor in zip(self._inputs, batch, strict=True):
                static.copy_(tensor, non_blocking=True)
        assert self._graph is not None
        self._graph.replay()
        return self._outputs

    def release(self) -> None:
        """Drop the graph and its memory (the next call captures again)."""
        self._graph = self._inputs = self._outputs = None
        self._key = None

    def _fits(self, batch: NamedTuple) -> bool:
        return all(
            static.shape == tensor.shape and static.dtype == tensor.dtype
            for static, tensor in zip(self._inputs, batch, strict=True)
        )

    def _side_stream_step(self, batch: NamedTuple, args: tuple[Any, ...]) -> Any:
        """One eager step on a side stream, as torch requires before a capture."""
        main = torch.cuda.current_stream(self.device)
        side = torch.cuda.Stream(self.device)
        side.wait_stream(main)
        for tensor in batch:
            tensor.record_stream(side)
        with torch.cuda.stream(side):
            outputs = self.step(batch, *args)
        main.wait_stream(side)
        for tensor in _tensors(outputs):
            tensor.record_stream(main)
        return outputs

    def _capture(self, batch: NamedTuple, key: Hashable, args: tuple[Any, ...]) -> None:
        self.release()
        inputs = type(batch)(*(tensor.clone() for tensor in batch))
        graph = torch.cuda.CUDAGraph()
        for generator in self.generators:
            graph.register_generator_state(generator)
        with torch.cuda.graph(graph):
            outputs = self.step(inputs, *args)
        self._graph, self._key, self._inputs, self._outputs = graph, key, inputs, outputs
        self.captures += 1


def _tensors(outputs: Any) -> list[Tensor]:
    if isinstance(outputs, Tensor):
        return [outputs]
    return [value for value in outputs if isinstance(value, Tensor)]
