"""The training step's networks compiled with ``torch.compile`` (``TrainConfig.compile``).

A run alone's training step on a GPU is a chain of ~1,150 kernels of ~2 µs each, even replayed
as a CUDA graph (docs/training.md, "Measured on an H100"): its time is the kernels' count, not
their arithmetic. Inductor fuses the element-wise work of the networks' forward and backward
passes into fewer kernels. Only the modules the step calls are compiled (``policy_ddp``,
``critic_ddp``, a pack's policy and critic): validation and evaluation call the modules
themselves, and the modules' parameters, state dicts and checkpoints are unchanged.

Compilation happens on the first calls, so in the untimed eager steps before a CUDA graph's
capture (:mod:`pyskick.training.graphs`), and again where a guard fails (the time index ``t``
becomes a symbolic integer after its second value, so ``T`` costs at most two compilations of
each pass). Each network compiles to whole graphs: ``nn.LSTM``, whose forward dynamo does not
trace (and inductor cannot lower on the CPU), is written out as its cell in compiled code
(:func:`~pyskick.models.policy.lstm_cell`). Dynamo refuses even to hold an ``nn.LSTM`` unless
``torch._dynamo.config.allow_rnn`` is set, so the compiled networks are called with it set,
and only then (:class:`CompiledNetwork`).
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch._dynamo
from torch import nn

__all__ = ["CompiledNetwork", "compile_network"]


class CompiledNetwork(nn.Module):
    """A network compiled by inductor (default mode), called with dynamo allowed to hold its
    ``nn.LSTM`` (its weights are read; its forward is never traced).

    Not ``mode="reduce-overhead"``: that captures CUDA graphs of its own, which
    :class:`~pyskick.training.graphs.StepGraph` already does for the whole step.

    Attributes:
        compiled: what ``torch.compile`` returned.
    """

    def __init__(self, module: nn.Module) -> None:
        super().__init__()
        self.compiled = cast(nn.Module, torch.compile(module))

    @property
    def _orig_mod(self) -> nn.Module:
        """The compiled module (or its DDP wrapper), as ``torch.compile``'s wrapper names it."""
        return cast(nn.Module, self.compiled._orig_mod)

    def forward(self, *args: Any, **kwargs: Any) -> Any:
        with torch._dynamo.config.patch(allow_rnn=True):
            return self.compiled(*args, **kwargs)


def compile_network(module: nn.Module) -> nn.Module:
    """``module`` (a network, or its DDP wrapper) compiled: a :class:`CompiledNetwork`."""
    return CompiledNetwork(module)
