"""One function seeds every RNG pyskick uses."""

from __future__ import annotations

import os
import random

import torch


def seed_everything(seed: int, *, deterministic: bool = False) -> None:
    """Seed torch (CPU and CUDA) and Python's ``random``. pyskick draws only from torch's RNGs.

    Args:
        seed: the seed.
        deterministic: also ask torch for deterministic algorithms (slower on GPU); sets
            ``CUBLAS_WORKSPACE_CONFIG`` as cuBLAS requires, before CUDA is initialised.
    """
    random.seed(seed)
    torch.manual_seed(seed)
    if deterministic:
        os.environ.setdefault("CUBLAS_WORKSPACE_CONFIG", ":4096:8")
        torch.use_deterministic_algorithms(True)
        torch.backends.cudnn.benchmark = False
