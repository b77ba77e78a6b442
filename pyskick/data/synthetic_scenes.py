"""``synthetic-scenes``: procedural 360° scenes, the embedded default dataset.

Each scene is an equirectangular panorama (256x128 by default) painted with numpy: outdoor scenes
have a sky gradient with a sun and clouds, a skyline of mountains, buildings or trees, textured
ground with a road, and a few distinctive landmarks (tower, tree, house, balloon) at random
azimuths; indoor scenes are a box room seen in perspective, with coloured walls, windows, a door,
paintings, a ceiling lamp, a planked floor and a rug. Panoramas are cut into viewgrids by the
same gnomonic projection as real panoramas (:func:`pyskick.data.projection.equirect_to_viewgrid`).

Scene ``i`` depends only on ``(seed, i)``, never on how many scenes are generated.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import multiprocessing
import os
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import torch

from pyskick import progress
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.projection import equirect_to_viewgrid
from pyskick.data.spec import SUN360, GridSpec
from pyskick.memory import check_memory

GENERATOR_VERSION = "1"
PANORAMA_WIDTH = 256
DEFAULT_NUM = 2000
DEFAULT_SEED = 0
SPLIT_FRACTIONS = (0.8, 0.1, 0.1)
INDOOR_PROBABILITY = 0.25
_BATCH = 64

Image = np.ndarray  # float32 [H, W, 3], 0-255


class _Canvas:
    """Longitude/latitude of every pixel of an equirectangular panorama, and the image."""

    def __init__(self, width: int) -> None:
        self.h, self.w = width // 2, width
        lon = (np.arange(self.w, dtype=np.float32) + 0.5) / self.w * 360.0 - 180.0
        lat = 90.0 - (np.arange(self.h, dtype=np.float32) + 0.5) / self.h * 180.0
        self.lon, self.lat = np.meshgrid(lon, lat)
        self.image: Image = np.zeros((self.h, self.w, 3), np.float32)

    def paint(self, mask: np.ndarray, colour: np.ndarray | tuple[float, ...]) -> None:
        """Blend ``colour`` (RGB or ``[H, W, 3]``) where ``mask`` (bool or 0..1) is set."""
        colour = np.asarray(colour, np.float32)
        if mask.dtype == np.bool_:
            self.image[mask] = colour[mask] if colour.ndim == 3 else colour
            return
        a = mask.astype(np.float32)[..., None]
        self.image = self.image * (1.0 - a) + colour * a


def _dlon(lon: np.ndarray, centre: float) -> np.ndarray:
    """Signed longitude difference in [-180, 180) with wrap-around."""
    return (lon - centre + 180.0) % 360.0 - 180.0


@functools.lru_cache(maxsize=64)
def _interpolation(size: int, cells: int, periodic: bool) -> tuple[np.ndarray, ...]:
    """Indices and weights that smoothly interpolate ``cells`` values onto ``size`` pixels."""
    span = cells if periodic else cells - 1
    f = (np.arange(size) + 0.5) / size * span
    i0 = np.minimum(np.floor(f).astype(np.int64), cells - 1 if periodic else max(cells - 2, 0))
    t = np.clip(f - i0, 0.0, 1.0)
    t = (t * t * (3 - 2 * t)).astype(np.float32)  # smoothstep: no visible grid creases
    return i0 % cells, (i0 + 1) % cells, t


def _noise(
    rng: np.random.Generator, shape: tuple[int, int], cells_x: int, cells_y: int, octaves: int
) -> np.ndarray:
    """Fractal value noise in [0, 1] of ``shape`` (rows = latitude), periodic in longitude."""
    h, w = shape
    total = np.zeros(shape, np.float32)
    weight = 0.0
    for k in range(octaves):
        gx, gy = cells_x * 2**k, cells_y * 2**k + 1
        grid = rng.random((gy, gx), dtype=np.float32)
        # Separable: along longitude (wrapping) on the coarse rows, then along latitude.
        x0, x1, tx = _interpolation(w, gx, True)
        rows = grid[:, x0] * (1 - tx) + grid[:, x1] * tx
        y0, y1, ty = _interpolation(h, gy, False)
        ty = ty[:, None]
        total += 0.5**k * (rows[y0] * (1 - ty) + rows[y1] * ty)
        weight += 0.5**k
    return total / weight


def _uniform_colour(
    rng: np.random.Generator, lo: tuple[float, ...], hi: tuple[float, ...]
) -> np.ndarray:
    return rng.uniform(np.asarray(lo, np.float32), np.asarray(hi, np.float32)).astype(np.float32)


def _bright_colour(rng: np.random.Generator) -> np.ndarray:
    """A saturated colour that stands out (landmarks, paintings)."""
    palette = np.array(
        [
            (220, 40, 40),
            (240, 200, 30),
            (40, 90, 220),
            (230, 120, 20),
            (160, 40, 180),
            (30, 180, 170),
            (245, 245, 245),
        ],
        np.float32,
    )
    return palette[rng.integers(len(palette))] * rng.uniform(0.8, 1.0)


def _paint_sky(c: _Canvas, rng: np.random.Generator) -> None:
    dusk = rng.random() < 0.3
    if dusk:
        zenith = _uniform_colour(rng, (30, 40, 100), (60, 70, 140))
        horizon = _uniform_colour(rng, (230, 120, 60), (255, 180, 110))
    else:
        zenith = _uniform_colour(rng, (40, 100, 190), (90, 150, 240))
        horizon = _uniform_colour(rng, (170, 200, 230), (220, 230, 255))
    t = np.clip(c.lat / 90.0, 0.0, 1.0)[..., None] ** 0.6
    c.image = horizon * (1 - t) + zenith * t
    sun_lon, sun_lat = (
        rng.uniform(-180, 180),
        rng.uniform(5, 60) if not dusk else rng.uniform(2, 15),
    )
    cos_d = np.sin(np.radians(c.lat)) * np.sin(np.radians(sun_lat)) + np.cos(
        np.radians(c.lat)
    ) * np.cos(np.radians(sun_lat)) * np.cos(np.radians(_dlon(c.lon, sun_lon)))
    dist = np.degrees(np.arccos(np.clip(cos_d, -1.0, 1.0)))
    glow = np.exp(-dist / 10.0) * 0.7
    c.paint(glow, (255, 240, 200))
    c.paint(dist < 3.5, (255, 252, 235))
    coverage = rng.uniform(0.35, 0.75)
    clouds = _noise(rng, c.lat.shape, cells_x=6, cells_y=8, octaves=4)  # flat, wide clouds
    density = np.clip((clouds - coverage) * 5.0, 0.0, 1.0) * np.clip(c.lat / 8.0, 0.0, 1.0)
    shade = rng.uniform(200, 250)
    c.paint(density * 0.9, (shade, shade, shade + 5))


def _skyline(c: _Canvas, rng: np.random.Generator) -> None:
    """Mountains, buildings or trees between the horizon and their height profile."""
    kind = rng.integers(3)
    lon = c.lon[0]
    if kind == 0:  # mountains: a periodic sum of sinusoids
        height = np.full_like(lon, rng.uniform(3, 8))
        for k in rng.choice(np.arange(1, 9), size=4, replace=False):
            height += rng.uniform(1, 7) * np.sin(np.radians(lon) * k + rng.uniform(0, 2 * np.pi))
        height = np.clip(height, 1, None)
        base = _uniform_colour(rng, (70, 90, 110), (120, 140, 160))
        peak = np.clip(base + 60, 0, 255) if rng.random() < 0.5 else base * 0.7
        t = np.clip(c.lat / np.maximum(height, 1e-3), 0, 1)[..., None]
        colour = base * (1 - t) + peak * t
        c.paint((c.lat >= 0) & (c.lat < height), colour)
    elif kind == 1:  # buildings: the max of random blocks, each with its own facade
        height = np.zeros_like(lon)
        facade = np.zeros((lon.size, 3), np.float32)
        for _ in range(rng.integers(15, 35)):
            centre, half, top = rng.uniform(-180, 180), rng.uniform(1.5, 6), rng.uniform(3, 22)
            inside = (np.abs(_dlon(lon, centre)) < half) & (top > height)
            height[inside] = top
            facade[inside] = _uniform_colour(rng, (90, 80, 80), (200, 190, 180))
        windows = ((np.floor(c.lon / 1.5) % 2 == 0) & (np.floor(c.lat / 1.5) % 2 == 0))[..., None]
        colour = np.where(windows, facade[None] * 0.6 + 40, facade[None])
        c.paint((c.lat >= 0) & (c.lat < height[None]), colour)
    else:  # trees: a bumpy dark green line
        height = 3 + 6 * _noise(rng, (1, c.w), cells_x=40, cells_y=1, octaves=3)[0]
        colour = _uniform_colour(rng, (20, 60, 20), (60, 110, 50))
        texture = 0.7 + 0.5 * _noise(rng, c.lat.shape, cells_x=64, cells_y=32, octaves=2)
        c.paint((c.lat >= 0) & (c.lat < height[None]), colour * texture[..., None])


def _ground(c: _Canvas, rng: np.random.Generator) -> None:
    palette = [(70, 120, 50), (190, 170, 120), (110, 110, 105), (230, 235, 240)]
    base = np.asarray(palette[rng.integers(4)], np.float32) * rng.uniform(0.8, 1.1)
    texture = 0.75 + 0.5 * _noise(rng, c.lat.shape, cells_x=32, cells_y=16, octaves=4)
    below = np.clip(-c.lat / 90.0, 0, 1)[..., None]
    haze = np.asarray((170, 180, 190), np.float32)
    colour = (base * texture[..., None]) * below + (base * 0.6 + haze * 0.4) * (1 - below)
    colour = colour * (1.0 - 0.35 * below)  # darker under the viewer
    ground = c.lat < 0
    c.paint(ground, colour)
    # A road from the viewer to the horizon, in perspective on the ground plane (eye height 1).
    direction, half_width = rng.uniform(-180, 180), rng.uniform(0.4, 1.0)
    offset = rng.choice((-1, 1)) * (half_width + rng.uniform(0.5, 2.0))  # the viewer stands aside
    dist = 1.0 / np.tan(np.radians(np.clip(-c.lat, 0.5, 90)))
    along = dist * np.cos(np.radians(_dlon(c.lon, direction)))
    across = dist * np.sin(np.radians(_dlon(c.lon, direction)))
    across = across - offset
    road = ground & (np.abs(across) < half_width)
    c.paint(road, rng.uniform(55, 115) * np.array((1.0, 0.97, 0.92), np.float32))  # asphalt
    c.paint(road & (np.abs(across) < 0.05) & (np.floor(along * 0.7) % 2 == 0), (240, 240, 220))


def _landmarks(c: _Canvas, rng: np.random.Generator) -> None:
    """2-4 distinctive objects at well separated azimuths."""
    count = int(rng.integers(2, 5))
    azimuths = rng.uniform(-180, 180) + np.sort(rng.choice(12, size=count, replace=False)) * 30.0
    for azimuth, kind in zip(azimuths, rng.integers(4, size=count), strict=True):
        dx = _dlon(c.lon, azimuth)
        if kind == 0:  # striped tower
            half, top = rng.uniform(1.5, 3), rng.uniform(25, 50)
            body = (np.abs(dx) < half * (1 - c.lat / (top * 2))) & (c.lat > -4) & (c.lat < top)
            stripes = (np.floor(c.lat / 4) % 2 == 0)[..., None]
            colour = np.where(stripes, _bright_colour(rng), np.float32(235))
            c.paint(body, colour)
        elif kind == 1:  # big tree
            crown_lat, r = rng.uniform(8, 16), rng.uniform(6, 10)
            c.paint((np.abs(dx) < 1.2) & (c.lat > -10) & (c.lat < crown_lat), (90, 60, 30))
            leaf = 0.7 + 0.5 * _noise(rng, c.lat.shape, cells_x=48, cells_y=24, octaves=2)
            crown = (dx / r) ** 2 + ((c.lat - crown_lat) / (r * 0.9)) ** 2 < 1
            c.paint(crown, _uniform_colour(rng, (30, 100, 30), (80, 160, 60)) * leaf[..., None])
        elif kind == 2:  # house with a roof and a door
            half, wall = rng.uniform(7, 12), rng.uniform(5, 9)
            c.paint((np.abs(dx) < half) & (c.lat > -6) & (c.lat < wall), _bright_colour(rng))
            roof = (c.lat >= wall) & (c.lat < wall + (half - np.abs(dx)) * 0.7)
            c.paint(roof, _uniform_colour(rng, (90, 30, 20), (150, 60, 40)))
            c.paint((np.abs(dx) < half * 0.2) & (c.lat > -6) & (c.lat < wall * 0.5), (60, 40, 30))
        else:  # hot-air balloon in the sky
            lat, r = rng.uniform(20, 50), rng.uniform(4, 7)
            envelope = (dx * np.cos(np.radians(lat)) / r) ** 2 + (
                (c.lat - lat) / (r * 1.2)
            ) ** 2 < 1
            gores = (np.floor(dx / 2) % 2 == 0)[..., None]
            colour = np.where(gores, _bright_colour(rng), _bright_colour(rng))
            c.paint(envelope, colour)
            basket = (np.abs(dx) < 1.0) & (c.lat < lat - r * 1.2) & (c.lat > lat - r * 1.2 - 2)
            c.paint(basket, (100, 70, 40))


def _outdoor(c: _Canvas, rng: np.random.Generator) -> None:
    _paint_sky(c, rng)
    _skyline(c, rng)
    _ground(c, rng)
    _landmarks(c, rng)


def _indoor(c: _Canvas, rng: np.random.Generator) -> None:
    """A box room around the viewer, in exact perspective."""
    turn = rng.uniform(-180, 180)
    lon, lat = np.radians(_dlon(c.lon, turn)), np.radians(c.lat)
    half_x, half_z = rng.uniform(2, 4), rng.uniform(2, 4)
    above, below = rng.uniform(1.0, 1.6), 1.5  # ceiling and floor relative to the eye
    sx, cz = np.sin(lon), np.cos(lon)
    to_x = half_x / np.maximum(np.abs(sx), 1e-6)
    to_z = half_z / np.maximum(np.abs(cz), 1e-6)
    dist = np.minimum(to_x, to_z)
    wall_id = np.where(to_x < to_z, np.where(sx > 0, 0, 1), np.where(cz > 0, 2, 3))
    height = np.tan(lat) * dist  # height of the hit point on a wall, relative to the eye
    # Position along the wall, left to right as seen from the room's centre.
    along = np.where(to_x < to_z, -np.sign(sx) * dist * cz, np.sign(cz) * dist * sx)
    base = _uniform_colour(rng, (150, 140, 120), (230, 225, 210))
    walls = base[None] * rng.uniform(0.75, 1.05, size=(4, 1)).astype(np.float32)
    c.image = walls[wall_id]
    ceiling, floor = height > above, height < -below
    c.paint(ceiling, base * 1.05 + 10)
    # Floor planks in floor coordinates.
    reach = below / np.maximum(-np.tan(lat), 1e-6)
    fx, fz = reach * np.sin(lon), reach * np.cos(lon)
    wood = _uniform_colour(rng, (110, 70, 40), (170, 120, 80))
    planks = 0.8 + 0.2 * ((np.floor(fx * 3) % 3) / 2.0) + 0.1 * _noise(rng, c.lat.shape, 64, 32, 2)
    c.paint(floor, wood * planks[..., None])
    rug_x, rug_z = rng.uniform(0.5, 1.0), rng.uniform(0.5, 1.0)
    rug_cx, rug_cz = rng.uniform(-1, 1, size=2) * np.array([half_x, half_z]) * 0.5
    rug = floor & (np.abs(fx - rug_cx) < rug_x) & (np.abs(fz - rug_cz) < rug_z)
    c.paint(rug, _bright_colour(rng) * 0.8)
    # Ceiling lamp: a bright disk at the zenith.
    c.paint(c.lat > rng.uniform(75, 82), (255, 250, 225))
    # Windows, a door and paintings on the walls.
    features = rng.permutation(4)
    on_wall = ~ceiling & ~floor
    for i, wall in enumerate(features):
        centre = rng.uniform(-0.5, 0.5)
        mask_wall = on_wall & (wall_id == wall)
        if i == 0:  # door
            c.paint(mask_wall & (np.abs(along - centre) < 0.45) & (height < 0.6), (90, 55, 30))
        elif i == 1:  # window with a sky view
            frame = mask_wall & (np.abs(along - centre) < 0.8) & (np.abs(height - 0.2) < 0.5)
            c.paint(frame, _uniform_colour(rng, (150, 190, 230), (210, 230, 255)))
            c.paint(frame & (np.abs(along - centre) < 0.04), (240, 240, 240))
        else:  # painting
            frame = mask_wall & (np.abs(along - centre) < 0.5) & (np.abs(height - 0.1) < 0.35)
            c.paint(frame, (50, 40, 30))
            inner = frame & (np.abs(along - centre) < 0.44) & (np.abs(height - 0.1) < 0.29)
            c.paint(inner, _bright_colour(rng))
            c.paint(inner & (np.abs(height - 0.1) < 0.1), _bright_colour(rng))


def render_panorama(seed: int, index: int, width: int = PANORAMA_WIDTH) -> np.ndarray:
    """Paint scene ``index`` of the dataset with ``seed``.

    Returns:
        uint8 ``[width // 2, width, 3]`` equirectangular panorama.
    """
    rng = np.random.default_rng(np.random.SeedSequence([seed, index]))
    canvas = _Canvas(width)
    if rng.random() < INDOOR_PROBABILITY:
        _indoor(canvas, rng)
    else:
        _outdoor(canvas, rng)
    return np.clip(np.rint(canvas.image), 0, 255).astype(np.uint8)


def _render_batch(seed: int, indices: list[int], width: int, spec: GridSpec) -> np.ndarray:
    """Viewgrids of scenes ``indices``, uint8 ``[n, N, M, C, H, W]`` (a worker's task).

    A numpy array, not a tensor: it travels back through the pool's pipe by value, where a
    tensor would go through a shared-memory file (torch's pickling), which fails in a small
    ``/dev/shm`` (Docker's default is 64 MB) or under a file-size limit."""
    panoramas = np.stack([render_panorama(seed, i, width) for i in indices])
    images = torch.from_numpy(panoramas).permute(0, 3, 1, 2)
    return equirect_to_viewgrid(images, spec, supersample=2).numpy()


def _one_thread() -> None:
    """A worker process's initialiser: the processes are the parallelism."""
    torch.set_num_threads(1)


def _workers(num_batches: int) -> int:
    """Processes to render ``num_batches`` batches with: one per usable core, at most one per
    batch; 1 (this process) for a single batch or a single core."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(cores or 1, num_batches))


def render_viewgrids(
    seed: int,
    indices: range | list[int],
    spec: GridSpec = SUN360,
    width: int = PANORAMA_WIDTH,
    workers: int | None = None,
) -> torch.Tensor:
    """Viewgrids of the given scenes, uint8 ``[n, N, M, C, H, W]``.

    Batches of 64 scenes are painted and cut into views in ``workers`` processes (default: one
    per core) of one thread each. Scene ``i`` depends only on ``(seed, i)`` and the projection
    on nothing else, so the result is the same for any number of workers.
    """
    if spec.channels != 3:
        raise ValueError(f"synthetic scenes are RGB: spec needs 3 channels, got {spec.channels}")
    indices = list(indices)
    batches = [indices[start : start + _BATCH] for start in range(0, len(indices), _BATCH)]
    workers = _workers(len(batches)) if workers is None else max(1, min(workers, len(batches)))
    out = torch.empty((len(indices), *spec.view_shape), dtype=torch.uint8)
    task = functools.partial(_render_batch, seed, width=width, spec=spec)
    rendered: Iterator[np.ndarray]
    with contextlib.ExitStack() as stack:
        if workers > 1:
            # forkserver: workers forked from a clean server, not from this process's threads.
            context = multiprocessing.get_context("forkserver")
            pool = stack.enter_context(context.Pool(workers, initializer=_one_thread))
            rendered = pool.imap(task, batches)
        else:
            rendered = map(task, batches)
        bar = stack.enter_context(
            progress.stage("render scenes", total=len(indices), unit="grid", lines="none")
        )
        start = 0
        for grids in rendered:
            out[start : start + len(grids)] = torch.from_numpy(grids)
            start += len(grids)
            bar.advance(len(grids))
    return out


def check_view_size(view_size: int) -> None:
    """Refuse a view size the policies cannot take: a multiple of 8, at least 16.

    Raises:
        TypeError: ``view_size`` is not an int.
        ValueError: it is not a multiple of 8 of at least 16 (the message says so).
    """
    if isinstance(view_size, bool) or not isinstance(view_size, int):
        raise TypeError(f"view_size must be an int, got {type(view_size).__name__}")
    if view_size < 16 or view_size % 8:
        raise ValueError(f"view_size must be a multiple of 8 and at least 16, got {view_size}")


def split_sizes(num: int, fractions: tuple[float, ...] = SPLIT_FRACTIONS) -> tuple[int, ...]:
    """Sizes of consecutive splits of ``num`` samples; every split gets at least one."""
    if num < len(fractions):
        raise ValueError(
            f"need at least {len(fractions)} samples for {len(fractions)} splits, got {num}"
        )
    total = sum(fractions)
    sizes = [max(1, round(num * f / total)) for f in fractions[1:]]
    first = num - sum(sizes)
    if first < 1:
        raise ValueError(f"cannot split {num} samples with fractions {fractions}")
    return (first, *sizes)


def generate_synthetic_scenes(
    path: str | os.PathLike[str],
    num: int = DEFAULT_NUM,
    seed: int = DEFAULT_SEED,
    view_size: int = SUN360.view_size,
) -> Path:
    """Write ``num`` synthetic scenes as an SUN360-like viewgrid file (80/10/10 split).

    ``view_size`` is the side of every view in pixels (SUN360's 32 by default; 16 makes every
    model cost about a third, which is what ``pyskick demo`` uses). The scenes are the same at
    every size: the same panoramas cut into smaller views.
    """
    if isinstance(num, bool) or not isinstance(num, int):
        raise TypeError(f"num must be an int, got {type(num).__name__}")
    if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
        raise ValueError(f"seed must be a non-negative int, got {seed!r}")
    check_view_size(view_size)
    spec = dataclasses.replace(SUN360, view_size=view_size)
    # The viewgrids and the file assembled in memory (compressed: no larger) at once.
    check_memory(
        2 * num * math.prod(spec.view_shape),
        f"synthetic-scenes --num {num}",
        "make fewer scenes (--num), or several files",
    )
    bounds = np.cumsum((0, *split_sizes(num))).tolist()
    splits = {
        name: render_viewgrids(seed, range(bounds[k], bounds[k + 1]), spec)
        for k, name in enumerate(("train", "val", "test"))
    }
    size = "" if view_size == SUN360.view_size else f" view_size={view_size}"
    return write_viewgrids(
        path,
        splits,
        spec,
        source=f"synthetic-scenes v{GENERATOR_VERSION} num={num} seed={seed}{size}",
        extra_attrs={
            "generator": "synthetic-scenes",
            "generator_version": GENERATOR_VERSION,
            "seed": seed,
        },
    )


generate_synthetic_scenes.generator_version = GENERATOR_VERSION  # type: ignore[attr-defined]
