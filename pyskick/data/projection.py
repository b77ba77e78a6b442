"""Gnomonic (rectilinear) projection of panoramas into viewgrids.

World frame (the OpenGL cubemap frame): +Y up, azimuth 0 looks at +Z, and turning right from +Z
faces +X. A camera at azimuth ``a`` (increasing = turning right) and elevation ``e`` looks along
``(sin a cos e, sin e, cos a cos e)``. Equirectangular images map longitude ``a`` in
``[-180, 180)`` left to right with ``a = 0`` at the centre column, and latitude from +90 (top row)
to -90 (bottom row). Cubemap faces follow the OpenGL table of face coordinates, which makes every
face an upright, unmirrored picture as seen from the centre of the cube (posz = front,
posx = right, negx = left, posy = up, negy = down, negz = back).

Every view pixel averages ``supersample x supersample`` bilinear samples (antialiasing); azimuth
wraps around, latitude clamps at the poles.
"""

from __future__ import annotations

import functools
import math

import torch
import torch.nn.functional as F

from pyskick.data.spec import GridSpec

CUBE_FACES = ("posx", "negx", "posy", "negy", "posz", "negz")


def view_directions(spec: GridSpec, supersample: int = 1) -> torch.Tensor:
    """Unit ray direction of every (sub)pixel of every view.

    Args:
        spec: grid geometry (elevations, azimuths, field of view, view size).
        supersample: samples per view pixel along each axis.

    Returns:
        float64 ``[N, M, S, S, 3]`` with ``S = view_size * supersample``; row 0 of a view is
        its top, column 0 its left.
    """
    if supersample < 1:
        raise ValueError(f"supersample must be >= 1, got {supersample}")
    size = spec.view_size * supersample
    half = math.tan(math.radians(spec.fov_deg) / 2.0)
    # Pixel centres on the image plane at distance 1, x to the right, y up.
    ticks = (torch.arange(size, dtype=torch.float64) + 0.5) / size * 2.0 - 1.0
    x = (ticks * half).view(1, size)
    y = (-ticks * half).view(size, 1)
    az = torch.tensor(spec.azimuths_deg, dtype=torch.float64).deg2rad().view(1, -1, 1, 1)
    el = torch.tensor(spec.elevations_deg, dtype=torch.float64).deg2rad().view(-1, 1, 1, 1)
    sa, ca, se, ce = az.sin(), az.cos(), el.sin(), el.cos()
    zero = torch.zeros_like(sa)
    forward = (sa * ce, se.expand_as(sa * ce), ca * ce)
    right = (ca, zero, -sa)
    up = (-sa * se, ce.expand_as(sa * se), -ca * se)
    d = torch.stack([f + x * r + y * u for f, r, u in zip(forward, right, up, strict=True)], -1)
    return d / d.norm(dim=-1, keepdim=True)


def _views_from_samples(samples: torch.Tensor, spec: GridSpec, supersample: int) -> torch.Tensor:
    """Average supersamples and lay out views: ``[B, C, N*S, M*S]`` float -> uint8 viewgrid."""
    pooled = F.avg_pool2d(samples, supersample) if supersample > 1 else samples
    b, c = pooled.shape[:2]
    n, m, h = spec.n_elevations, spec.n_azimuths, spec.view_size
    grid = pooled.view(b, c, n, h, m, h).permute(0, 2, 4, 1, 3, 5)
    return grid.round().clamp_(0, 255).to(torch.uint8).contiguous()


def _layout(dirs: torch.Tensor) -> torch.Tensor:
    """``[N, M, S, S, 3]`` -> ``[N*S, M*S, 3]`` so that one grid_sample call covers all views."""
    n, m, s = dirs.shape[:3]
    return dirs.permute(0, 2, 1, 3, 4).reshape(n * s, m * s, 3)


def _rotated(dirs: torch.Tensor, transform: torch.Tensor | None) -> torch.Tensor:
    """Directions ``[..., 3]`` mapped by a 3x3 ``transform`` (None: unchanged)."""
    if transform is None:
        return dirs
    matrix = torch.as_tensor(transform, dtype=torch.float64)
    if matrix.shape != (3, 3):
        raise ValueError(f"transform must be a 3x3 matrix, got shape {tuple(matrix.shape)}")
    return dirs @ matrix.T


@functools.lru_cache(maxsize=16)
def _equirect_grid(spec: GridSpec, supersample: int, hp: int, wp: int) -> torch.Tensor:
    """grid_sample coordinates ``[N*S, M*S, 2]`` into a panorama padded by one column per side."""
    return _equirect_coordinates(_layout(view_directions(spec, supersample)), hp, wp)


