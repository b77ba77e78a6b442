"""Triangle meshes: OBJ/OFF loading, normalisation and ModelNet-Hard-like viewgrid rendering.

Meshes use the world frame of :func:`pyskick.ops.render_mesh_views`: Y up, the object's front
facing +Z. That is the convention of most CAD exports (and of the sample meshes under
``shared/data/meshes``, which are Y-up in centimetres), so loading keeps the axes as they are;
:func:`normalize_mesh` removes the units.
"""

from __future__ import annotations

import logging
import re
from pathlib import Path
from typing import TypedDict

import numpy as np
import torch

from pyskick.ops import render_mesh_views

# Two lights, each placed at one of two candidate directions drawn per object
# (docs/paper-reference.md §1.3: "two lights, each placed at random in one of two spots").
# Directions point from the object towards the light (world frame, Y up, front +Z); the last
# entry is the intensity.
LIGHT_CANDIDATES: tuple[tuple[tuple[float, float, float, float], ...], ...] = (
    ((1.0, 1.5, 2.0, 0.6), (-1.0, 1.5, 2.0, 0.6)),  # key: above the front, right or left
    ((-1.5, 0.5, -1.5, 0.4), (1.5, -0.5, -1.5, 0.4)),  # fill: behind, high left or low right
)


class _Material(TypedDict):
    """The shading keywords of :func:`~pyskick.ops.render_mesh_views`."""

    ambient: float
    diffuse: float
    specular: float
    shininess: float
    albedo: float


# ModelNet-Hard material (docs/paper-reference.md §1.3); albedo and background set the grey levels.
MATERIAL: _Material = {
    "ambient": 0.4,
    "diffuse": 0.9,
    "specular": 0.7,
    "shininess": 15.0,
    "albedo": 0.6,
}
FOV_DEG = 40.0
DISTANCE = 3.0
_OFF_HEADER = re.compile(r"^(?:ST)?C?N?OFF(\d*)$")
logger = logging.getLogger(__name__)


def _parse_index(token: str, n_vertices: int, where: str) -> int:
    """0-based vertex index of one OBJ face corner ``v``, ``v/vt``, ``v//vn`` or ``v/vt/vn``."""
    head = token.split("/", 1)[0]
    try:
        index = int(head)
    except ValueError:
        raise ValueError(f"{where}: bad face vertex {token!r}") from None
    # Positive indices count from 1; negative ones count back from the last vertex read so far.
    resolved = index - 1 if index > 0 else n_vertices + index
    if index == 0 or not 0 <= resolved < n_vertices:
        raise ValueError(
            f"{where}: face vertex {index} is out of range ({n_vertices} vertices so far)"
        )
    return resolved


def _fan(polygon: list[int]) -> list[tuple[int, int, int]]:
    """Fan-triangulate a polygon around its first corner."""
    return [(polygon[0], polygon[k], polygon[k + 1]) for k in range(1, len(polygon) - 1)]


def _triangles(polygon: list[int]) -> tuple[list[tuple[int, int, int]], int]:
    """The polygon's fan triangles with three distinct corners, and how many it had without:
    a face of fewer than 3 corners counts as one, a fan triangle that repeats a corner as one
    (real CAD exports hold such faces; trimesh and Blender drop them and keep the mesh)."""
    if len(polygon) < 3:
        return [], 1
    fan = _fan(polygon)
    kept = [t for t in fan if len(set(t)) == 3]
    return kept, len(fan) - len(kept)


Loaded = tuple[list[list[float]], list[tuple[int, int, int]], int]
"""Vertices, fan-triangulated faces, and the count of degenerate faces dropped."""


