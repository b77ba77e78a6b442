"""Public wrapper of ``rotate_viewgrid`` and its operator ``torch.ops.pyskick.rotate_viewgrid``."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from pyskick.errors import UserError
from pyskick.ops import _reference
from pyskick.ops._checks import check_bool, check_same_device, check_tensor
from pyskick.ops._dispatch import Backend, launch, use_native
from pyskick.ops._library import define_autograd, define_op

OP = "rotate_viewgrid"


def rotate_viewgrid(
    grid: Tensor,
    azimuth_shift: Tensor,
    elevation_shift: Tensor | None = None,
    *,
    inverse: bool = False,
    backend: Backend = "auto",
) -> Tensor:
    """Roll each sample's viewgrid along azimuth (and optionally elevation).

    ``out[b, n, m] = grid[b, (n + e_b) mod N, (m + a_b) mod M]``; ``inverse=True`` rolls by the
    negated shifts and undoes a forward roll. With ``a_b`` the start azimuth this puts a grid in
    the start-relative frame (slot m = absolute azimuth ``a_b + m``); the inverse takes decoded
    grids back to the absolute frame. Differentiable in a float32 ``grid`` (the gradient is
    rolled back); runs as the operator ``torch.ops.pyskick.rotate_viewgrid``.

    Args:
        grid: ``[B, N, M, C, H, W]`` uint8 or float32.
        azimuth_shift: ``[B]`` int64; any value, taken modulo M.
        elevation_shift: ``[B]`` int64 or None; any value, taken modulo N.
        inverse: roll by the negated shifts.
        backend: ``"auto"`` (native when built for the device), ``"native"`` or ``"reference"``.

    Returns:
        A new ``[B, N, M, C, H, W]`` tensor of the dtype and device of ``grid``.
    """
    grid = check_tensor(
        "grid", grid, op=OP, dtypes=(torch.uint8, torch.float32), ndim=6, detach=False
    )
    azimuth_shift = check_tensor(
        "azimuth_shift", azimuth_shift, op=OP, dtypes=(torch.int64,), ndim=1
    )
    B = grid.shape[0]
    if azimuth_shift.shape[0] != B:
        raise UserError(
            f"{OP}: azimuth_shift must have shape [{B}] to match grid, "
            f"got {tuple(azimuth_shift.shape)}"
        )
    tensors = {"grid": grid, "azimuth_shift": azimuth_shift}
    if elevation_shift is not None:
        elevation_shift = check_tensor(
            "elevation_shift", elevation_shift, op=OP, dtypes=(torch.int64,), ndim=1
        )
        if elevation_shift.shape[0] != B:
            raise UserError(
                f"{OP}: elevation_shift must have shape [{B}] to match grid, "
                f"got {tuple(elevation_shift.shape)}"
            )
        tensors["elevation_shift"] = elevation_shift
    inverse = check_bool("inverse", inverse, op=OP)
    device = check_same_device(OP, **tensors)
    use_native(OP, backend, device)  # an unknown or unavailable backend fails here, by name
    return torch.ops.pyskick.rotate_viewgrid(grid, azimuth_shift, elevation_shift, inverse, backend)


def _rotate_viewgrid(
    grid: Tensor,
    azimuth_shift: Tensor,
    elevation_shift: Tensor | None,
    inverse: bool,
    backend: str,
) -> Tensor:
    """The operator: the native kernel of the tensors' device, or the twin (inputs checked)."""
    device = grid.device
    if not use_native(OP, backend, device):
        return _reference.rotate_viewgrid(grid, azimuth_shift, elevation_shift, inverse=inverse)
    out = torch.empty_like(grid)
    if grid.numel() == 0:
        return out
    B, N, M = grid.shape[:3]
    launch(
        OP,
        device,
        grid.data_ptr(),
        out.data_ptr(),
        B,
        N,
        M,
        grid[0, 0, 0].numel() * grid.element_size(),
        azimuth_shift.data_ptr(),
        elevation_shift.data_ptr() if elevation_shift is not None else 0,
        inverse,
    )
    return out


def _rotate_viewgrid_fake(
    grid: Tensor,
    azimuth_shift: Tensor,
    elevation_shift: Tensor | None,
    inverse: bool,
    backend: str,
) -> Tensor:
    return torch.empty_like(grid)


define_op(OP, _rotate_viewgrid, fake=_rotate_viewgrid_fake)


def _setup_context(ctx: Any, inputs: tuple[Any, ...], output: Tensor) -> None:
    _, azimuth_shift, elevation_shift, inverse, backend = inputs
    ctx.save_for_backward(azimuth_shift, elevation_shift)
    ctx.inverse, ctx.backend = inverse, backend


def _backward(ctx: Any, grad: Tensor) -> tuple[Tensor | None, ...]:
    """The gradient of a roll is the opposite roll of the gradient."""
    azimuth_shift, elevation_shift = ctx.saved_tensors
    rolled = torch.ops.pyskick.rotate_viewgrid(
        grad.contiguous(), azimuth_shift, elevation_shift, not ctx.inverse, ctx.backend
    )
    return rolled, None, None, None, None


define_autograd(OP, _backward, setup_context=_setup_context)