def _equirect_coordinates(dirs: torch.Tensor, hp: int, wp: int) -> torch.Tensor:
    """Directions ``[A, B, 3]`` -> grid_sample coordinates ``[A, B, 2]`` (padded panorama)."""
    lon = torch.atan2(dirs[..., 0], dirs[..., 2])  # 0 = +Z, positive = turning right
    lat = torch.asin(dirs[..., 1].clamp(-1.0, 1.0))
    # Pixel coordinates with centres at integers; one wrapped column is padded on each side.
    u = torch.remainder((lon / (2 * math.pi) + 0.5) * wp - 0.5, wp) + 1.0
    v = ((0.5 - lat / math.pi) * hp - 0.5).clamp(0.0, hp - 1.0)
    return torch.stack([u / (wp + 1) * 2 - 1, v / max(hp - 1, 1) * 2 - 1], -1).float()


def equirect_to_viewgrid(
    panoramas: torch.Tensor,
    spec: GridSpec,
    *,
    supersample: int = 2,
    transform: torch.Tensor | None = None,
) -> torch.Tensor:
    """Cut equirectangular panoramas into viewgrids.

    Args:
        panoramas: ``[B, C, Hp, Wp]`` uint8 or float (0-255), any width; ``C == spec.channels``.
        spec: the viewgrid geometry.
        supersample: samples per view pixel along each axis (antialiasing).
        transform: optional ``[3, 3]`` matrix taking the camera rig's ray directions to the
            world directions sampled (a rotation, possibly times a mirror; see
            :func:`rig_transform`); None samples the rig as it is.

    Returns:
        uint8 ``[B, N, M, C, H, W]``.
    """
    if panoramas.dim() != 4 or panoramas.shape[1] != spec.channels:
        raise ValueError(
            f"panoramas must be [B, {spec.channels}, Hp, Wp], got shape {tuple(panoramas.shape)}"
        )
    _, _, hp, wp = panoramas.shape
    if transform is None:
        grid = _equirect_grid(spec, supersample, hp, wp)
    else:
        dirs = _rotated(_layout(view_directions(spec, supersample)), transform)
        grid = _equirect_coordinates(dirs, hp, wp)
    src = panoramas.float()
    src = torch.cat([src[..., -1:], src, src[..., :1]], dim=-1)
    grid = grid.unsqueeze(0).expand(src.shape[0], *grid.shape)
    samples = F.grid_sample(src, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return _views_from_samples(samples, spec, supersample)


def _face_coordinates(dirs: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Face index (order of ``CUBE_FACES``) and face coordinates s, t in [0, 1] of directions.

    s runs left to right and t top to bottom of the face image (OpenGL cube map table).
    """
    x, y, z = dirs.unbind(-1)
    ax, ay, az = x.abs(), y.abs(), z.abs()
    major = torch.stack([ax, ay, az], -1).argmax(-1)
    face = torch.where(
        major == 0,
        torch.where(x > 0, 0, 1),
        torch.where(major == 1, torch.where(y > 0, 2, 3), torch.where(z > 0, 4, 5)),
    )
    # (sc, tc, ma) per face, in CUBE_FACES order.
    sc = torch.stack([-z, z, x, x, x, -x], -1).gather(-1, face.unsqueeze(-1)).squeeze(-1)
    tc = torch.stack([-y, -y, z, -z, -y, -y], -1).gather(-1, face.unsqueeze(-1)).squeeze(-1)
    ma = torch.stack([ax, ax, ay, ay, az, az], -1).gather(-1, face.unsqueeze(-1)).squeeze(-1)
    return face, (sc / ma + 1) / 2, (tc / ma + 1) / 2


def cubemap_to_viewgrid(
    faces: torch.Tensor,
    spec: GridSpec,
    *,
    supersample: int = 2,
    transform: torch.Tensor | None = None,
) -> torch.Tensor:
    """Cut cubemaps into viewgrids by sampling the faces directly.

    Args:
        faces: ``[B, 6, C, F, F]`` uint8 or float (0-255), faces in ``CUBE_FACES`` order.
        spec: the viewgrid geometry.
        supersample: samples per view pixel along each axis (antialiasing).
        transform: optional ``[3, 3]`` rig-to-world matrix, as in :func:`equirect_to_viewgrid`.

    Returns:
        uint8 ``[B, N, M, C, H, W]``.
    """
    if faces.dim() != 5 or faces.shape[1] != 6 or faces.shape[2] != spec.channels:
        raise ValueError(
            f"faces must be [B, 6, {spec.channels}, F, F], got shape {tuple(faces.shape)}"
        )
    if faces.shape[3] != faces.shape[4]:
        raise ValueError(f"cube faces must be square, got {faces.shape[3]}x{faces.shape[4]}")
    b, _, c, f, _ = faces.shape
    face, s, t = _face_coordinates(_rotated(_layout(view_directions(spec, supersample)), transform))
    # Faces side by side in one strip; coordinates are clamped inside their own face so that
    # bilinear filtering never blends two faces.
    px = (s * f - 0.5).clamp(0.0, f - 1.0) + face * f
    py = (t * f - 0.5).clamp(0.0, f - 1.0)
    grid = torch.stack([px / (6 * f - 1) * 2 - 1, py / max(f - 1, 1) * 2 - 1], -1).float()
    strip = faces.float().permute(0, 2, 3, 1, 4).reshape(b, c, f, 6 * f)
    grid = grid.unsqueeze(0).expand(b, *grid.shape)
    samples = F.grid_sample(strip, grid, mode="bilinear", padding_mode="border", align_corners=True)
    return _views_from_samples(samples, spec, supersample)


def rig_transform(
    yaw_deg: float = 0.0, pitch_deg: float = 0.0, roll_deg: float = 0.0, mirror: bool = False
) -> torch.Tensor:
    """The ``[3, 3]`` float64 rig-to-world matrix of a turned (and possibly mirrored) camera rig.

    The rig is rolled about its forward axis (+Z, positive = clockwise as seen by the camera),
    pitched about its right axis (+X, positive = looking up), then yawed about the up axis (+Y,
    positive = turning right, so ``yaw_deg = 45`` shifts a 45-degree-step viewgrid by one
    column). ``mirror`` then reflects the world left-right (``x -> -x``), which is the horizontal
    flip of an equirectangular image about its centre column: azimuth ``a`` becomes ``-a`` and
    every view is seen mirrored.
    """
    y, p, r = (math.radians(v) for v in (yaw_deg, pitch_deg, roll_deg))
    yaw = torch.tensor(
        [[math.cos(y), 0.0, math.sin(y)], [0.0, 1.0, 0.0], [-math.sin(y), 0.0, math.cos(y)]],
        dtype=torch.float64,
    )
    pitch = torch.tensor(
        [[1.0, 0.0, 0.0], [0.0, math.cos(p), math.sin(p)], [0.0, -math.sin(p), math.cos(p)]],
        dtype=torch.float64,
    )
    roll = torch.tensor(
        [[math.cos(r), math.sin(r), 0.0], [-math.sin(r), math.cos(r), 0.0], [0.0, 0.0, 1.0]],
        dtype=torch.float64,
    )
    flip = torch.diag(torch.tensor([-1.0 if mirror else 1.0, 1.0, 1.0], dtype=torch.float64))
    return flip @ yaw @ pitch @ roll


def equirect_to_cubemap(
    panoramas: torch.Tensor, face_size: int, *, supersample: int = 2
) -> torch.Tensor:
    """Render the six 90-degree cube faces of equirectangular panoramas.

    Args:
        panoramas: ``[B, C, Hp, Wp]`` uint8 or float (0-255).
        face_size: side of each face in pixels.
        supersample: samples per face pixel along each axis.

    Returns:
        uint8 ``[B, 6, C, F, F]``, faces in ``CUBE_FACES`` order.
    """
    c = panoramas.shape[1]
    # Each face is the view of a 90-degree camera (azimuth, elevation); looking straight up or
    # down from azimuth 0 puts -Z at the top of posy and +Z at the top of negy, as in the OpenGL
    # table.
    cameras = [(90.0, 0.0), (270.0, 0.0), (0.0, 90.0), (0.0, -90.0), (0.0, 0.0), (180.0, 0.0)]
    out = []
    for azimuth, elevation in cameras:
        spec = GridSpec(
            n_elevations=1,
            n_azimuths=1,
            channels=c,
            view_size=face_size,
            elevations_deg=(elevation,),
            azimuths_deg=(azimuth,),
            fov_deg=90.0,
            channel_mean=(0.0,) * c,
            preset="custom",
        )
        out.append(equirect_to_viewgrid(panoramas, spec, supersample=supersample)[:, 0, 0])
    return torch.stack(out, 1)
