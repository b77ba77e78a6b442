"""Pure-PyTorch twins of the native kernels: the readable specification.

Each function has the same name and arguments as its public wrapper in :mod:`pyskick.ops`
(minus ``backend``) and assumes the wrapper has validated its inputs. They are written from
``paper-reference.md`` (§2.4 moves, §5.2 NMS, §5.4 utility maps, §5.5 greedy coverage) and are
vectorised over the batch, which also makes them the "what a user would write in PyTorch"
baseline of the benchmarks. Deliberate deviations from the authors' code are listed in
``docs/deviations.md``.
"""

from __future__ import annotations

import torch
from torch import Tensor


def rotate_viewgrid(
    grid: Tensor,
    azimuth_shift: Tensor,
    elevation_shift: Tensor | None = None,
    *,
    inverse: bool = False,
) -> Tensor:
    """Roll each sample's viewgrid: ``out[b, n, m] = grid[b, (n + e_b) % N, (m + a_b) % M]``.

    Args:
        grid: ``[B, N, M, C, H, W]`` uint8 or float32.
        azimuth_shift: ``[B]`` int64, any integer (taken modulo M).
        elevation_shift: ``[B]`` int64 or None (no elevation roll).
        inverse: roll by the negated shifts, undoing a forward roll.

    Returns:
        ``[B, N, M, C, H, W]``, same dtype as ``grid``.
    """
    B, N, M = grid.shape[:3]
    if N == 0 or M == 0:  # nothing to roll, and the shifts cannot be reduced modulo 0
        return grid.clone()
    a = azimuth_shift % M  # reduce first: negating a reduced shift cannot overflow
    e = elevation_shift % N if elevation_shift is not None else torch.zeros_like(a)
    if inverse:
        a, e = (M - a) % M, (N - e) % N
    device = grid.device
    src_n = (torch.arange(N, device=device)[None, :] + e[:, None]) % N  # [B, N]
    src_m = (torch.arange(M, device=device)[None, :] + a[:, None]) % M  # [B, M]
    b = torch.arange(B, device=device)[:, None, None]
    return grid[b, src_n[:, :, None], src_m[:, None, :]]


def coverage_matrix(recon: Tensor, grid: Tensor) -> Tensor:
    """Normalised utility of every source view for every target view (paper-reference §5.4).

    Args:
        recon: ``[B, V, N, M, C, H, W]`` float32, the one-view reconstruction from each start view
            ``s = (i, j)``, in that start's frame (slot m holds absolute azimuth ``(j + m) % M``).
        grid: ``[B, N, M, C, H, W]`` float32, the true preprocessed grid, absolute frame.

    Returns:
        ``[B, V, V]`` float32 ``U[b, s, t]``: ``u = 1 / (1000 * err + 1e-8)`` where ``err`` is the
        summed squared error of source s's reconstruction of target t, min-max normalised over
        the sources ``s`` for each target ``t`` into [0, 1].
    """
    B, V, _, M = recon.shape[:4]
    if V == 0:  # no sources to normalise over
        return torch.empty(B, 0, 0, dtype=torch.float32, device=recon.device)
    truth = grid.double()
    utility = torch.empty(B, V, V, dtype=torch.float64, device=recon.device)
    for s in range(V):
        start_azimuth = torch.full((B,), s % M, dtype=torch.int64, device=recon.device)
        absolute = rotate_viewgrid(recon[:, s].double(), start_azimuth, inverse=True)
        err = (absolute - truth).square().flatten(3).sum(-1)  # [B, N, M]
        utility[:, s] = 1.0 / (1000.0 * err.reshape(B, V) + 1e-8)
    lo = utility.amin(dim=1, keepdim=True)
    hi = utility.amax(dim=1, keepdim=True)
    return ((utility - lo) / (hi - lo + 1e-8)).float()


