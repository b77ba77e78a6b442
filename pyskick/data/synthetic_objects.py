"""Procedural CAD-like objects rendered as ModelNet-Hard-like viewgrids (``synthetic-objects``).

Ten families of furniture and household objects are assembled from boxes, cylinders, cones,
tori and surfaces of revolution with random proportions. Eight are "seen" (train/val/test) and
two, ``UNSEEN_FAMILIES``, are held out for ``test_unseen``, like ModelNet-10 in the paper. Every
object is rendered by :func:`pyskick.data.meshes.render_viewgrid`: 5 x 9 grayscale 32 x 32
views 40° apart, two randomly placed lights, the ModelNet-Hard material.

Meshes follow the world frame of :func:`pyskick.ops.render_mesh_views`: Y up, front +Z (a
chair's backrest lies at negative z). Flat parts get their own vertices per face so that
Gouraud shading keeps their edges sharp; curved parts share vertices and shade smoothly.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path

import numpy as np

from pyskick import progress
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.meshes import render_viewgrid
from pyskick.data.spec import MODELNET_HARD
from pyskick.errors import UserError, UserTypeError
from pyskick.memory import check_memory

N_ELEVATIONS, N_AZIMUTHS, STEP_DEG, IMAGE_SIZE = 5, 9, 40.0, 32
GENERATOR_VERSION = "1"  # bump when the objects or their rendering change (cache names)
DEFAULT_NUM, DEFAULT_SEED = 1000, 0


class MeshBuilder:
    """Accumulates triangle-mesh parts into one mesh."""

    def __init__(self) -> None:
        self._vertices: list[np.ndarray] = []
        self._faces: list[np.ndarray] = []
        self._count = 0

    def add(self, vertices: np.ndarray, faces: np.ndarray) -> None:
        """Append a part: ``vertices [p, 3]`` and ``faces [f, 3]`` indexing them."""
        self._vertices.append(np.asarray(vertices, dtype=np.float64))
        self._faces.append(np.asarray(faces, dtype=np.int64) + self._count)
        self._count += len(vertices)

    def box(self, center: tuple[float, float, float], size: tuple[float, float, float]) -> None:
        """Axis-aligned box, 4 vertices per side (flat shading)."""
        c, h = np.asarray(center, dtype=np.float64), np.asarray(size, dtype=np.float64) / 2
        corners = np.array(
            [[x, y, z] for x in (-1, 1) for y in (-1, 1) for z in (-1, 1)], dtype=np.float64
        )
        # Each side as a quad of corner indices (index = 4x + 2y + z with 0/1 per axis).
        sides = [(0, 1, 3, 2), (4, 6, 7, 5), (0, 4, 5, 1), (2, 3, 7, 6), (0, 2, 6, 4), (1, 5, 7, 3)]
        vertices = np.concatenate([corners[list(s)] for s in sides]) * h + c
        quads = np.arange(24).reshape(6, 4)
        faces = np.concatenate([quads[:, [0, 1, 2]], quads[:, [0, 2, 3]]])
        self.add(vertices, faces)

    def revolve(
        self,
        profile: list[tuple[float, float]],
        *,
        center: tuple[float, float, float] = (0.0, 0.0, 0.0),
        axis: str = "y",
        segments: int = 24,
        caps: bool = True,
    ) -> None:
        """Surface of revolution of ``(radius, height)`` points (bottom to top) about an axis.

        ``caps`` closes the ends whose radius is positive with flat discs.
        """
        r = np.array([p[0] for p in profile], dtype=np.float64)
        y = np.array([p[1] for p in profile], dtype=np.float64)
        theta = np.linspace(0.0, 2.0 * np.pi, segments, endpoint=False)
        ring_x, ring_z = np.cos(theta), np.sin(theta)
        K, R = segments, len(profile)
        vertices = np.stack(
            [r[:, None] * ring_x[None], np.broadcast_to(y[:, None], (R, K)), r[:, None] * ring_z],
            axis=-1,
        ).reshape(-1, 3)
        i, k = np.meshgrid(np.arange(R - 1), np.arange(K), indexing="ij")
        a, b = i * K + k, i * K + (k + 1) % K
        c, d = a + K, b + K
        faces = np.concatenate([np.stack([a, c, b], -1), np.stack([b, c, d], -1)]).reshape(-1, 3)
        parts_v, parts_f = [vertices], [faces]
        count = len(vertices)
        for level, radius, flip in ((0, r[0], True), (R - 1, r[-1], False)):
            if not caps or radius <= 0:
                continue
            disc = np.concatenate(
                [
                    [[0.0, y[level], 0.0]],
                    np.stack([radius * ring_x, np.full(K, y[level]), radius * ring_z], -1),
                ]
            )
            fan = np.stack(
                [np.zeros(K, np.int64), 1 + np.arange(K), 1 + (np.arange(K) + 1) % K], -1
            )
            parts_v.append(disc)
            parts_f.append((fan[:, [0, 2, 1]] if flip else fan) + count)
            count += len(disc)
        v = _orient(np.concatenate(parts_v), axis) + np.asarray(center, dtype=np.float64)
        self.add(v, np.concatenate(parts_f))

    def cylinder(
        self,
        center: tuple[float, float, float],
        radius: float,
        height: float,
        *,
        axis: str = "y",
        top_radius: float | None = None,
        segments: int = 20,
    ) -> None:
        """Closed cylinder (or cone frustum with ``top_radius``) centred at ``center``."""
        top = radius if top_radius is None else top_radius
        self.revolve(
            [(radius, -height / 2), (top, height / 2)], center=center, axis=axis, segments=segments
        )

    def torus(
        self,
        center: tuple[float, float, float],
        major: float,
        minor: float,
        *,
        arc: float = 2.0 * np.pi,
        start: float = 0.0,
        segments: int = 24,
        tube_segments: int = 10,
    ) -> None:
        """Torus (or an arc of one) in the XY plane around the z axis."""
        closed = arc >= 2.0 * np.pi
        n_u = segments if closed else segments + 1
        u = start + np.linspace(0.0, arc, n_u, endpoint=not closed)
        w = np.linspace(0.0, 2.0 * np.pi, tube_segments, endpoint=False)
        uu, ww = np.meshgrid(u, w, indexing="ij")
        ring = major + minor * np.cos(ww)
        vertices = np.stack([ring * np.cos(uu), ring * np.sin(uu), minor * np.sin(ww)], -1)
        i, j = np.meshgrid(np.arange(segments), np.arange(tube_segments), indexing="ij")
        a = i * tube_segments + j
        b = ((i + 1) % n_u) * tube_segments + j
        c = i * tube_segments + (j + 1) % tube_segments
        d = ((i + 1) % n_u) * tube_segments + (j + 1) % tube_segments
        faces = np.concatenate([np.stack([a, b, c], -1), np.stack([c, b, d], -1)]).reshape(-1, 3)
        self.add(vertices.reshape(-1, 3) + np.asarray(center, dtype=np.float64), faces)

    def build(self) -> tuple[np.ndarray, np.ndarray]:
        """The mesh: ``(vertices [P, 3] float32, faces [F, 3] int32)``."""
        return (
            np.concatenate(self._vertices).astype(np.float32),
            np.concatenate(self._faces).astype(np.int32),
        )


def _orient(vertices: np.ndarray, axis: str) -> np.ndarray:
    """Turn a part built along +Y to lie along ``axis`` (a proper rotation)."""
    x, y, z = vertices[:, 0], vertices[:, 1], vertices[:, 2]
    if axis == "y":
        return vertices
    if axis == "x":
        return np.stack([y, -x, z], -1)
    if axis == "z":
        return np.stack([x, -z, y], -1)
    raise ValueError(f"axis must be 'x', 'y' or 'z', got {axis!r}")


def _legs(
    mesh: MeshBuilder, rng: np.random.Generator, half_w: float, half_d: float, height: float
) -> None:
    """Four legs under a rectangle, square or round, straight or tapered."""
    thick = rng.uniform(0.04, 0.09)
    round_legs = rng.random() < 0.5
    taper = rng.uniform(0.5, 1.0)
    for sx in (-1, 1):
        for sz in (-1, 1):
            center = (sx * (half_w - thick), height / 2, sz * (half_d - thick))
            if round_legs:
                mesh.cylinder(center, thick * taper, height, top_radius=thick, segments=10)
            else:
                mesh.box(center, (thick * 1.4, height, thick * 1.4))


def chair(rng: np.random.Generator) -> MeshBuilder:
    """Seat, four legs, a backrest at -z and sometimes armrests."""
    m = MeshBuilder()
    w, d, h = rng.uniform(0.8, 1.1), rng.uniform(0.8, 1.1), rng.uniform(0.8, 1.1)
    t = rng.uniform(0.06, 0.14)
    _legs(m, rng, w / 2, d / 2, h)
    m.box((0, h + t / 2, 0), (w, t, d))
    back_h, back_t = rng.uniform(0.7, 1.2), rng.uniform(0.05, 0.12)
    if rng.random() < 0.5:
        m.box((0, h + t + back_h / 2, -d / 2 + back_t / 2), (w, back_h, back_t))
    else:  # frame with slats
        n_slats = int(rng.integers(2, 5))
        for x in np.linspace(-w / 2 + 0.05, w / 2 - 0.05, n_slats):
            m.box((x, h + t + back_h / 2, -d / 2 + back_t / 2), (0.06, back_h, back_t))
        m.box((0, h + t + back_h - 0.06, -d / 2 + back_t / 2), (w, 0.12, back_t))
    if rng.random() < 0.35:
        arm_h = rng.uniform(0.2, 0.35)
        for sx in (-1, 1):
            m.box((sx * (w / 2 - 0.04), h + t + arm_h, 0), (0.08, 0.06, d * 0.9))
            m.box((sx * (w / 2 - 0.04), h + t + arm_h / 2, d * 0.4), (0.06, arm_h, 0.06))
    return m


def table(rng: np.random.Generator) -> MeshBuilder:
    """A rectangular or round top on four legs or a pedestal."""
    m = MeshBuilder()
    h, t = rng.uniform(0.6, 1.0), rng.uniform(0.04, 0.1)
    if rng.random() < 0.6:
        w, d = rng.uniform(1.0, 2.0), rng.uniform(0.6, 1.2)
        m.box((0, h + t / 2, 0), (w, t, d))
        _legs(m, rng, w / 2, d / 2, h)
    else:
        r = rng.uniform(0.5, 0.9)
        m.cylinder((0, h + t / 2, 0), r, t, segments=32)
        if rng.random() < 0.5:
            m.cylinder((0, h / 2, 0), rng.uniform(0.04, 0.1), h, segments=12)
            m.cylinder((0, 0.03, 0), r * rng.uniform(0.4, 0.7), 0.06, segments=24)
        else:
            _legs(m, rng, r * 0.7, r * 0.7, h)
    return m


def lamp(rng: np.random.Generator) -> MeshBuilder:
    """Base disc, a pole (sometimes bent) and a conical shade."""
    m = MeshBuilder()
    base_r, pole_h = rng.uniform(0.2, 0.4), rng.uniform(0.8, 1.6)
    pole_r = rng.uniform(0.02, 0.045)
    m.cylinder((0, 0.03, 0), base_r, 0.06, segments=24)
    m.cylinder((0, pole_h / 2, 0), pole_r, pole_h, segments=10)
    shade_h = rng.uniform(0.2, 0.45)
    bottom, top = rng.uniform(0.25, 0.5), rng.uniform(0.08, 0.3)
    if rng.random() < 0.4:  # desk lamp: an arm reaching forward, the shade hanging from it
        reach = rng.uniform(0.3, 0.6)
        m.cylinder((0, pole_h, reach / 2), pole_r, reach, axis="z", segments=10)
        m.cylinder((0, pole_h - shade_h / 2, reach), bottom * 0.7, shade_h, top_radius=top * 0.5)
    else:
        m.cylinder((0, pole_h + shade_h / 3, 0), bottom, shade_h, top_radius=top, segments=24)
    return m


def bed(rng: np.random.Generator) -> MeshBuilder:
    """Frame, mattress, headboard at -z, sometimes a footboard, pillows."""
    m = MeshBuilder()
    w, length = rng.uniform(1.0, 1.8), rng.uniform(1.9, 2.2)
    frame_h, mat_h = rng.uniform(0.2, 0.4), rng.uniform(0.15, 0.3)
    m.box((0, frame_h / 2, 0), (w, frame_h, length))
    m.box((0, frame_h + mat_h / 2, 0.02), (w * 0.96, mat_h, length * 0.96))
    head_h = rng.uniform(0.6, 1.1)
    m.box((0, head_h / 2, -length / 2 - 0.04), (w + 0.06, head_h, 0.08))
    if rng.random() < 0.5:
        foot_h = rng.uniform(0.4, frame_h + mat_h + 0.2)
        m.box((0, foot_h / 2, length / 2 + 0.04), (w + 0.06, foot_h, 0.08))
    n_pillows = 1 if w < 1.3 else 2
    for x in np.linspace(-w / 4, w / 4, n_pillows) if n_pillows == 2 else [0.0]:
        m.box((x, frame_h + mat_h + 0.06, -length / 2 + 0.3), (w / n_pillows * 0.8, 0.12, 0.35))
    return m


def shelf(rng: np.random.Generator) -> MeshBuilder:
    """Two sides, a back panel and 2-5 boards."""
    m = MeshBuilder()
    w, h, d = rng.uniform(0.6, 1.4), rng.uniform(0.8, 2.0), rng.uniform(0.25, 0.45)
    t = rng.uniform(0.03, 0.06)
    for sx in (-1, 1):
        m.box((sx * (w / 2 - t / 2), h / 2, 0), (t, h, d))
    if rng.random() < 0.7:
        m.box((0, h / 2, -d / 2 + t / 4), (w, h, t / 2))
    for y in np.linspace(t / 2, h - t / 2, int(rng.integers(3, 7))):
        m.box((0, y, 0), (w - 2 * t, t, d))
    return m


def _smooth_profile(rng: np.random.Generator, height: float, n: int = 16) -> np.ndarray:
    """Random smooth radius profile over ``n`` heights (a few control points, interpolated)."""
    control = rng.uniform(0.15, 0.5, size=int(rng.integers(3, 6)))
    return np.interp(np.linspace(0, 1, n), np.linspace(0, 1, len(control)), control) * height


def vase(rng: np.random.Generator) -> MeshBuilder:
    """A surface of revolution with a random smooth profile, open at the top."""
    m = MeshBuilder()
    h = rng.uniform(1.0, 1.8)
    radii = _smooth_profile(rng, h * 0.6)
    heights = np.linspace(0.0, h, len(radii))
    profile = [(0.0, 0.0), *zip(radii.tolist(), heights.tolist(), strict=True)]
    m.revolve(profile, segments=28, caps=False)
    return m


def car(rng: np.random.Generator) -> MeshBuilder:
    """Body, cabin and four wheels; the car points to +z."""
    m = MeshBuilder()
    length, w = rng.uniform(1.6, 2.4), rng.uniform(0.7, 1.0)
    body_h, wheel_r = rng.uniform(0.25, 0.4), rng.uniform(0.14, 0.22)
    m.box((0, wheel_r + body_h / 2, 0), (w, body_h, length))
    cabin_l, cabin_h = length * rng.uniform(0.35, 0.6), rng.uniform(0.2, 0.35)
    shift = rng.uniform(-0.2, 0.1) * length
    m.box((0, wheel_r + body_h + cabin_h / 2, shift), (w * 0.85, cabin_h, cabin_l))
    for sx in (-1, 1):
        for sz in (-1, 1):
            center = (sx * (w / 2 - 0.02), wheel_r, sz * length * 0.32)
            m.cylinder(center, wheel_r, 0.15, axis="x", segments=16)
    return m


def mug(rng: np.random.Generator) -> MeshBuilder:
    """An open cylinder with a thick wall and a handle on the +x side."""
    m = MeshBuilder()
    r, h, wall = rng.uniform(0.3, 0.5), rng.uniform(0.6, 1.1), rng.uniform(0.03, 0.06)
    m.revolve(
        [(0.0, 0.0), (r, 0.0), (r, h), (r - wall, h), (r - wall, 0.05), (0.0, 0.05)],
        segments=28,
        caps=False,
    )
    handle = rng.uniform(0.18, 0.3) * h
    m.torus((r, h / 2, 0), handle, rng.uniform(0.03, 0.06), arc=np.pi, start=-np.pi / 2)
    return m


def sofa(rng: np.random.Generator) -> MeshBuilder:
    """Base, seat cushions, a backrest at -z and two armrests."""
    m = MeshBuilder()
    w, d = rng.uniform(1.6, 2.6), rng.uniform(0.8, 1.1)
    base_h, back_h, arm_h = rng.uniform(0.2, 0.35), rng.uniform(0.4, 0.7), rng.uniform(0.2, 0.4)
    arm_w = rng.uniform(0.1, 0.25)
    m.box((0, base_h / 2 + 0.05, 0), (w, base_h, d))
    n = int(rng.integers(2, 4))
    cushion_w = (w - 2 * arm_w) / n
    for i in range(n):
        x = -w / 2 + arm_w + cushion_w * (i + 0.5)
        m.box((x, base_h + 0.13, 0.08), (cushion_w * 0.96, 0.16, d - 0.18))
    m.box((0, base_h + back_h / 2 + 0.05, -d / 2 + 0.09), (w, back_h, 0.18))
    for sx in (-1, 1):
        m.box((sx * (w / 2 - arm_w / 2), base_h + arm_h / 2 + 0.05, 0), (arm_w, arm_h, d))
    return m


def bottle(rng: np.random.Generator) -> MeshBuilder:
    """Body, shoulder, neck and cap as one surface of revolution."""
    m = MeshBuilder()
    r, h = rng.uniform(0.2, 0.4), rng.uniform(0.8, 1.4)
    neck_r, neck_h = r * rng.uniform(0.25, 0.45), rng.uniform(0.15, 0.35)
    shoulder = h * rng.uniform(0.55, 0.8)
    profile = [(r, 0.0), (r, shoulder)]
    for s in np.linspace(0.2, 1.0, 5):  # rounded shoulder
        profile.append(
            (neck_r + (r - neck_r) * np.cos(s * np.pi / 2), shoulder + s * (h - shoulder))
        )
    profile += [(neck_r, h + neck_h), (neck_r * 1.2, h + neck_h), (neck_r * 1.2, h + neck_h + 0.08)]
    m.revolve(profile, segments=24)
    return m


FAMILIES: dict[str, Callable[[np.random.Generator], MeshBuilder]] = {
    "chair": chair,
    "table": table,
    "lamp": lamp,
    "bed": bed,
    "shelf": shelf,
    "vase": vase,
    "car": car,
    "mug": mug,
    "sofa": sofa,
    "bottle": bottle,
}
UNSEEN_FAMILIES = ("sofa", "bottle")
SEEN_FAMILIES = tuple(name for name in FAMILIES if name not in UNSEEN_FAMILIES)
SPLITS = ("train", "val", "test", "test_unseen")


def make_object(family: str, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """One random mesh of ``family``: ``(vertices [P, 3] float32, faces [F, 3] int32)``."""
    if family not in FAMILIES:
        raise ValueError(f"unknown object family {family!r}; known: {', '.join(FAMILIES)}")
    return FAMILIES[family](rng).build()


def split_sizes(num: int) -> dict[str, int]:
    """Objects per split: 20% unseen; the seen ones 70/10/20 into train/val/test."""
    if isinstance(num, bool) or not isinstance(num, int):
        raise UserTypeError(f"num must be an int, got {type(num).__name__}")
    if num < 4:
        raise UserError(f"synthetic-objects needs num >= 4 (one object per split), got {num}")
    unseen = max(1, round(0.2 * num))
    seen = num - unseen
    val, test = max(1, round(0.1 * seen)), max(1, round(0.2 * seen))
    return {"train": seen - val - test, "val": val, "test": test, "test_unseen": unseen}


def split_families(split: str, count: int, seed: int) -> list[str]:
    """Family of each object of a split: the split's families in turn, in a seeded order.

    ``test_unseen`` draws from ``UNSEEN_FAMILIES``, the other splits from ``SEEN_FAMILIES``.
    """
    if split not in SPLITS:
        raise ValueError(f"unknown split {split!r}; known: {', '.join(SPLITS)}")
    families = UNSEEN_FAMILIES if split == "test_unseen" else SEEN_FAMILIES
    order = np.random.default_rng([seed, SPLITS.index(split)]).permutation(len(families))
    return [families[order[i % len(families)]] for i in range(count)]


def render_split(split: str, count: int, seed: int) -> np.ndarray:
    """Render ``count`` objects of one split (families from :func:`split_families`).

    Object i of a split depends only on ``(seed, split, i)``.

    Returns:
        ``[count, 5, 9, 1, 32, 32]`` uint8.
    """
    split_id = SPLITS.index(split)
    out = np.empty((count, N_ELEVATIONS, N_AZIMUTHS, 1, IMAGE_SIZE, IMAGE_SIZE), dtype=np.uint8)
    with progress.stage(f"render {split}", total=count, unit="object", lines="none") as bar:
        for i, family in enumerate(split_families(split, count, seed)):
            rng = np.random.default_rng([seed, split_id, i])
            vertices, faces = make_object(family, rng)
            out[i] = render_viewgrid(
                vertices,
                faces,
                n_elevations=N_ELEVATIONS,
                n_azimuths=N_AZIMUTHS,
                step_deg=STEP_DEG,
                image_size=IMAGE_SIZE,
                rng=rng,
            )
            bar.advance()
    return out


def make_synthetic_objects(path: str | Path, num: int, seed: int) -> Path:
    """Write a ``synthetic-objects`` viewgrid file in the authors' HDF5 layout.

    Splits ``train``/``val``/``test`` hold seen families and ``test_unseen`` the held-out ones
    (sizes: :func:`split_sizes`), each uint8 ``[n, 5, 9, 1, 32, 32]``. Attributes:
    ``n_elevations``, ``n_azimuths``, ``fov_deg``, ``elevations_deg`` (80 ... -80, index 0
    highest), ``azimuths_deg`` (0 ... 320), ``channel_mean`` (train mean, 0-255 scale),
    ``source``, ``classes`` (all family names), ``unseen_classes`` and ``schema_version``.
    The file is written to a temporary name and renamed, so a failure leaves nothing behind.

    Args:
        path: output ``.h5`` file (its folder must exist).
        num: total number of objects, >= 4.
        seed: the same seed gives the same file contents.

    Returns:
        ``path`` as a Path.
    """
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    sizes = split_sizes(num)
    # The viewgrids and the file assembled in memory (compressed: no larger) at once.
    check_memory(
        2 * num * N_ELEVATIONS * N_AZIMUTHS * IMAGE_SIZE * IMAGE_SIZE,
        f"synthetic-objects --num {num}",
        "make fewer objects (--num), or several files",
    )
    grids = {split: render_split(split, n, seed) for split, n in sizes.items()}
    # The paper's geometry; the mean is this data's own (white backgrounds are brighter than
    # ModelNet Hard's 193).
    spec = dataclasses.replace(
        MODELNET_HARD, channel_mean=(float(grids["train"].mean(dtype=np.float64)),)
    )
    return write_viewgrids(
        path,
        grids,
        spec,
        source="synthetic-objects",
        classes=list(FAMILIES),
        extra_attrs={"unseen_classes": list(UNSEEN_FAMILIES), "seed": seed},
    )


make_synthetic_objects.generator_version = GENERATOR_VERSION  # type: ignore[attr-defined]
