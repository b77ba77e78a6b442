"""Single-process or torchrun data-parallel execution (docs/training.md, "Distributed training").

Under ``torchrun`` (``WORLD_SIZE > 1``) the trainer joins the process group (gloo on CPU, nccl
on CUDA), wraps its modules in DDP and gives each rank an equal slice of every global batch;
metrics are summed over ranks and only rank 0 writes files.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import torch
import torch.distributed as dist
from torch import Tensor


@dataclass(frozen=True)
class DistContext:
    """Where this process stands in the job."""

    rank: int = 0
    """Global rank (0 in a single-process run)."""
    world_size: int = 1
    """Number of processes."""
    local_rank: int = 0
    """Rank on this node (picks the CUDA device)."""

    @property
    def distributed(self) -> bool:
        """True under a multi-process launch."""
        return self.world_size > 1

    @property
    def is_main(self) -> bool:
        """True on the rank that writes files and logs."""
        return self.rank == 0


def resolve_device(device: str, local_rank: int = 0) -> torch.device:
    """``"auto"`` -> CUDA when available (``cuda:local_rank``), else CPU.

    Raises:
        ValueError: unknown name, or ``"cuda"`` without a CUDA device.
    """
    if device not in ("auto", "cpu", "cuda"):
        raise ValueError(f"device must be auto, cpu or cuda, got {device!r}")
    if device == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but no CUDA device is available")
    if device == "cpu" or not torch.cuda.is_available():
        return torch.device("cpu")
    return torch.device("cuda", local_rank)


def init_distributed(device: torch.device) -> DistContext:
    """Join the process group when launched with ``WORLD_SIZE > 1`` (idempotent).

    Args:
        device: the training device; CUDA selects nccl, CPU gloo.
    """
    world_size = int(os.environ.get("WORLD_SIZE", "1"))
    if world_size <= 1:
        return DistContext()
    if not dist.is_initialized():
        dist.init_process_group(backend="nccl" if device.type == "cuda" else "gloo")
    return DistContext(
        rank=dist.get_rank(),
        world_size=dist.get_world_size(),
        local_rank=int(os.environ.get("LOCAL_RANK", "0")),
    )


def all_reduce_sum(values: Tensor, ctx: DistContext) -> Tensor:
    """Sum ``values`` over ranks (returns a new tensor; identity in a single process)."""
    out = values.clone()
    if ctx.distributed:
        dist.all_reduce(out, op=dist.ReduceOp.SUM)
    return out
