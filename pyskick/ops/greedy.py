"""Public wrapper of ``greedy_coverage`` and its operator ``torch.ops.pyskick.greedy_coverage``."""

from __future__ import annotations

import torch
from torch import Tensor

from pyskick.errors import UserError, UserTypeError
from pyskick.ops import _reference
from pyskick.ops._checks import (
    check_bool,
    check_index_range,
    check_int,
    check_not_differentiated,
    check_same_device,
    check_tensor,
    check_unit_range,
)
from pyskick.ops._dispatch import Backend, launch, use_native
from pyskick.ops._library import define_op

OP = "greedy_coverage"


def greedy_coverage(
    coverage: Tensor,
    starts: Tensor,
    steps: int,
    *,
    n_elevations: int,
    n_azimuths: int,
    action_grid: tuple[int, int] = (3, 5),
    wrap_azimuth: bool = True,
    wrap_elevation: bool = False,
    backend: Backend = "auto",
    check_values: bool = True,
) -> tuple[Tensor, Tensor]:
    """The demonstration sidekick's greedy coverage trajectories (docs/paper-reference.md §5.5).

    From every start, each step takes the reachable action (``dN x dM`` neighbourhood, the
    environment's wrap/clip rules) whose view adds most to the saturated, duplicate-free coverage
    ``Cov(S) = sum_t min(sum_{s in unique(S)} U[s, t], 1)``. A revisited or clipped-in-place view
    adds exactly 0; ties go to the lowest action index.

    Args:
        coverage: ``[B, V, V]`` float32 ``U[b, source, target]`` in [0, 1] (see
            ``coverage_matrix``).
        starts: ``[B, S]`` int64 start views in ``[0, V)``, ``v = n * M + m``.
        steps: actions per trajectory (T - 1 for an episode of T glimpses).
        n_elevations: N. n_azimuths: M. ``N * M`` must equal V.
        action_grid: ``(dN, dM)``, positive and odd; action ``(de + dN//2) * dM + (da + dM//2)``.
        wrap_azimuth: azimuth moves wrap around (else clip).
        wrap_elevation: elevation moves wrap around (else clip).
        backend: ``"auto"``, ``"native"`` or ``"reference"``.
        check_values: check that ``starts`` lie in ``[0, V)`` and ``coverage`` in [0, 1]
            (reads the values: on a GPU, a wait for the device). False trusts them, for
            callers that checked them where they were made (the demonstration sidekick checks
            its coverage when it loads it, and the trainer draws the starts in range); values
            out of range then give undefined trajectories or out-of-bounds reads.

    Returns:
        ``(actions [B, S, steps], views [B, S, steps + 1])``, both int64; ``views[..., 0]`` are
        the starts.
    """
    coverage = check_tensor("coverage", coverage, op=OP, dtypes=(torch.float32,), ndim=3)
    starts = check_tensor("starts", starts, op=OP, dtypes=(torch.int64,), ndim=2)
    steps = check_int("steps", steps, op=OP)
    N = check_int("n_elevations", n_elevations, op=OP, minimum=1)
    M = check_int("n_azimuths", n_azimuths, op=OP, minimum=1)
    if not (isinstance(action_grid, tuple | list) and len(action_grid) == 2):
        raise UserTypeError(f"{OP}: action_grid must be a pair (dN, dM), got {action_grid!r}")
    wrap_azimuth = check_bool("wrap_azimuth", wrap_azimuth, op=OP)
    wrap_elevation = check_bool("wrap_elevation", wrap_elevation, op=OP)
    check_values = check_bool("check_values", check_values, op=OP)
    dN = check_int("action_grid[0]", action_grid[0], op=OP, minimum=1)
    dM = check_int("action_grid[1]", action_grid[1], op=OP, minimum=1)
    if dN % 2 == 0 or dM % 2 == 0:
        raise UserError(f"{OP}: action_grid must be odd in both axes, got {tuple(action_grid)}")
    B, V = coverage.shape[:2]
    if coverage.shape != (B, N * M, N * M):
        raise UserError(
            f"{OP}: coverage must have shape [B, {N * M}, {N * M}] for a {N}x{M} grid, "
            f"got {tuple(coverage.shape)}"
        )
    if starts.shape[0] != B:
        raise UserError(f"{OP}: starts must have shape [{B}, S], got {tuple(starts.shape)}")
    device = check_same_device(OP, coverage=coverage, starts=starts)
    # Resolve the backend before reading values: a device without kernels (e.g. "meta") must
    # get the backend error, not a failure to read its data.
    native = use_native(OP, backend, device)
    if check_values:
        check_index_range("starts", starts, V, op=OP)
        if not native or device.type != "cpu":  # the CPU kernel checks the range in its pass
            check_unit_range("coverage", coverage, op=OP)
    return torch.ops.pyskick.greedy_coverage(
        coverage, starts, steps, N, M, dN, dM, wrap_azimuth, wrap_elevation, backend
    )


def _greedy_coverage(
    coverage: Tensor,
    starts: Tensor,
    steps: int,
    n_elevations: int,
    n_azimuths: int,
    d_elevation: int,
    d_azimuth: int,
    wrap_azimuth: bool,
    wrap_elevation: bool,
    backend: str,
) -> tuple[Tensor, Tensor]:
    """The operator: the native kernel of the tensors' device, or the twin (inputs checked)."""
    check_not_differentiated(OP, coverage=coverage)
    device = coverage.device
    if not use_native(OP, backend, device):
        return _reference.greedy_coverage(
            coverage,
            starts,
            steps,
            n_elevations=n_elevations,
            n_azimuths=n_azimuths,
            action_grid=(d_elevation, d_azimuth),
            wrap_azimuth=wrap_azimuth,
            wrap_elevation=wrap_elevation,
        )
    B, S = starts.shape
    actions = torch.zeros(B, S, steps, dtype=torch.int64, device=device)
    views = torch.empty(B, S, steps + 1, dtype=torch.int64, device=device)
    if B * S == 0:
        return actions, views
    launch(
        OP,
        device,
        coverage.data_ptr(),
        starts.data_ptr(),
        actions.data_ptr(),
        views.data_ptr(),
        B,
        S,
        steps,
        n_elevations,
        n_azimuths,
        d_elevation,
        d_azimuth,
        wrap_azimuth,
        wrap_elevation,
    )
    return actions, views


def _greedy_coverage_fake(
    coverage: Tensor,
    starts: Tensor,
    steps: int,
    n_elevations: int,
    n_azimuths: int,
    d_elevation: int,
    d_azimuth: int,
    wrap_azimuth: bool,
    wrap_elevation: bool,
    backend: str,
) -> tuple[Tensor, Tensor]:
    B, S = starts.shape
    return starts.new_empty(B, S, steps), starts.new_empty(B, S, steps + 1)


define_op(OP, _greedy_coverage, fake=_greedy_coverage_fake)
