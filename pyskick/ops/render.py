"""Public wrapper of ``render_mesh_views``: a z-buffer mesh renderer for look-around viewgrids."""

from __future__ import annotations

import math

import torch
from torch import Tensor

from pyskick.errors import UserError, UserTypeError
from pyskick.ops import _reference
from pyskick.ops._checks import check_finite, check_int, check_tensor
from pyskick.ops._dispatch import Backend, launch, use_native
from pyskick.ops._render_defaults import DEFAULT_LIGHTS

OP = "render_mesh_views"

MAX_IMAGE_SIZE = 4096
MAX_SUPERSAMPLE = 16
# Supersampled side: each thread keeps two float64 buffers of this side squared (256 MiB).
MAX_RENDER_SIZE = 4096


def _check_float(name: str, value: object, lo: float, hi: float, *, open_lo: bool = False) -> float:
    """Check a finite real number in ``[lo, hi]`` (``(lo, hi)`` when ``open_lo``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise UserTypeError(f"{OP}: {name} must be a number, got {type(value).__name__} {value!r}")
    x = float(value)
    below = x <= lo if open_lo else x < lo
    if not math.isfinite(x) or below or x > hi:
        bounds = f"({lo}, {hi}]" if open_lo else f"[{lo}, {hi}]"
        raise UserError(f"{OP}: {name} must be finite and in {bounds}, got {value!r}")
    return x


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
    backend: Backend = "auto",
) -> Tensor:
    """Render a triangle mesh from every camera of an elevation x azimuth grid (grayscale).

    Camera convention (world frame Y up, the object's front facing +Z, as the meshes of
    ``pyskick.data.meshes``): the camera for elevation ``e`` and azimuth ``a`` sits at
    ``distance * (-cos e sin a, sin e, cos e cos a)`` and looks at the origin with the world's
    up direction at the top of the image (image right ``(cos a, 0, sin a)``). Azimuth 0 looks
    at the front; increasing azimuth moves the camera clockwise seen from above (the camera
    turns right around the object: +Z, then -X at 90°); positive elevation looks down from
    above. Pass elevations in decreasing order to put "camera above" on row 0 of the grid.
    Projection is perspective with a ``fov_deg`` field of view; the defaults (40°, distance 3)
    fit the unit sphere with a small margin, so give meshes normalised by
    ``pyskick.data.meshes.normalize_mesh``.

    Rasterisation: a z-buffer at ``image_size * supersample`` pixels, pixel centres at half
    integers, inclusive edges, nearest face wins with ties to the lowest face index; faces with
    a vertex less than 1e-3 in front of the camera are dropped, not clipped. Each output pixel is
    the mean of its ``supersample x supersample`` block.

    Shading (Gouraud, two-sided for CAD meshes of inconsistent winding): vertex normals are the
    sums of the adjacent faces' area-weighted normals; a vertex's value is
    ``albedo * (ambient + diffuse * sum_l I_l |n.l_l|) + specular * sum_l I_l max(r_l.v, 0) **
    shininess`` (``r_l`` reflects light l about the normal turned towards it, ``v`` points to the
    camera), clamped to [0, 1] and interpolated across faces. Defaults are the ModelNet-Hard
    material of docs/paper-reference.md §1.3 (ambient 0.4, diffuse 0.9, specular 0.7, exponent 15).

    Args:
        vertices: ``[P, 3]`` float32, finite.
        faces: ``[F, 3]`` int32 vertex indices in ``[0, P)``. ``F = 0`` renders background.
        elevations_deg: ``[N]`` float32 camera elevations in degrees.
        azimuths_deg: ``[M]`` float32 camera azimuths in degrees.
        image_size: output height = width, in [1, 4096].
        supersample: samples per pixel side, in [1, 16], with ``image_size * supersample``
            <= 4096.
        lights: ``[L, 4]`` float32 directional lights in world space, rows
            ``(dx, dy, dz, intensity)`` with ``(dx, dy, dz)`` pointing from the object towards
            the light (any non-zero length) and intensity >= 0; None for ``DEFAULT_LIGHTS``.
        ambient, diffuse, specular: material coefficients, >= 0.
        shininess: specular exponent, >= 0.
        albedo: grey level of the surface under full light, in [0, 1].
        fov_deg: field of view in (0, 180) degrees.
        distance: camera distance from the origin, > 0.
        background: value of uncovered pixels, in [0, 1].
        backend: ``"auto"``, ``"native"`` or ``"reference"``. Rendering runs on the CPU; tensors
            on another device are copied there and the result is moved back.

    Returns:
        ``[N, M, image_size, image_size]`` float32 in [0, 1].
    """
    vertices = check_tensor("vertices", vertices, op=OP, dtypes=(torch.float32,), ndim=2)
    faces = check_tensor("faces", faces, op=OP, dtypes=(torch.int32,), ndim=2)
    elevations_deg = check_tensor(
        "elevations_deg", elevations_deg, op=OP, dtypes=(torch.float32,), ndim=1
    )
    azimuths_deg = check_tensor(
        "azimuths_deg", azimuths_deg, op=OP, dtypes=(torch.float32,), ndim=1
    )
    if lights is None:
        lights = DEFAULT_LIGHTS
    lights = check_tensor("lights", lights, op=OP, dtypes=(torch.float32,), ndim=2)
    if vertices.shape[1] != 3:
        raise UserError(f"{OP}: vertices must have shape [P, 3], got {tuple(vertices.shape)}")
    if faces.shape[1] != 3:
        raise UserError(f"{OP}: faces must have shape [F, 3], got {tuple(faces.shape)}")
    if lights.shape[1] != 4:
        raise UserError(
            f"{OP}: lights must have shape [L, 4] (dx, dy, dz, intensity), got "
            f"{tuple(lights.shape)}"
        )
    image_size = check_int("image_size", image_size, op=OP, minimum=1)
    supersample = check_int("supersample", supersample, op=OP, minimum=1)
    if image_size > MAX_IMAGE_SIZE:
        raise UserError(f"{OP}: image_size must be <= {MAX_IMAGE_SIZE}, got {image_size}")
    if supersample > MAX_SUPERSAMPLE:
        raise UserError(f"{OP}: supersample must be <= {MAX_SUPERSAMPLE}, got {supersample}")
    if image_size * supersample > MAX_RENDER_SIZE:
        raise UserError(
            f"{OP}: image_size * supersample must be <= {MAX_RENDER_SIZE}, got "
            f"{image_size} * {supersample}"
        )
    params = {
        "ambient": _check_float("ambient", ambient, 0.0, 1e6),
        "diffuse": _check_float("diffuse", diffuse, 0.0, 1e6),
        "specular": _check_float("specular", specular, 0.0, 1e6),
        "shininess": _check_float("shininess", shininess, 0.0, 1e6),
        "albedo": _check_float("albedo", albedo, 0.0, 1.0),
        "fov_deg": _check_float("fov_deg", fov_deg, 0.0, 179.0, open_lo=True),
        "distance": _check_float("distance", distance, 0.0, 1e6, open_lo=True),
        "background": _check_float("background", background, 0.0, 1.0),
    }

    # Rendering is CPU work: bring everything to the CPU, hand the result back on the device.
    device = vertices.device
    vertices, faces, elevations_deg, azimuths_deg, lights = (
        t.cpu() for t in (vertices, faces, elevations_deg, azimuths_deg, lights)
    )
    check_finite("vertices", vertices, op=OP)
    check_finite("elevations_deg", elevations_deg, op=OP)
    check_finite("azimuths_deg", azimuths_deg, op=OP)
    check_finite("lights", lights, op=OP)
    P = vertices.shape[0]
    if faces.numel():
        lo, hi = int(faces.min()), int(faces.max())
        if lo < 0 or hi >= P:
            raise UserError(
                f"{OP}: faces must index vertices in [0, {P}), got indices in [{lo}, {hi}]"
            )
    if lights.numel():
        if bool((lights[:, :3].square().sum(1) == 0).any()):
            raise UserError(f"{OP}: every light needs a non-zero direction (dx, dy, dz)")
        if bool((lights[:, 3] < 0).any()):
            raise UserError(f"{OP}: light intensities must be >= 0")

    N, M = elevations_deg.shape[0], azimuths_deg.shape[0]
    if not use_native(OP, backend, torch.device("cpu")):
        out = _reference.render_mesh_views(
            vertices,
            faces,
            elevations_deg,
            azimuths_deg,
            image_size=image_size,
            supersample=supersample,
            lights=lights,
            **params,
        )
        return out.to(device)

    out = torch.empty(N, M, image_size, image_size, dtype=torch.float32)
    if N * M == 0:
        return out.to(device)
    launch(
        OP,
        torch.device("cpu"),
        vertices.data_ptr(),
        faces.data_ptr(),
        elevations_deg.data_ptr(),
        azimuths_deg.data_ptr(),
        lights.data_ptr(),
        out.data_ptr(),
        P,
        faces.shape[0],
        N,
        M,
        lights.shape[0],
        image_size,
        supersample,
        params["ambient"],
        params["diffuse"],
        params["specular"],
        params["shininess"],
        params["albedo"],
        params["fov_deg"],
        params["distance"],
        params["background"],
    )
    return out.to(device)
