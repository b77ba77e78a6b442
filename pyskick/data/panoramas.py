"""Convert folders of panoramas (equirectangular images and cubemap folders) into viewgrids.

Equirectangular images are JPG or PNG files of any 2:1 size. A cubemap is a folder holding six
square face images named ``posx``, ``negx``, ``posy``, ``negy``, ``posz``, ``negz`` (any image
extension), in the OpenGL layout described in :mod:`pyskick.data.projection`. Sources are sorted by
path and shuffled into splits with a seeded permutation, so the same folder and seed always give
the same file. ``augment`` adds turned, tilted and mirrored copies of the training panoramas only,
after the split (:func:`augmentation_draws`, docs/data-formats.md "Augmentation").
"""

from __future__ import annotations

import logging
import math
import os
import struct
import warnings
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from contextvars import ContextVar
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import torch
from PIL import Image, UnidentifiedImageError
from PIL.Image import DecompressionBombError

from pyskick import progress
from pyskick.data.augment import with_copies
from pyskick.data.hdf5_format import REQUIRED_SPLITS
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.projection import (
    CUBE_FACES,
    cubemap_to_viewgrid,
    equirect_to_viewgrid,
    rig_transform,
)
from pyskick.data.spec import SUN360, GridSpec
from pyskick.errors import UserError, UserFileNotFoundError

if TYPE_CHECKING:
    from PIL.ImageFile import ImageFile

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png")
# Panoramas are box-filtered down to this many samples per view pixel before projection, and
# each view pixel averages SUPERSAMPLE x SUPERSAMPLE bilinear samples.
SUPERSAMPLE = 3

Reporter = Callable[[Path, str], None]

_LOG = logging.getLogger(__name__)


@dataclass(frozen=True)
class PanoramaSource:
    """One panorama: an equirectangular image file or a cubemap folder."""

    path: Path
    kind: str  # "equirect" | "cubemap"


def _log_skipped(path: Path, reason: str) -> None:
    _LOG.warning("skipped %s: %s", path, reason)


def _face_files(folder: Path) -> dict[str, list[Path]]:
    faces: dict[str, list[Path]] = {}
    for p in folder.iterdir():
        if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and p.stem.lower() in CUBE_FACES:
            faces.setdefault(p.stem.lower(), []).append(p)
    return faces


def find_panoramas(
    folder: str | os.PathLike[str],
) -> tuple[list[PanoramaSource], list[tuple[Path, str]]]:
    """Find panoramas under ``folder`` (recursively, following links).

    Every folder, image and cubemap is found once, by its resolved path(s): one reached again
    through a link (a loop such as ``ln -s . again``, a second link to one folder, a link to
    an image or to another cubemap's faces) is left out and reported, and the path kept is
    one without a link in it when there is one. Otherwise a panorama would be found twice and
    its copies could land in two splits (train and test).

    Returns:
        The sources sorted by path, and ``(path, reason)`` for every source left out: folders
        that look like incomplete cubemaps, and what was reached again through a link.
    """
    root = Path(folder)
    if not root.is_dir():
        raise UserFileNotFoundError(f"no panorama folder at {root}")
    found: dict[tuple[Path, ...], list[PanoramaSource]] = {}  # resolved file(s) -> sources
    problems: list[tuple[Path, str]] = []
    for directory in _unique_folders(root, problems):
        faces = _face_files(directory)
        if faces:
            if set(faces) == set(CUBE_FACES) and all(len(v) == 1 for v in faces.values()):
                key = tuple(sorted(v[0].resolve() for v in faces.values()))
                found.setdefault(key, []).append(PanoramaSource(directory, "cubemap"))
            else:
                missing = [f for f in CUBE_FACES if f not in faces]
                duplicated = [f for f, v in faces.items() if len(v) > 1]
                why = f"missing faces {', '.join(missing)}" if missing else ""
                why += (
                    f"{'; ' if why else ''}duplicate faces {', '.join(duplicated)}"
                    if duplicated
                    else ""
                )
                problems.append((directory, f"incomplete cubemap folder ({why})"))
        for p in sorted(directory.iterdir()):
            is_face = p.stem.lower() in CUBE_FACES
            if p.is_file() and p.suffix.lower() in IMAGE_SUFFIXES and not is_face:
                found.setdefault((p.resolve(),), []).append(PanoramaSource(p, "equirect"))
    sources = []
    for candidates in found.values():
        # The path without a link in it, else the first in path order.
        kept = min(candidates, key=lambda c: (_through_link(c.path), str(c.path)))
        sources.append(kept)
        what = "image" if kept.kind == "equirect" else "cubemap"
        for other in candidates:
            if other is not kept:
                problems.append(
                    (other.path, f"the same {what} as {kept.path} (a link); converted once")
                )
    return sorted(sources, key=lambda s: str(s.path)), problems