def _move(index: Tensor, delta: int, size: int, wrap: bool) -> Tensor:
    """Move along one axis with the environment's wrap (modulo) or clip rule."""
    moved = index + delta
    return moved % size if wrap else moved.clamp(0, size - 1)


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
) -> tuple[Tensor, Tensor]:
    """Greedy coverage trajectories of the demonstration sidekick (paper-reference §5.5).

    From each start, every step takes the action whose view adds the most to
    ``Cov(S) = sum_t min(sum_{s in unique(S)} U[s, t], 1)``; a view already in S adds exactly 0
    and ties go to the lowest action index. Gains are computed in float64.

    Args:
        coverage: ``[B, V, V]`` float32 utilities ``U[b, source, target]``, ``V = N * M``.
        starts: ``[B, S]`` int64 start views.
        steps: number of actions per trajectory.
        n_elevations: N. n_azimuths: M.
        action_grid: ``(dN, dM)``, both odd; action ``(de + dN//2) * dM + (da + dM//2)``.
        wrap_azimuth: azimuth moves wrap (else clip). wrap_elevation: likewise for elevation.

    Returns:
        actions ``[B, S, steps]`` int64 and views ``[B, S, steps + 1]`` int64.
    """
    B, V, _ = coverage.shape
    S = starts.shape[1]
    dN, dM = action_grid
    N, M = n_elevations, n_azimuths
    device = coverage.device
    U = coverage.double()
    sample = torch.arange(B, device=device).repeat_interleave(S)  # [B*S]
    rows = torch.arange(B * S, device=device)
    current = starts.reshape(-1).clone()
    covered = U[sample, current]  # [B*S, V]: running sum of utilities of the chosen views
    chosen = torch.zeros(B * S, V, dtype=torch.bool, device=device)
    chosen[rows, current] = True
    actions = torch.zeros(B * S, steps, dtype=torch.int64, device=device)
    views = torch.zeros(B * S, steps + 1, dtype=torch.int64, device=device)
    views[:, 0] = current
    saturated = covered.clamp(max=1.0)
    for k in range(steps):
        elevation, azimuth = current // M, current % M
        candidates, gains = [], []
        for action in range(dN * dM):
            ne = _move(elevation, action // dM - dN // 2, N, wrap_elevation)
            na = _move(azimuth, action % dM - dM // 2, M, wrap_azimuth)
            view = ne * M + na
            gain = ((covered + U[sample, view]).clamp(max=1.0) - saturated).sum(-1)
            gains.append(torch.where(chosen[rows, view], 0.0, gain))
            candidates.append(view)
        best = torch.stack(gains, dim=1).argmax(dim=1)  # first maximum: lowest action index
        view = torch.stack(candidates, dim=1)[rows, best]
        is_new = ~chosen[rows, view]
        covered = covered + torch.where(is_new[:, None], U[sample, view], 0.0)
        saturated = covered.clamp(max=1.0)
        chosen[rows, view] = True
        actions[:, k] = best
        views[:, k + 1] = view
        current = view
    return actions.reshape(B, S, steps), views.reshape(B, S, steps + 1)


def nms_rewards(scores: Tensor, k: int, radius: int) -> Tensor:
    """Greedy non-maximum suppression of one-view score maps (paper-reference §5.2).

    ``k`` times: keep the highest cell not yet suppressed (ties: lowest row-major index) and
    suppress every cell within Chebyshev distance ``radius``, azimuth wrapping and elevation
    clipping (the authors also wrapped elevation; see ``docs/deviations.md``).

    Args:
        scores: ``[B, N, M]`` float32.
        k: number of peaks. radius: suppression radius.

    Returns:
        ``[B, N, M]`` float32: the scores at the kept peaks, 0 elsewhere.
    """
    B, N, M = scores.shape
    device = scores.device
    flat = scores.reshape(B, N * M)
    n, m = torch.arange(N, device=device), torch.arange(M, device=device)
    d_elev = (n[:, None] - n[None, :]).abs()  # [N, N], elevation clips: plain distance
    d_azim = (m[:, None] - m[None, :]).abs()
    d_azim = torch.minimum(d_azim, M - d_azim)  # [M, M], azimuth wraps: ring distance
    near = (d_elev[:, None, :, None] <= radius) & (d_azim[None, :, None, :] <= radius)
    near = near.reshape(N * M, N * M)
    out = torch.zeros_like(flat)
    available = torch.ones_like(flat, dtype=torch.bool)
    rows = torch.arange(B, device=device)
    # Each peak suppresses at least itself, so after N*M peaks nothing is left (k may be huge).
    for _ in range(min(k, N * M)):
        masked = torch.where(available, flat, -torch.inf)
        peak = masked.argmax(dim=1)  # first maximum: lowest index
        keep = available.any(dim=1)
        out[rows[keep], peak[keep]] = flat[rows[keep], peak[keep]]
        available &= ~near[peak]
    return out.reshape(B, N, M)