def _load_obj(path: Path, text: str) -> Loaded:
    """Vertices and fan-triangulated faces of an OBJ text (indices must refer back)."""
    vertices: list[list[float]] = []
    faces: list[tuple[int, int, int]] = []
    dropped = 0
    for lineno, line in enumerate(text.splitlines(), start=1):
        parts = line.split()
        if not parts:
            continue
        where = f"{path}:{lineno}"
        if parts[0] == "v":
            try:
                # A fourth (w) or colour values after x y z are ignored.
                vertices.append([float(x) for x in parts[1:4]])
            except ValueError:
                raise ValueError(f"{where}: bad vertex {line.strip()!r}") from None
            if len(vertices[-1]) != 3:
                raise ValueError(f"{where}: a vertex needs 3 coordinates, got {line.strip()!r}")
        elif parts[0] == "f":
            polygon = [_parse_index(t, len(vertices), where) for t in parts[1:]]
            triangles, degenerate = _triangles(polygon)
            faces.extend(triangles)
            dropped += degenerate
        # o/g (parts, merged into one mesh), vt/vn (unused: normals come from the geometry),
        # usemtl/mtllib/s/l/p and comments carry nothing the renderer uses.
    return vertices, faces, dropped


def _load_off(path: Path, text: str) -> Loaded:
    """Vertices and fan-triangulated faces of an OFF text."""
    # Tokens per line without comments. The header may carry colour/normal prefixes (COFF, NOFF,
    # STOFF: the extra vertex values are ignored) and may share its line with the counts, even
    # without a space ("OFF490 518 0", as in some ModelNet files).
    lines = [
        (lineno, line.split("#", 1)[0].split())
        for lineno, line in enumerate(text.splitlines(), start=1)
    ]
    lines = [(lineno, tokens) for lineno, tokens in lines if tokens]
    match = _OFF_HEADER.match(lines[0][1][0]) if lines else None
    if match is None:
        raise ValueError(f"{path}:1: not an OFF file (missing the OFF header)")
    lineno, header = lines[0]
    rest = lines[1:]
    counts = [match.group(1)] if match.group(1) else []
    counts += header[1:]
    if not counts:
        if not rest:
            raise ValueError(f"{path}:{lineno}: missing the vertex/face counts line")
        lineno, counts = rest[0]
        rest = rest[1:]
    try:
        n_vertices, n_faces = int(counts[0]), int(counts[1])
    except (ValueError, IndexError):
        raise ValueError(f"{path}:{lineno}: bad counts line {' '.join(counts)!r}") from None
    if n_vertices < 0 or n_faces < 0 or len(rest) < n_vertices + n_faces:
        raise ValueError(
            f"{path}: header announces {n_vertices} vertices and {n_faces} faces, file has "
            f"{len(rest)} data lines"
        )
    vertices: list[list[float]] = []
    for lineno, tokens in rest[:n_vertices]:
        try:
            vertices.append([float(x) for x in tokens[:3]])
        except ValueError:
            raise ValueError(f"{path}:{lineno}: bad vertex {' '.join(tokens)!r}") from None
        if len(vertices[-1]) != 3:
            raise ValueError(f"{path}:{lineno}: a vertex needs 3 coordinates")
    faces: list[tuple[int, int, int]] = []
    dropped = 0
    for lineno, tokens in rest[n_vertices : n_vertices + n_faces]:
        try:
            k = int(tokens[0])
            polygon = [int(t) for t in tokens[1 : 1 + k]]  # optional colour values follow
        except ValueError:
            raise ValueError(f"{path}:{lineno}: bad face {' '.join(tokens)!r}") from None
        if k < 0 or len(polygon) != k:
            raise ValueError(f"{path}:{lineno}: a face needs k >= 0 and k indices")
        if polygon and (min(polygon) < 0 or max(polygon) >= n_vertices):
            raise ValueError(
                f"{path}:{lineno}: face index out of range [0, {n_vertices}): {polygon}"
            )
        triangles, degenerate = _triangles(polygon)
        faces.extend(triangles)
        dropped += degenerate
    return vertices, faces, dropped