def _through_link(path: Path) -> bool:
    """Whether ``path`` (or, for a cubemap folder, one of its faces) is reached through a
    symbolic link."""
    targets = (
        [path, *(f for f in path.iterdir() if f.stem.lower() in CUBE_FACES)]
        if path.is_dir()
        else [path]
    )
    # abspath normalises without resolving links (Path.resolve would resolve them).
    return any(os.path.realpath(t) != os.path.abspath(t) for t in targets)  # noqa: PTH100


def _unique_folders(root: Path, problems: list[tuple[Path, str]]) -> list[Path]:
    """Every folder under ``root`` (itself included) once, by its resolved path, in path order.

    The folders reached without a link are searched first, then the links in path order, so a
    folder that is both inside ``root`` and the target of a link is kept under its own path. A
    folder reached again (through a link or a loop) is reported in ``problems``.
    """
    seen: dict[Path, Path] = {}
    links: list[Path] = []

    def walk(start: Path) -> None:
        pending = [start]
        while pending:
            folder = pending.pop()
            real = folder.resolve()
            if real in seen:
                problems.append(
                    (folder, f"the same folder as {seen[real]} (a link); searched once")
                )
                continue
            seen[real] = folder
            for child in sorted((p for p in folder.iterdir() if p.is_dir()), reverse=True):
                (links if child.is_symlink() else pending).append(child)  # depth first

    walk(root)
    while links:
        links.sort()
        walk(links.pop(0))
    return sorted(seen.values())


# Modes converted as they are (alpha, when present, is composited over black).
_PLAIN_MODES = ("1", "L", "LA", "P", "PA", "RGB", "RGBA")
# 16-bit greyscale, scaled to 8 bits by rounding v / 257.
_WIDE_GREY_MODES = ("I;16", "I;16L", "I;16B", "I;16N")
# PNG rawmodes that Pillow widens to 0-255 (2- and 4-bit grey) while keeping the tRNS key raw.
_KEY_SCALE = {"L;2": 85, "L;4": 17}


