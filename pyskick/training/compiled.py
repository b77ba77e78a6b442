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
each pass; the policy's last glimpse a third when it decodes the episode's glimpses there,
``TrainConfig.decode_once``). Each network compiles to whole graphs: ``nn.LSTM``, whose
forward dynamo does not trace (and inductor cannot lower on the CPU), is written out as its
cell in compiled code (:func:`~pyskick.models.policy.lstm_cell`). Dynamo refuses even to hold
an ``nn.LSTM`` unless ``torch._dynamo.config.allow_rnn`` is set, so the compiled networks are
called with it set, and only then (:class:`CompiledNetwork`).
"""

from __future__ import annotations

from typing import Any, cast

import torch
import torch._dynamo
from torch import nn

from pyskick.errors import UserError

__all__ = ["RECOMPILE_LIMIT", "CompiledNetwork", "check_compile"]

RECOMPILE_LIMIT = 64
"""Compiled versions a network's code may have in one process. Every policy of a process shares
``CompletionPolicy.forward``'s code, and each configuration (stage, precision, layout, batch
size, pack size, decoding) takes its own two or three: dynamo's default, 8, is spent by four (a
``reproduce`` or a ``bench`` call makes more). Past the limit a call raises instead of running
eagerly without a word."""


class CompiledNetwork(nn.Module):
    """A network (or its DDP wrapper) compiled by inductor, default mode, and called with
    dynamo allowed to hold its ``nn.LSTM`` (whose weights are read; its forward is never
    traced) and :data:`RECOMPILE_LIMIT`.

    Not ``mode="reduce-overhead"``: that captures CUDA graphs of its own, which
    :class:`~pyskick.training.graphs.StepGraph` already does for the whole step.

    Args:
        module: the network, or its DDP wrapper (``torch.compile`` goes around DDP).

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
        with torch._dynamo.config.patch(
            allow_rnn=True, recompile_limit=RECOMPILE_LIMIT, fail_on_recompile_limit_hit=True
        ):
            return self.compiled(*args, **kwargs)


def check_compile(device: torch.device) -> None:
    """Refuse ``compile`` where it cannot work, before a run writes anything: a torch older
    than 2.7 (its dynamo settings), no triton on a GPU, no C++ compiler on the CPU (inductor's
    kernels).

    Raises:
        UserError: one line naming what is missing.
    """
    if not hasattr(torch._dynamo.config, "fail_on_recompile_limit_hit"):
        raise UserError(f"compile needs torch 2.7 or later; this is torch {torch.__version__}")
    if device.type == "cuda":
        from torch.utils._triton import has_triton

        if not has_triton():
            raise UserError("compile needs triton on a GPU (inductor's kernels): install it")
        return
    from torch._inductor.cpp_builder import get_cpp_compiler

    try:
        get_cpp_compiler()
    except Exception as exc:  # inductor's own message names the compilers it looked for
        raise UserError(
            f"compile needs a C++ compiler on the CPU (inductor's kernels): {exc}"
        ) from None
