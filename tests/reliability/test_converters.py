"""F6 (issue 14): every image mode and bit depth ``data from-panoramas`` accepts converts like
its hand-made 8-bit RGB equivalent (within 1/255); any other mode is refused with its path.

Images are real files: Pillow writes what it can, and a small PNG encoder below writes the
layouts Pillow cannot (16-bit colour, 2- and 4-bit grey, colour keys). Transparency is
composited over black (documented in docs/data-formats.md).
"""

from __future__ import annotations

import struct
import tomllib
import zlib
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
import torch
from packaging.requirements import Requirement
from PIL import Image

from pyskick.data import ViewgridFile
from pyskick.data.panoramas import PanoramaSource, panorama_viewgrid
from pyskick.data.projection import CUBE_FACES
from pyskick_cli.main import main

W, H = 96, 48  # a 2:1 panorama, small enough to convert in milliseconds


def _png(
    pixels: np.ndarray,
    bit_depth: int,
    color_type: int,
    *,
    palette: bytes | None = None,
    trns: bytes | None = None,
) -> bytes:
    """A PNG file of ``pixels`` ``[h, w]`` or ``[h, w, k]`` in any bit depth (big-endian)."""
    h, w = pixels.shape[:2]
    flat = pixels.reshape(h, -1).astype(np.uint32)
    rows = []
    for row in flat:
        if bit_depth == 16:
            data = row.astype(">u2").tobytes()
        elif bit_depth == 8:
            data = row.astype(np.uint8).tobytes()
        else:  # pack 8 / bit_depth samples per byte, most significant first
            per = 8 // bit_depth
            padded = np.zeros(-(-row.size // per) * per, np.uint32)
            padded[: row.size] = row
            shifts = np.arange(per - 1, -1, -1, dtype=np.uint32) * bit_depth
            data = (padded.reshape(-1, per) << shifts).sum(1).astype(np.uint8).tobytes()
        rows.append(b"\x00" + data)

    def chunk(kind: bytes, body: bytes) -> bytes:
        crc = zlib.crc32(kind + body) & 0xFFFFFFFF
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", crc)

    header = struct.pack(">IIBBBBB", w, h, bit_depth, color_type, 0, 0, 0)
    body = chunk(b"IHDR", header)
    if palette is not None:
        body += chunk(b"PLTE", palette)
    if trns is not None:
        body += chunk(b"tRNS", trns)
    body += chunk(b"IDAT", zlib.compress(b"".join(rows))) + chunk(b"IEND", b"")
    return b"\x89PNG\r\n\x1a\n" + body


def _rng() -> np.random.Generator:
    return np.random.default_rng(14)


def _colour() -> np.ndarray:
    """A smooth colourful 8-bit RGB panorama with noise (so every level matters)."""
    y, x = np.mgrid[0:H, 0:W]
    base = np.stack([x * 255 / W, y * 255 / H, (x + y) * 255 / (W + H)], axis=2)
    return np.clip(base + _rng().integers(-20, 21, base.shape), 0, 255).astype(np.uint8)


def _grey() -> np.ndarray:
    return _colour().mean(axis=2).round().astype(np.uint8)


def _alpha() -> np.ndarray:
    """Alpha with fully transparent, fully opaque and partial pixels."""
    alpha = _rng().integers(0, 256, (H, W)).astype(np.uint8)
    alpha[:, : W // 4] = 255
    alpha[:, W // 4 : W // 2] = 0
    return alpha


def _over_black(rgb: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    return np.rint(rgb.astype(np.float64) * alpha[..., None] / 255).astype(np.uint8)


def _wide(values8: np.ndarray) -> np.ndarray:
    """8-bit levels as 16-bit with arbitrary low bits that still round back (v*257 +- 128)."""
    noise = _rng().integers(-128, 129, values8.shape)
    return np.clip(values8.astype(np.int64) * 257 + noise, 0, 65535).astype(np.uint16)


def _save(image: Image.Image, path: Path, **options: object) -> None:
    image.save(path, format="PNG", **options)


Case = Callable[[Path], np.ndarray]  # writes the image, returns its 8-bit RGB equivalent


def _rgb8(path: Path) -> np.ndarray:
    rgb = _colour()
    _save(Image.fromarray(rgb), path)
    return rgb


def _grey16(path: Path) -> np.ndarray:
    grey = _grey()
    wide = _wide(grey)
    _save(Image.fromarray(wide), path)  # Pillow writes mode I;16 as a 16-bit grey PNG
    exact = np.rint(wide / 257).astype(np.uint8)
    return np.repeat(exact[..., None], 3, axis=2)


def _grey16_big_endian(path: Path) -> np.ndarray:
    grey = _grey()
    path.write_bytes(_png(_wide(grey), 16, 0))
    return np.repeat(np.rint(_wide(grey) / 257).astype(np.uint8)[..., None], 3, axis=2)


def _rgb48(path: Path) -> np.ndarray:
    rgb = _colour()
    path.write_bytes(_png(_wide(rgb), 16, 2))
    return np.rint(_wide(rgb) / 257).astype(np.uint8)


def _rgba64(path: Path) -> np.ndarray:
    rgb, alpha = _colour(), _alpha()
    pixels = np.concatenate([_wide(rgb), (alpha.astype(np.uint16) * 257)[..., None]], axis=2)
    path.write_bytes(_png(pixels, 16, 6))
    return _over_black(np.rint(_wide(rgb) / 257), alpha)


def _la16(path: Path) -> np.ndarray:
    grey, alpha = _grey(), _alpha()
    path.write_bytes(_png(np.stack([_wide(grey), alpha.astype(np.uint16) * 257], 2), 16, 4))
    return _over_black(np.repeat(grey[..., None], 3, axis=2), alpha)


def _grey8(path: Path) -> np.ndarray:
    grey = _grey()
    _save(Image.fromarray(grey), path)
    return np.repeat(grey[..., None], 3, axis=2)


def _la8(path: Path) -> np.ndarray:
    grey, alpha = _grey(), _alpha()
    _save(Image.fromarray(np.stack([grey, alpha], axis=2), "LA"), path)
    return _over_black(np.repeat(grey[..., None], 3, axis=2), alpha)


def _rgba8(path: Path) -> np.ndarray:
    rgb, alpha = _colour(), _alpha()
    _save(Image.fromarray(np.concatenate([rgb, alpha[..., None]], axis=2)), path)
    return _over_black(rgb, alpha)


def _rgba8_opaque(path: Path) -> np.ndarray:
    rgb = _colour()
    _save(Image.fromarray(np.concatenate([rgb, np.full((H, W, 1), 255, np.uint8)], 2)), path)
    return rgb


def _palette(path: Path) -> np.ndarray:
    image = Image.fromarray(_colour()).quantize(64)
    _save(image, path)
    return np.asarray(image.convert("RGB"))


def _palette_transparent_index(path: Path) -> np.ndarray:
    image = Image.fromarray(_colour()).quantize(64)
    index = np.asarray(image)
    _save(image, path, transparency=int(index[0, 0]))  # palette colour of index: not black
    rgb = np.asarray(image.convert("RGB")).copy()
    rgb[index == index[0, 0]] = 0
    return rgb


def _palette_alpha_per_entry(path: Path) -> np.ndarray:
    index = (_grey() // 16).astype(np.uint8)  # 16 entries
    colours = np.array([[17 * k, 255 - 17 * k, (50 * k) % 256] for k in range(16)], np.uint8)
    alphas = np.array([(37 * k) % 256 for k in range(16)], np.uint8)
    path.write_bytes(_png(index, 8, 3, palette=colours.tobytes(), trns=alphas.tobytes()))
    return _over_black(colours[index], alphas[index])


def _one_bit(path: Path) -> np.ndarray:
    bits = _grey() > 128
    _save(Image.fromarray(bits), path)
    return np.repeat(np.where(bits, 255, 0).astype(np.uint8)[..., None], 3, axis=2)


def _grey8_colour_key(path: Path) -> np.ndarray:
    grey = _grey()
    key = int(grey[5, 5])
    _save(Image.fromarray(grey), path, transparency=key)
    rgb = np.repeat(grey[..., None], 3, axis=2)
    rgb[grey == key] = 0
    return rgb


def _grey4_colour_key(path: Path) -> np.ndarray:
    levels = _grey() // 16  # 4-bit samples, shown as level * 17
    path.write_bytes(_png(levels, 4, 0, trns=struct.pack(">H", 7)))
    rgb = np.repeat((levels * 17).astype(np.uint8)[..., None], 3, axis=2)
    rgb[levels == 7] = 0
    return rgb


def _grey2(path: Path) -> np.ndarray:
    levels = _grey() // 64
    path.write_bytes(_png(levels, 2, 0))
    return np.repeat((levels * 85).astype(np.uint8)[..., None], 3, axis=2)


def _rgb8_colour_key(path: Path) -> np.ndarray:
    rgb = _colour()
    rgb[10:20, 10:40] = (12, 34, 56)
    _save(Image.fromarray(rgb), path, transparency=(12, 34, 56))
    out = rgb.copy()
    out[(rgb == (12, 34, 56)).all(axis=2)] = 0
    return out


def _grey16_colour_key(path: Path) -> np.ndarray:
    wide = _wide(_grey())
    key = int(wide[3, 3])
    path.write_bytes(_png(wide, 16, 0, trns=struct.pack(">H", key)))
    rgb = np.repeat(np.rint(wide / 257).astype(np.uint8)[..., None], 3, axis=2)
    rgb[wide == key] = 0
    return rgb


ACCEPTED: dict[str, Case] = {
    "rgb 8-bit": _rgb8,
    "grey 16-bit (I;16)": _grey16,
    "grey 16-bit (I;16B, hand-encoded)": _grey16_big_endian,
    "rgb 48-bit": _rgb48,
    "rgba 64-bit": _rgba64,
    "grey+alpha 16-bit": _la16,
    "grey 8-bit (L)": _grey8,
    "grey 2-bit": _grey2,
    "grey+alpha 8-bit (LA)": _la8,
    "rgba 8-bit": _rgba8,
    "rgba 8-bit opaque": _rgba8_opaque,
    "palette (P)": _palette,
    "palette, transparent index": _palette_transparent_index,
    "palette, alpha per entry": _palette_alpha_per_entry,
    "1-bit": _one_bit,
    "grey 8-bit, transparent colour": _grey8_colour_key,
    "grey 4-bit, transparent colour": _grey4_colour_key,
    "grey 16-bit, transparent colour": _grey16_colour_key,
    "rgb 8-bit, transparent colour": _rgb8_colour_key,
}


def _viewgrid(path: Path) -> torch.Tensor:
    return panorama_viewgrid(PanoramaSource(path, "equirect"))


def _reference(rgb: np.ndarray, path: Path) -> torch.Tensor:
    """The viewgrid of the hand-made 8-bit RGB equivalent, saved as a real RGB PNG."""
    assert rgb.dtype == np.uint8
    assert rgb.shape == (H, W, 3)
    Image.fromarray(rgb).save(path, format="PNG")
    return _viewgrid(path)


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(ACCEPTED))
def test_every_accepted_mode_converts_like_its_8_bit_rgb_equivalent(
    tmp_path: Path, case: str
) -> None:
    source = tmp_path / "source.png"
    expected = ACCEPTED[case](source)
    got = _viewgrid(source)
    want = _reference(expected, tmp_path / "reference.png")
    difference = (got.int() - want.int()).abs().max().item()
    assert difference <= 1, f"{case}: viewgrids differ by up to {difference}/255"


def test_16_bit_cubemap_faces_convert_like_8_bit_ones(tmp_path: Path) -> None:
    wide_dir, plain_dir = tmp_path / "wide", tmp_path / "plain"
    wide_dir.mkdir()
    plain_dir.mkdir()
    rng = np.random.default_rng(3)
    for face in CUBE_FACES:
        grey = rng.integers(0, 256, (24, 24)).astype(np.uint8)
        Image.fromarray(grey.astype(np.uint16) * 257).save(wide_dir / f"{face}.png")
        Image.fromarray(np.repeat(grey[..., None], 3, axis=2)).save(plain_dir / f"{face}.png")
    got = panorama_viewgrid(PanoramaSource(wide_dir, "cubemap"))
    want = panorama_viewgrid(PanoramaSource(plain_dir, "cubemap"))
    assert torch.equal(got, want)


def _three_panoramas(folder: Path) -> list[np.ndarray]:
    folder.mkdir(parents=True, exist_ok=True)
    return [_grey16(folder / "a_wide.png"), _rgb8(folder / "b.png"), _rgba8(folder / "c.png")]


def test_cli_converts_a_16_bit_png_under_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The issue's example: a 16-bit PNG was ~99.6 % white after ``--strict`` conversion."""
    folder = tmp_path / "in"
    expected = _three_panoramas(folder)
    out = tmp_path / "out.h5"
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "from-panoramas", str(folder), "--out", str(out), "--strict"])
    assert exit_info.value.code in (0, None), capsys.readouterr().err
    f = ViewgridFile(out)
    for name in f.splits:
        names = f.sample_names(name)
        assert names is not None, f"{name}: the converter records no sample names"
        for k, sample in enumerate(names):
            index = ["a_wide.png", "b.png", "c.png"].index(sample)
            want = _reference(expected[index], tmp_path / f"ref{index}.png")
            assert (f.split(name)[k].int() - want.int()).abs().max() <= 1, sample
    views = torch.cat([f.split(s).load() for s in f.splits])
    assert (views == 255).float().mean() < 0.05  # not the old all-white result


def test_the_pillow_requirement_opens_16_bit_grey_pngs_as_16_bit() -> None:
    """Pillow < 10.3 opens a 16-bit grey PNG as 32-bit mode ``I``, which the converter refuses
    (it cannot tell 16 from 32 bits there): the requirement must exclude those versions."""
    pyproject = Path(__file__).parents[2] / "pyproject.toml"
    requirements = tomllib.loads(pyproject.read_text())["project"]["dependencies"]
    (pillow,) = [r for r in map(Requirement, requirements) if r.name.lower() == "pillow"]
    assert not pillow.specifier.contains("10.2.0"), pillow
    assert pillow.specifier.contains("10.3.0"), pillow


def _cmyk_jpeg(path: Path) -> None:
    Image.new("CMYK", (W, H), (10, 20, 30, 40)).save(path, format="JPEG")


def _float_tiff(path: Path) -> None:
    # Pillow opens files by content: a TIFF named .png is still a TIFF, of mode F here.
    Image.fromarray(np.full((H, W), 0.5, np.float32)).save(path, format="TIFF")


def _int32_tiff(path: Path) -> None:
    Image.fromarray(np.full((H, W), 70000, np.int32)).save(path, format="TIFF")


def _rgb48_colour_key(path: Path) -> None:
    path.write_bytes(_png(_wide(_colour()), 16, 2, trns=struct.pack(">HHH", 1, 2, 3)))


REFUSED: dict[str, tuple[str, Callable[[Path], None], str]] = {
    "CMYK JPEG": ("cmyk.jpg", _cmyk_jpeg, "unsupported image mode CMYK"),
    "float TIFF named .png": ("float.png", _float_tiff, "unsupported image mode F"),
    "32-bit integer TIFF named .png": ("int.png", _int32_tiff, "unsupported image mode I"),
    "16-bit RGB with a colour key": ("key48.png", _rgb48_colour_key, "transparent colour key"),
}


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(REFUSED))
def test_unsupported_modes_are_refused_under_strict_before_writing(
    tmp_path: Path, refuse, case: str
) -> None:
    name, write, needle = REFUSED[case]
    folder = tmp_path / "in"
    _three_panoramas(folder)
    write(folder / name)
    out = tmp_path / "out" / "x.h5"
    refuse(
        ["data", "from-panoramas", folder, "--out", out, "--strict"],
        2,
        str(folder / name),
        needle,
        watch=[tmp_path],
    )


@pytest.mark.parametrize("case", list(REFUSED))
def test_unsupported_modes_are_skipped_and_named_without_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str
) -> None:
    name, write, needle = REFUSED[case]
    folder = tmp_path / "in"
    _three_panoramas(folder)
    write(folder / name)
    out = tmp_path / "x.h5"
    with pytest.raises(SystemExit) as exit_info:
        main(["data", "from-panoramas", str(folder), "--out", str(out)])
    err = capsys.readouterr().err
    assert exit_info.value.code in (0, None), err
    skipped = [line for line in err.splitlines() if line.startswith("skipped")]
    assert len(skipped) == 1, err
    assert str(folder / name) in skipped[0], err
    assert needle in skipped[0], err
    f = ViewgridFile(out)
    assert sum(f.num_samples(s) for s in f.splits) == 3