def _composite(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """uint8 ``[H, W, 3]`` over black with uint8 ``[H, W]`` alpha (premultiplied, rounded)."""
    mixed = rgb.astype(np.uint32) * alpha[..., None].astype(np.uint32)
    return ((mixed + 127) // 255).astype(np.uint8)


def image_to_rgb(image: Image.Image, rawmode: str = "") -> np.ndarray:
    """A loaded Pillow image as uint8 RGB ``[H, W, 3]``, whatever its bit depth and mode.

    1-bit, grey (8- and 16-bit), palette and RGB images convert to RGB; 16-bit grey is rounded
    to 8 bits (``v / 257``), 16-bit colour keeps its high byte (Pillow's decoding). Transparency
    (an alpha channel, a transparent palette entry or a transparent colour) is composited over
    black, so a fully opaque alpha channel changes nothing.

    Args:
        image: the image, loaded.
        rawmode: the file's raw pixel layout (e.g. ``"L;4"``, ``"RGB;16B"`` for PNG), which
            tells how Pillow scaled a transparent colour key.

    Raises:
        ValueError: an unsupported mode (CMYK, 32-bit integer or float, ...) or transparent
            colour, named in the message.
    """
    mode = image.mode
    key = image.info.get("transparency")
    if mode in _WIDE_GREY_MODES:
        values = np.asarray(image).astype(np.uint32)
        grey = ((values * 2 + 257) // 514).astype(np.uint8)  # round(v / 257)
        rgb = np.repeat(grey[..., None], 3, axis=2)
        if isinstance(key, int):
            return _composite(rgb, np.where(values == key, 0, 255).astype(np.uint8))
        return rgb
    if mode not in _PLAIN_MODES:
        raise ValueError(
            f"unsupported image mode {mode} (supported: 1-bit, grey, grey+alpha, palette, RGB "
            "and RGBA, 8 or 16 bits); convert the image to 8-bit RGB"
        )
    if key is not None and mode in ("L", "RGB"):
        # A transparent colour: compare it with the pixels the way the file stores them.
        if ";16" in rawmode:
            raise ValueError(
                "16-bit colour with a transparent colour key (tRNS) is not supported; remove "
                "the transparency or save the image as 8-bit RGB"
            )
        scale = _KEY_SCALE.get(rawmode, 1)
        pixels = np.asarray(image)
        if mode == "L":
            opaque = pixels != int(key) * scale
            rgb = np.repeat(pixels[..., None], 3, axis=2)
        else:
            opaque = (pixels != np.asarray(key, dtype=np.int64)).any(axis=2)
            rgb = pixels
        return _composite(np.ascontiguousarray(rgb), np.where(opaque, 255, 0).astype(np.uint8))
    if mode in ("LA", "PA", "RGBA") or key is not None:
        rgba = np.asarray(image.convert("RGBA"))
        return _composite(rgba[..., :3], rgba[..., 3])
    return np.asarray(image.convert("RGB"))


DEFAULT_MAX_PIXELS = 600_000_000
"""The largest image the converters read, in pixels: a 32768 x 16384 stitched panorama (537
Mpixel, 1.6 GB decoded) fits. Pillow's own limit (89 Mpixel, a warning; 179, an error) is
meant for images from untrusted sources, and refused real panoramas as "unreadable"."""

_MAX_PIXELS: ContextVar[int] = ContextVar("pyskick_max_pixels", default=DEFAULT_MAX_PIXELS)


@contextmanager
def max_pixels(limit: int) -> Iterator[None]:
    """Read images of up to ``limit`` pixels inside the block (``--max-pixels``).

    Raises:
        ValueError: ``limit`` is not a positive int.
    """
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise UserError(f"max_pixels must be a positive int, got {limit!r}")
    token = _MAX_PIXELS.set(limit)
    try:
        yield
    finally:
        _MAX_PIXELS.reset(token)


def _open(path: Path) -> ImageFile:
    """``Image.open`` with Pillow's decompression-bomb limit lifted: :func:`_read_rgb` applies
    the converters' own limit to the size, before decoding."""
    saved = Image.MAX_IMAGE_PIXELS
    Image.MAX_IMAGE_PIXELS = None
    try:
        return Image.open(path)
    finally:
        Image.MAX_IMAGE_PIXELS = saved


def _read_rgb(path: Path) -> Image.Image:
    """An image file as an 8-bit RGB Pillow image (see :func:`image_to_rgb`), if it has at
    most the pixels :func:`max_pixels` allows (checked before it is decoded). Pillow's
    warnings are logged as warnings naming ``path``, not printed raw.

    Raises:
        ValueError: unreadable, too large, or an unsupported mode.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            return _decode(path)
        finally:
            for warning in caught:
                _LOG.warning("%s: %s", path, warning.message)


def _decode(path: Path) -> Image.Image:
    """:func:`_read_rgb`'s work."""
    unreadable = (UnidentifiedImageError, OSError, SyntaxError, ValueError, DecompressionBombError)
    try:
        image = _open(path)
    except unreadable as exc:
        raise ValueError(f"unreadable image ({type(exc).__name__}: {exc})") from None
    limit = _MAX_PIXELS.get()
    width, height = image.size
    if width * height > limit:
        image.close()
        raise ValueError(
            f"{width}x{height} is {width * height:,} pixels, more than --max-pixels {limit:,} "
            "allows (each pixel takes 3 bytes once decoded): raise --max-pixels to convert it"
        )
    with image:
        try:
            # The raw layout is only known before decoding (it tells how a tRNS key was kept).
            args = image.tile[0][3] if image.tile else None
            image.load()
            upright = _upright(image, path)
        except unreadable as exc:
            raise ValueError(f"unreadable image ({type(exc).__name__}: {exc})") from None
        return Image.fromarray(image_to_rgb(upright, args if isinstance(args, str) else ""))


# EXIF orientation (tag 0x0112) -> the transpose that shows the image as the camera meant it.
_ORIENTATION_TAG = 0x0112
_UPRIGHT = {
    2: Image.Transpose.FLIP_LEFT_RIGHT,
    3: Image.Transpose.ROTATE_180,
    4: Image.Transpose.FLIP_TOP_BOTTOM,
    5: Image.Transpose.TRANSPOSE,
    6: Image.Transpose.ROTATE_270,
    7: Image.Transpose.TRANSVERSE,
    8: Image.Transpose.ROTATE_90,
}


def _upright(image: Image.Image, path: Path) -> Image.Image:
    """``image`` turned as its EXIF orientation says (a photo tagged "rotate 180°", or a
    portrait stored sideways), before its 2:1 shape is checked; as stored without a tag.

    Only the tag is read: unlike ``ImageOps.exif_transpose``, which rewrites the EXIF block
    (and can fail on odd tags) and copies an untagged image. EXIF that Pillow cannot parse
    counts as no tag, and Pillow's complaint is logged as a warning naming ``path``.
    """
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            orientation = image.getexif().get(_ORIENTATION_TAG, 1)
        except (SyntaxError, ValueError, TypeError, OSError, struct.error) as exc:
            caught.append(warnings.WarningMessage(str(exc), UserWarning, "", 0))
            orientation = 1
    for warning in caught:
        _LOG.warning("%s: EXIF ignored (%s)", path, warning.message)
        orientation = 1
    method = _UPRIGHT.get(orientation) if isinstance(orientation, int) else None
    return image if method is None else image.transpose(method)


def _view_pixel_deg(spec: GridSpec) -> float:
    return spec.fov_deg / spec.view_size


def load_equirect(path: str | os.PathLike[str], spec: GridSpec = SUN360) -> torch.Tensor:
    """Read an equirectangular image, box-filtered to the resolution the projection needs.

    Returns:
        uint8 ``[3, Hp, Wp]``.

    Raises:
        ValueError: unreadable image, or not 2:1.
    """
    image = _read_rgb(Path(path))
    w, h = image.size
    if w != 2 * h:
        raise ValueError(f"not a 2:1 equirectangular image ({w}x{h})")
    # Enough panorama pixels for SUPERSAMPLE samples per view pixel, and not many more.
    width = 2 * math.ceil(360.0 / (_view_pixel_deg(spec) / SUPERSAMPLE) / 2)
    if w > width:
        image = image.resize((width, width // 2), Image.Resampling.BOX)
    return torch.from_numpy(np.asarray(image).copy()).permute(2, 0, 1)


def load_cubemap(folder: str | os.PathLike[str], spec: GridSpec = SUN360) -> torch.Tensor:
    """Read the six faces of a cubemap folder, box-filtered to the resolution the projection needs.

    Returns:
        uint8 ``[6, 3, F, F]`` in ``CUBE_FACES`` order.

    Raises:
        ValueError: an unreadable, non-square or differently sized face.
    """
    faces = _face_files(Path(folder))
    images = []
    for name in CUBE_FACES:
        path = faces[name][0]
        try:
            images.append(_read_rgb(path))
        except ValueError as exc:
            raise ValueError(f"face {path.name}: {exc}") from None
    sizes = {image.size for image in images}
    if len(sizes) != 1 or any(w != h for w, h in sizes):
        raise ValueError(f"cube faces must be square and the same size, got {sorted(sizes)}")
    side = images[0].size[0]
    target = math.ceil(90.0 / (_view_pixel_deg(spec) / SUPERSAMPLE))
    if side > target:
        images = [image.resize((target, target), Image.Resampling.BOX) for image in images]
    return torch.from_numpy(np.stack([np.asarray(i) for i in images])).permute(0, 3, 1, 2)


def panorama_viewgrids(
    source: PanoramaSource,
    spec: GridSpec = SUN360,
    transforms: Sequence[torch.Tensor | None] = (None,),
) -> torch.Tensor:
    """Viewgrids ``[K, N, M, 3, H, W]`` uint8 of one panorama source, read once.

    Args:
        source: the panorama.
        spec: grid geometry.
        transforms: one rig-to-world ``[3, 3]`` matrix per viewgrid
            (:func:`~pyskick.data.projection.rig_transform`); None is the rig as it is.
    """
    if source.kind == "cubemap":
        faces = load_cubemap(source.path, spec)[None]
        return torch.cat(
            [
                cubemap_to_viewgrid(faces, spec, supersample=SUPERSAMPLE, transform=t)
                for t in transforms
            ]
        )
    panorama = load_equirect(source.path, spec)[None]
    return torch.cat(
        [
            equirect_to_viewgrid(panorama, spec, supersample=SUPERSAMPLE, transform=t)
            for t in transforms
        ]
    )


def panorama_viewgrid(source: PanoramaSource, spec: GridSpec = SUN360) -> torch.Tensor:
    """Viewgrid ``[N, M, 3, H, W]`` uint8 of one panorama source."""
    return panorama_viewgrids(source, spec)[0]


# Augmented copies: a continuous yaw in [0, 360), pitch and roll each uniform in
# [-AUGMENT_TILT_DEG, AUGMENT_TILT_DEG] (a slightly tilted camera), mirrored with probability 1/2.
AUGMENT_TILT_DEG = 5.0
# Columns of the ``augmentation/train`` dataset of an augmented panorama file.
AUGMENT_COLUMNS = ("yaw_deg", "pitch_deg", "roll_deg", "mirror")


def augmentation_draws(seed: int, source_index: int, copies: int) -> np.ndarray:
    """The random poses of a training panorama's augmented copies.

    Copy ``k`` (1-based) draws from ``numpy.random.default_rng([seed, source_index, k])``, so it
    depends on nothing but the seed, the source's place among the sorted sources and ``k``.

    Returns:
        float64 ``[copies, 4]``: yaw, pitch, roll (degrees) and mirror (0 or 1) of each copy.
    """
    rows = []
    for k in range(1, copies + 1):
        rng = np.random.default_rng([seed, source_index, k])
        yaw = rng.uniform(0.0, 360.0)
        pitch, roll = rng.uniform(-AUGMENT_TILT_DEG, AUGMENT_TILT_DEG, size=2)
        rows.append((yaw, pitch, roll, float(rng.random() < 0.5)))
    return np.array(rows, dtype=np.float64).reshape(copies, 4)


def parse_split(text: str) -> tuple[float, float, float]:
    """``"0.7,0.15,0.15"`` -> fractions of train, val, test (positive, normalised to sum 1)."""
    try:
        values = tuple(float(v) for v in text.split(","))
    except ValueError:
        raise UserError(
            f"--split-fractions must be three comma-separated numbers, got {text!r}"
        ) from None
    if len(values) != 3 or not all(math.isfinite(v) and v > 0 for v in values):
        raise UserError(
            f"--split-fractions must be three positive numbers (train,val,test), got {text!r}"
        )
    total = sum(values)
    return (values[0] / total, values[1] / total, values[2] / total)


def assign_splits(num: int, fractions: Sequence[float], seed: int) -> dict[str, np.ndarray]:
    """Deterministic split of ``range(num)``: a seeded permutation cut by ``fractions``.

    Every split gets at least one sample; indices are sorted within a split.
    """
    if num < len(REQUIRED_SPLITS):
        raise UserError(
            f"need at least {len(REQUIRED_SPLITS)} readable inputs (one per split), got {num}"
        )
    sizes = [max(1, round(num * f)) for f in fractions[1:]]
    sizes = [num - sum(sizes), *sizes]
    while sizes[0] < 1:  # tiny inputs: take from the largest other split
        k = 1 + int(np.argmax(sizes[1:]))
        sizes[k] -= 1
        sizes[0] += 1
    order = np.random.default_rng(seed).permutation(num)
    bounds = np.cumsum([0, *sizes])
    return {
        name: np.sort(order[bounds[k] : bounds[k + 1]]) for k, name in enumerate(REQUIRED_SPLITS)
    }


def convert_panoramas(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    spec: GridSpec = SUN360,
    split: Sequence[float] = (0.7, 0.15, 0.15),
    seed: int = 0,
    strict: bool = False,
    augment: int = 0,
    report: Reporter = _log_skipped,
    max_pixels_per_image: int = DEFAULT_MAX_PIXELS,
) -> Path:
    """Convert every panorama under ``folder`` into a viewgrid file.

    Args:
        folder: searched recursively for equirectangular images and cubemap folders.
        out: the ``.h5`` file to write (only once everything succeeded).
        spec: grid geometry; RGB (3 channels).
        split: train, val, test fractions.
        seed: seed of the split permutation and of the augmented copies.
        strict: fail on the first bad source instead of skipping it.
        augment: augmented copies added per training panorama (:func:`augmentation_draws`);
            validation and test panoramas are never augmented.
        report: called with ``(path, reason)`` for every skipped source.
        max_pixels_per_image: the largest image read, in pixels (``--max-pixels``); a larger
            one is a bad source, refused before it is decoded.

    Returns:
        The written path.

    Raises:
        ValueError: a bad source under ``strict``, or fewer than three readable panoramas.
    """
    with max_pixels(max_pixels_per_image):
        return _convert(
            folder, out, spec=spec, split=split, seed=seed, strict=strict, augment=augment,
            report=report,
        )  # fmt: skip


def _convert(
    folder: str | os.PathLike[str],
    out: str | os.PathLike[str],
    *,
    spec: GridSpec,
    split: Sequence[float],
    seed: int,
    strict: bool,
    augment: int,
    report: Reporter,
) -> Path:
    """The body of :func:`convert_panoramas`, with its pixel limit in effect."""
    if spec.channels != 3:
        raise ValueError(f"panoramas are RGB: spec needs 3 channels, got {spec.channels}")
    if augment < 0:
        raise UserError(f"--augment must be 0 or more copies per panorama, got {augment}")
    sources, problems = find_panoramas(folder)
    grids: list[torch.Tensor] = []
    kept: list[int] = []  # indices into sources
    bad = list(problems)
    with progress.stage("convert panoramas", total=len(sources), unit="panorama") as converting:
        for index, source in enumerate(sources):
            try:
                grids.append(panorama_viewgrid(source, spec))
                kept.append(index)
            except ValueError as exc:
                bad.append((source.path, str(exc)))
            converting.advance()
        bad.sort(key=lambda item: str(item[0]))
        if strict and bad:  # the conversion failed: no line of its own besides the error
            path, reason = bad[0]
            more = f" (and {len(bad) - 1} more)" if len(bad) > 1 else ""
            raise UserError(f"{path}: {reason}{more}")
    for path, reason in bad:
        report(path, reason)
    if not sources:
        raise UserError(f"no panoramas (.jpg, .jpeg, .png or cubemap folders) under {folder}")
    indices = assign_splits(len(kept), tuple(split), seed)
    stacked = torch.stack(grids)
    splits = {name: stacked[torch.from_numpy(idx)] for name, idx in indices.items()}
    root = Path(folder)
    names = {
        name: [str(sources[kept[i]].path.relative_to(root)) for i in idx]
        for name, idx in indices.items()
    }
    description = f"from-panoramas {root} split={','.join(f'{f:g}' for f in split)} seed={seed}"
    if not augment:
        return write_viewgrids(out, splits, spec, source=description, sample_names=names)
    found = {name: [kept[i] for i in idx] for name, idx in indices.items()}
    copies, poses = _augmented_copies(
        [sources[i] for i in found["train"]], found["train"], spec, seed, augment
    )
    result = with_copies(
        {name: grids.numpy() for name, grids in splits.items()},
        names,
        found,
        copies,
        poses,
        AUGMENT_COLUMNS,
    )
    return write_viewgrids(
        out,
        result.splits,
        spec,
        source=f"{description} augment={augment}",
        sample_names=result.names,
        sample_data=result.sample_data,
        extra_attrs=result.attrs,
    )


def _augmented_copies(
    train: Sequence[PanoramaSource], found: Sequence[int], spec: GridSpec, seed: int, copies: int
) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Render ``copies`` augmented viewgrids of each training panorama (read again).

    Returns:
        Per source: uint8 ``[copies, N, M, 3, H, W]`` and its poses ``[copies, 4]``.
    """
    grids, poses = [], []
    with progress.stage("augment panoramas", total=len(train), unit="panorama") as augmenting:
        for source, index in zip(train, found, strict=True):
            draws = augmentation_draws(seed, index, copies)
            transforms = [rig_transform(y, p, r, mirror=bool(m)) for y, p, r, m in draws]
            try:
                grids.append(panorama_viewgrids(source, spec, transforms).numpy())
            except ValueError as exc:  # changed on disk since the first pass
                raise UserError(f"{source.path}: {exc}") from None
            poses.append(draws)
            augmenting.advance()
    return grids, poses