def load_mesh(path: str | Path) -> tuple[np.ndarray, np.ndarray]:
    """Load a triangle mesh from an OBJ or OFF file (chosen by suffix).

    OBJ: ``v`` and ``f`` records (corners ``v``, ``v/vt``, ``v//vn``, ``v/vt/vn``; negative
    indices count back from the last vertex read); every ``o``/``g`` part goes into one mesh;
    texture coordinates, normals and materials are ignored. OFF: the ``OFF`` header, the counts
    line, vertices, then polygons ``k i1 .. ik``. Polygons are fan-triangulated around their
    first corner, so ``F`` equals the count of trimesh and of the sample meshes' MANIFEST.csv.
    Degenerate faces (fewer than 3 distinct corners, as real CAD exports hold) are dropped with
    one warning per mesh; a mesh is refused only when none is left.

    Args:
        path: an ``.obj`` or ``.off`` file.

    Returns:
        ``(vertices [P, 3] float32, faces [F, 3] int32)``, axes as stored in the file.

    Raises:
        FileNotFoundError: no such file.
        ValueError: unknown suffix, malformed content (with ``path:line``), non-finite
            coordinates, or a file without a renderable face.
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"mesh file not found: {path}")
    suffix = path.suffix.lower()
    if suffix not in (".obj", ".off"):
        raise ValueError(f"{path}: unsupported mesh format {path.suffix!r} (use .obj or .off)")
    text = path.read_text(encoding="utf-8", errors="replace")
    vertices, faces, dropped = (_load_obj if suffix == ".obj" else _load_off)(path, text)
    if not faces:
        left = f" (all {dropped} were degenerate)" if dropped else ""
        raise ValueError(f"{path}: the mesh has no renderable faces{left}")
    if dropped:
        logger.warning(
            "%s: dropped %d degenerate face(s) (fewer than 3 distinct vertices); kept %d",
            path, dropped, len(faces),
        )  # fmt: skip
    v = np.asarray(vertices, dtype=np.float64)
    if not np.isfinite(v).all() or np.abs(v).max() > np.finfo(np.float32).max:
        raise ValueError(f"{path}: vertex coordinates must be finite float32 values")
    if len(vertices) >= 2**31:
        raise ValueError(f"{path}: too many vertices ({len(vertices)})")
    return v.astype(np.float32), np.asarray(faces, dtype=np.int32).reshape(-1, 3)


def normalize_mesh(vertices: np.ndarray) -> np.ndarray:
    """Centre the bounding box at the origin and scale the bounding sphere to radius 1.

    Args:
        vertices: ``[P, 3]`` float, P >= 1, finite, not all equal.

    Returns:
        ``[P, 3]`` float32 with ``max |v| == 1`` (up to rounding).
    """
    v = np.asarray(vertices, dtype=np.float64)
    if v.ndim != 2 or v.shape[1] != 3 or v.shape[0] == 0:
        raise ValueError(f"normalize_mesh: vertices must have shape [P, 3], P >= 1, got {v.shape}")
    if not np.isfinite(v).all():
        raise ValueError("normalize_mesh: vertices contain NaN or infinite values")
    centred = v - (v.min(axis=0) + v.max(axis=0)) / 2.0
    radius = float(np.sqrt((centred**2).sum(axis=1)).max())
    if radius == 0.0:
        raise ValueError("normalize_mesh: all vertices coincide; the mesh has no extent")
    return (centred / radius).astype(np.float32)


def turn_mesh(vertices: np.ndarray, yaw_deg: float, mirror: bool = False) -> np.ndarray:
    """Turn a mesh about its up axis (+Y) and optionally mirror it left-right.

    Args:
        vertices: ``[P, 3]`` float, Y up.
        yaw_deg: turn of the object, positive from +Z towards +X.
        mirror: reflect the turned object in its ``x = 0`` plane (``x -> -x``).

    Returns:
        ``[P, 3]`` float32.
    """
    v = np.asarray(vertices, dtype=np.float64)
    a = np.radians(yaw_deg)
    rotation = np.array(
        [[np.cos(a), 0.0, np.sin(a)], [0.0, 1.0, 0.0], [-np.sin(a), 0.0, np.cos(a)]]
    )
    turned = v @ rotation.T
    if mirror:
        turned[:, 0] = -turned[:, 0]
    return turned.astype(np.float32)


def viewgrid_angles(
    n_elevations: int = 5, n_azimuths: int = 9, step_deg: float = 40.0
) -> tuple[list[float], list[float]]:
    """Camera angles of an object viewgrid: elevations from highest (index 0) down, symmetric
    about the horizon, and azimuths ``0, step, 2 * step, ...``.

    Returns:
        ``(elevations_deg [N], azimuths_deg [M])``; the defaults give ``[80, 40, 0, -40, -80]``
        and ``[0, 40, ..., 320]``.
    """
    if n_elevations < 1 or n_azimuths < 1 or not step_deg > 0:
        raise ValueError(
            f"viewgrid_angles: need n_elevations, n_azimuths >= 1 and step_deg > 0, got "
            f"{n_elevations}, {n_azimuths}, {step_deg}"
        )
    top = (n_elevations - 1) / 2.0 * step_deg
    if top >= 90.0:
        raise ValueError(
            f"viewgrid_angles: {n_elevations} elevations {step_deg}° apart reach {top}° "
            "(must stay below 90°)"
        )
    elevations = [top - n * step_deg for n in range(n_elevations)]
    azimuths = [m * step_deg for m in range(n_azimuths)]
    return elevations, azimuths


def random_lights(rng: np.random.Generator) -> torch.Tensor:
    """Pick each light's position among its two candidates (``LIGHT_CANDIDATES``).

    Returns:
        ``[2, 4]`` float32 lights for :func:`pyskick.ops.render_mesh_views`.
    """
    rows = [candidates[int(rng.integers(len(candidates)))] for candidates in LIGHT_CANDIDATES]
    return torch.tensor(rows, dtype=torch.float32)


def render_viewgrid(
    vertices: np.ndarray,
    faces: np.ndarray,
    *,
    n_elevations: int = 5,
    n_azimuths: int = 9,
    step_deg: float = 40.0,
    image_size: int = 32,
    supersample: int = 4,
    rng: np.random.Generator | None = None,
    normalize: bool = True,
) -> np.ndarray:
    """Render a mesh as a ModelNet-Hard-like grayscale viewgrid.

    Two lights, each at one of two candidate positions drawn from ``rng``
    (``LIGHT_CANDIDATES``), the ModelNet-Hard material (``MATERIAL``), a white background and a
    40° camera at distance 3 around the normalised mesh. Camera convention: see
    :func:`pyskick.ops.render_mesh_views` (row 0 = highest elevation, azimuth turning right).

    Args:
        vertices: ``[P, 3]`` float, Y up, front facing +Z (any units when ``normalize``).
        faces: ``[F, 3]`` int vertex indices.
        n_elevations, n_azimuths, step_deg: the grid (see :func:`viewgrid_angles`).
        image_size: view height = width. supersample: samples per pixel side.
        rng: draws the light positions; None for a fresh default generator.
        normalize: fit the mesh to the unit sphere first (:func:`normalize_mesh`).

    Returns:
        ``[N, M, 1, H, W]`` uint8 in [0, 255].
    """
    rng = np.random.default_rng() if rng is None else rng
    elevations, azimuths = viewgrid_angles(n_elevations, n_azimuths, step_deg)
    v = normalize_mesh(vertices) if normalize else np.asarray(vertices, dtype=np.float32)
    views = render_mesh_views(
        torch.from_numpy(np.ascontiguousarray(v, dtype=np.float32)),
        torch.from_numpy(np.ascontiguousarray(faces, dtype=np.int32)),
        torch.tensor(elevations, dtype=torch.float32),
        torch.tensor(azimuths, dtype=torch.float32),
        image_size=image_size,
        supersample=supersample,
        lights=random_lights(rng),
        fov_deg=FOV_DEG,
        distance=DISTANCE,
        background=1.0,
        **MATERIAL,
    )
    # numpy, not torch: small element-wise work must not wake torch's thread pool.
    return np.rint(views.numpy() * 255.0).astype(np.uint8)[:, :, None]
