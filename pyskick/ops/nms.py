"""Public wrapper of ``nms_rewards`` and its operator ``torch.ops.pyskick.nms_rewards``."""

from __future__ import annotations

import torch
from torch import Tensor

from pyskick.ops import _reference
from pyskick.ops._checks import (
    check_finite,
    check_int,
    check_not_differentiated,
    check_same_device,
    check_tensor,
)
from pyskick.ops._dispatch import Backend, launch, use_native
from pyskick.ops._library import define_op

OP = "nms_rewards"


def nms_rewards(scores: Tensor, k: int, radius: int, *, backend: Backend = "auto") -> Tensor:
    """Greedy non-maximum suppression of one-view score maps (docs/paper-reference.md §5.2).

    ``k`` times per sample: keep the highest cell not yet suppressed (ties: lowest row-major
    index ``n * M + m``) and suppress every cell within Chebyshev distance ``radius``; azimuth
    wraps, elevation clips (the environment's topology).

    Args:
        scores: ``[B, N, M]`` float32, finite.
        k: number of peaks to keep (>= 0).
        radius: suppression radius (>= 0).
        backend: ``"auto"``, ``"native"`` or ``"reference"``.

    Returns:
        ``[B, N, M]`` float32: the scores at the kept peaks, 0 elsewhere.
    """
    scores = check_tensor("scores", scores, op=OP, dtypes=(torch.float32,), ndim=3)
    k = check_int("k", k, op=OP)
    radius = check_int("radius", radius, op=OP)
    device = check_same_device(OP, scores=scores)
    # Resolve the backend before reading values: a device without kernels (e.g. "meta") must
    # get the backend error, not a failure to read its data.
    native = use_native(OP, backend, device)
    if not native or device.type != "cpu":  # the CPU kernel checks finiteness in its own pass
        check_finite("scores", scores, op=OP)
    N, M = scores.shape[1:]
    # At most N*M peaks exist and a radius of max(N, M) already reaches every cell: clamping
    # changes no result and keeps any Python int (2**70 included) in the kernels' int64 range.
    k, radius = min(k, N * M), min(radius, max(N, M))
    return torch.ops.pyskick.nms_rewards(scores, k, radius, backend)


def _nms_rewards(scores: Tensor, k: int, radius: int, backend: str) -> Tensor:
    """The operator: the native kernel of the tensors' device, or the twin (inputs checked)."""
    check_not_differentiated(OP, scores=scores)
    device = scores.device
    if not use_native(OP, backend, device):
        return _reference.nms_rewards(scores, k, radius)
    out = torch.empty_like(scores)
    if out.numel() == 0:
        return out
    B, N, M = scores.shape
    launch(OP, device, scores.data_ptr(), out.data_ptr(), B, N, M, k, radius)
    return out


def _nms_rewards_fake(scores: Tensor, k: int, radius: int, backend: str) -> Tensor:
    return torch.empty_like(scores)


define_op(OP, _nms_rewards, fake=_nms_rewards_fake)
