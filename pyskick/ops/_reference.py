"""Pure-PyTorch twins of the native kernels: the readable specification.

Each function has the same name and arguments as its public wrapper in :mod:`pyskick.ops`
(minus ``backend``) and assumes the wrapper has validated its inputs. They are written from
``docs/paper-reference.md`` (§2.4 moves, §5.2 NMS, §5.4 utility maps, §5.5 greedy coverage) and are
vectorised over the batch, which also makes them the "what a user would write in PyTorch"
baseline of the benchmarks. Deliberate deviations from the authors' code are listed in
``docs/deviations.md``.
"""

from __future__ import annotations

import torch
from torch import Tensor

from pyskick.ops._render_defaults import DEFAULT_LIGHTS


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
    """Normalised utility of every source view for every target view (docs/paper-reference.md §5.4).

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
    check_values: bool = True,
) -> tuple[Tensor, Tensor]:
    """Greedy coverage trajectories of the demonstration sidekick (docs/paper-reference.md §5.5).

    From each start, every step takes the action whose view adds the most to
    ``Cov(S) = sum_t min(sum_{s in unique(S)} U[s, t], 1)``; a view already in S adds exactly 0
    and ties go to the lowest action index. Gains are computed in float64.

    The paper's greedy rule is the same; its tie rule (last maximum) is a documented deviation.

    Args:
        coverage: ``[B, V, V]`` float32 utilities ``U[b, source, target]`` in [0, 1], ``V = N * M``.
        starts: ``[B, S]`` int64 start views.
        steps: number of actions per trajectory.
        n_elevations: N. n_azimuths: M.
        action_grid: ``(dN, dM)``, both odd; action ``(de + dN//2) * dM + (da + dM//2)``.
        wrap_azimuth: azimuth moves wrap (else clip). wrap_elevation: likewise for elevation.
        check_values: the public op's switch of its value checks; the twin makes none (the
            wrapper checks before calling it), so it only shares the signature.

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
    chosen.scatter_(1, current[:, None], True)
    actions = torch.zeros(B * S, steps, dtype=torch.int64, device=device)
    views = torch.zeros(B * S, steps + 1, dtype=torch.int64, device=device)
    views[:, 0] = current
    for k in range(steps):
        # With U in [0, 1], Cov(S + v) - Cov(S) = sum_t min(U[v, t], what is left of target t).
        residual = (1.0 - covered).clamp(min=0.0)
        elevation, azimuth = current // M, current % M
        candidates, gains = [], []
        for action in range(dN * dM):
            ne = _move(elevation, action // dM - dN // 2, N, wrap_elevation)
            na = _move(azimuth, action % dM - dM // 2, M, wrap_azimuth)
            view = ne * M + na
            gain = torch.minimum(U[sample, view], residual).sum(-1)
            gains.append(torch.where(chosen[rows, view], 0.0, gain))
            candidates.append(view)
        best = torch.stack(gains, dim=1).argmax(dim=1)  # first maximum: lowest action index
        view = torch.stack(candidates, dim=1)[rows, best]
        is_new = ~chosen[rows, view]
        covered = covered + torch.where(is_new[:, None], U[sample, view], 0.0)
        chosen.scatter_(1, view[:, None], True)
        actions[:, k] = best
        views[:, k + 1] = view
        current = view
    return actions.reshape(B, S, steps), views.reshape(B, S, steps + 1)


def nms_rewards(scores: Tensor, k: int, radius: int) -> Tensor:
    """Greedy non-maximum suppression of one-view score maps (docs/paper-reference.md §5.2).

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


# Faces the reference rasteriser tests at once (memory: S * S * _FACE_CHUNK doubles per array).
_FACE_CHUNK = 64


def _camera(elevation_deg: float, azimuth_deg: float, distance: float) -> list[list[float]]:
    """Camera position, image right, image up and forward for one view (see render_mesh_views).

    Uses :mod:`math` (the C library, as the native kernel) so both backends see the same bits.
    """
    import math

    e = elevation_deg * (math.pi / 180.0)
    a = azimuth_deg * (math.pi / 180.0)
    ce, se, ca, sa = math.cos(e), math.sin(e), math.cos(a), math.sin(a)
    position = [distance * (-(ce * sa)), distance * se, distance * (ce * ca)]
    right = [ca, 0.0, sa]
    up = [sa * se, ce, -(ca * se)]
    forward = [ce * sa, -se, -(ce * ca)]
    return [position, right, up, forward]


def render_mesh_views(
    vertices: Tensor,
    faces: Tensor,
    elevations_deg: Tensor,
    azimuths_deg: Tensor,
    *,
    image_size: int = 32,
    supersample: int = 4,
    lights: Tensor | None = None,
    ambient: float = 0.4,
    diffuse: float = 0.9,
    specular: float = 0.7,
    shininess: float = 15.0,
    albedo: float = 0.6,
    fov_deg: float = 40.0,
    distance: float = 3.0,
    background: float = 1.0,
) -> Tensor:
    """Z-buffer rendering of a mesh from an N x M camera grid (rules: ``render_mesh_views``).

    Works in float64 and follows the native kernel operation for operation: per camera, project
    and shade every vertex, test every supersampled pixel centre against chunks of faces with
    inclusive edge functions, keep the nearest face (largest 1/z, first index on ties), then
    box-filter the supersample blocks.

    Args:
        vertices: ``[P, 3]`` float32. faces: ``[F, 3]`` int32. elevations_deg: ``[N]`` float32.
        azimuths_deg: ``[M]`` float32. lights: ``[L, 4]`` float32 (direction, intensity); None
            for ``DEFAULT_LIGHTS`` (:mod:`pyskick.ops._render_defaults`).

    Returns:
        ``[N, M, image_size, image_size]`` float32 in [0, 1].
    """
    if lights is None:
        lights = DEFAULT_LIGHTS
    import math  # C-library trigonometry, as in the native kernel

    N, M, H, ss = elevations_deg.shape[0], azimuths_deg.shape[0], image_size, supersample
    S = H * ss
    out = torch.empty(N, M, H, H, dtype=torch.float32)
    p = vertices.double()
    f = faces.long()

    # Unit per-vertex normals: sums of adjacent faces' cross products, in face-corner order.
    e1 = p[f[:, 1]] - p[f[:, 0]]
    e2 = p[f[:, 2]] - p[f[:, 0]]
    cross = torch.stack(
        [
            e1[:, 1] * e2[:, 2] - e1[:, 2] * e2[:, 1],
            e1[:, 2] * e2[:, 0] - e1[:, 0] * e2[:, 2],
            e1[:, 0] * e2[:, 1] - e1[:, 1] * e2[:, 0],
        ],
        dim=1,
    )
    normals = torch.zeros_like(p).index_add_(0, f.reshape(-1), cross.repeat_interleave(3, dim=0))
    length = normals.square().sum(1).sqrt()
    normals = torch.where(length[:, None] > 0, normals / length.clamp_min(1e-300)[:, None], normals)

    light = lights.double()
    light_len = light[:, 0] * light[:, 0] + light[:, 1] * light[:, 1] + light[:, 2] * light[:, 2]
    light_dir = light[:, :3] / light_len.sqrt()[:, None]
    focal = 0.5 * S / math.tan(fov_deg * (math.pi / 180.0) * 0.5)
    centers = torch.arange(S, dtype=torch.float64) + 0.5
    qy = centers.repeat_interleave(S)  # pixel centres, row-major
    qx = centers.repeat(S)

    for n in range(N):
        for m in range(M):
            c, r, u, fw = _camera(float(elevations_deg[n]), float(azimuths_deg[m]), distance)
            d = p - torch.tensor(c, dtype=torch.float64)
            xc = d[:, 0] * r[0] + d[:, 2] * r[2]
            yc = d[:, 0] * u[0] + d[:, 1] * u[1] + d[:, 2] * u[2]
            zc = d[:, 0] * fw[0] + d[:, 1] * fw[1] + d[:, 2] * fw[2]
            in_front = zc >= 1e-3  # kNearPlane of the kernel
            iz = torch.where(in_front, 1.0 / zc, torch.zeros_like(zc))
            sx = 0.5 * S + focal * xc * iz
            sy = 0.5 * S - focal * yc * iz

            # Gouraud shade per vertex, two-sided (normal turned towards each light).
            v = -d
            v_len = v.square().sum(1).sqrt()
            v = torch.where(v_len[:, None] > 0, v / v_len.clamp_min(1e-300)[:, None], v)
            diff_sum = torch.zeros_like(zc)
            spec_sum = torch.zeros_like(zc)
            for ld, intensity in zip(light_dir.tolist(), light[:, 3].tolist(), strict=True):
                ndl = normals[:, 0] * ld[0] + normals[:, 1] * ld[1] + normals[:, 2] * ld[2]
                sgn = torch.where(ndl < 0, -1.0, 1.0).double()
                adl = ndl * sgn
                refl = [2.0 * adl * (sgn * normals[:, k]) - ld[k] for k in range(3)]
                rv = refl[0] * v[:, 0] + refl[1] * v[:, 1] + refl[2] * v[:, 2]
                spec = torch.where(rv > 0, rv.clamp_min(0.0).pow(shininess), 0.0)
                diff_sum = diff_sum + intensity * adl
                spec_sum = spec_sum + intensity * spec
            shade = (albedo * (ambient + diffuse * diff_sum) + specular * spec_sum).clamp(0, 1)

            zbuf = torch.zeros(S * S, dtype=torch.float64)
            color = torch.full((S * S,), float(background), dtype=torch.float64)
            for start in range(0, f.shape[0], _FACE_CHUNK):
                fc = f[start : start + _FACE_CHUNK]
                a, b, c_ = fc[:, 0], fc[:, 1], fc[:, 2]
                x0, y0, x1, y1, x2, y2 = sx[a], sy[a], sx[b], sy[b], sx[c_], sy[c_]
                area = (x1 - x0) * (y2 - y0) - (y1 - y0) * (x2 - x0)
                drawn = in_front[a] & in_front[b] & in_front[c_] & (area != 0)
                px, py = qx[:, None], qy[:, None]  # [S*S, 1] against [K] faces
                w0 = (x2 - x1) * (py - y1) - (y2 - y1) * (px - x1)
                w1 = (x0 - x2) * (py - y2) - (y0 - y2) * (px - x2)
                w2 = (x1 - x0) * (py - y0) - (y1 - y0) * (px - x0)
                positive = (w0 >= 0) & (w1 >= 0) & (w2 >= 0)
                negative = (w0 <= 0) & (w1 <= 0) & (w2 <= 0)
                inside = torch.where(area > 0, positive, negative) & drawn
                b0, b1, b2 = w0 / area, w1 / area, w2 / area
                depth = b0 * iz[a] + b1 * iz[b] + b2 * iz[c_]
                depth = torch.where(inside, depth, -torch.inf)
                best, k = depth.max(dim=1)  # first maximum: lowest face index in the chunk
                rows = torch.arange(S * S)
                shade_k = b0[rows, k] * shade[a[k]] + b1[rows, k] * shade[b[k]]
                shade_k = shade_k + b2[rows, k] * shade[c_[k]]
                closer = best > zbuf  # strict: earlier chunks (lower indices) win ties
                zbuf = torch.where(closer, best, zbuf)
                color = torch.where(closer, shade_k, color)

            blocks = color.reshape(H, ss, H, ss).permute(0, 2, 1, 3).reshape(H, H, ss * ss)
            out[n, m] = (blocks.sum(-1) / float(ss * ss)).clamp(0, 1).float()
    return out
