"""Public wrapper of ``coverage_matrix`` and its operator ``torch.ops.pyskick.coverage_matrix``."""

from __future__ import annotations

import torch
from torch import Tensor

from pyskick.errors import UserError
from pyskick.ops import _reference
from pyskick.ops._checks import (
    MAX_NUMEL,
    check_finite,
    check_not_differentiated,
    check_same_device,
    check_tensor,
)
from pyskick.ops._dispatch import Backend, launch, use_native
from pyskick.ops._library import define_op

OP = "coverage_matrix"


def coverage_matrix(recon: Tensor, grid: Tensor, *, backend: Backend = "auto") -> Tensor:
    """Normalised utility ``U[b, s, t]`` of every source view s for every target view t.

    For each source start view ``s = (i, j)``, its one-view reconstruction is rolled back to the
    absolute frame, the squared error against each true target view is summed over pixels,
    turned into ``u = 1 / (1000 * err + 1e-8)`` and min-max normalised over sources for each
    target (docs/paper-reference.md §5.4). Fused: one pass over ``recon``.

    Args:
        recon: ``[B, V, N, M, C, H, W]`` float32 with ``V = N * M``: the reconstruction from each
            start view, in that start's frame (slot m holds absolute azimuth ``(j + m) mod M``).
        grid: ``[B, N, M, C, H, W]`` float32, the true preprocessed grid (absolute frame).
            Both must be finite: a NaN or infinite value raises ValueError on every backend.
        backend: ``"auto"``, ``"native"`` or ``"reference"``.

    Returns:
        ``[B, V, V]`` float32 in [0, 1].
    """
    recon = check_tensor("recon", recon, op=OP, dtypes=(torch.float32,), ndim=7)
    grid = check_tensor("grid", grid, op=OP, dtypes=(torch.float32,), ndim=6)
    B, V, N, M = recon.shape[:4]
    if V != N * M:
        raise UserError(
            f"{OP}: recon must be [B, V, N, M, C, H, W] with V = N*M = {N * M} start views, "
            f"got V={V} (shape {tuple(recon.shape)})"
        )
    if grid.shape != recon.shape[:1] + recon.shape[2:]:
        raise UserError(
            f"{OP}: grid must have shape {(B, *recon.shape[2:])} to match recon, "
            f"got {tuple(grid.shape)}"
        )
    if B * V * V > MAX_NUMEL:
        raise UserError(f"{OP}: output of {B}x{V}x{V} elements is too large")
    device = check_same_device(OP, recon=recon, grid=grid)
    use_native(OP, backend, device)  # an unknown or unavailable backend fails here, by name
    return torch.ops.pyskick.coverage_matrix(recon, grid, backend)


def _coverage_matrix(recon: Tensor, grid: Tensor, backend: str) -> Tensor:
    """The operator: the native kernel of the tensors' device, or the twin (inputs checked)."""
    check_not_differentiated(OP, recon=recon, grid=grid)
    device = recon.device
    if not use_native(OP, backend, device):
        _check_inputs_finite(recon, grid)
        return _reference.coverage_matrix(recon, grid)
    B, V, N, M = recon.shape[:4]
    out = torch.empty(B, V, V, dtype=torch.float32, device=device)
    if out.numel() == 0:
        return out
    # The kernels check finiteness in their own pass over the inputs: they set the flag when a
    # squared error was not finite, from a NaN/inf input (raised here, naming it) or from finite
    # values so large that their error overflowed float32 (a result, like the twin's). Reading
    # the 4-byte flag is the one wait for a GPU (no second pass over the inputs).
    flag = torch.zeros(1, dtype=torch.int32, device=device)
    launch(
        OP, device, recon.data_ptr(), grid.data_ptr(), out.data_ptr(), B, N, M,
        grid[0, 0, 0].numel(), flag.data_ptr(),
    )  # fmt: skip
    if bool(flag):
        _check_inputs_finite(recon, grid)
    return out


def _coverage_matrix_fake(recon: Tensor, grid: Tensor, backend: str) -> Tensor:
    B, V = recon.shape[:2]
    return recon.new_empty(B, V, V)


define_op(OP, _coverage_matrix, fake=_coverage_matrix_fake)


def _check_inputs_finite(recon: Tensor, grid: Tensor) -> None:
    """Reject NaN and infinite values: they would poison every utility of their target."""
    check_finite("recon", recon, op=OP)
    check_finite("grid", grid, op=OP)
