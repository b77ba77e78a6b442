"""What ``data from-panoramas`` finds and how it turns it (issue 25, items 5 and 7).

- **Links** (item 5): ``ln -s . p/again`` inside a panorama folder made every panorama be found
  twice, and copies landed in two splits (train and test): leakage, with exit 0 even under
  ``--strict``. Folders and image files are now searched once by their resolved path; a link
  to something found already is reported (and fails ``--strict``).
- **Large panoramas** (item 9): Pillow's decompression-bomb limit (89 Mpixel a warning printed
  raw, 179 an error) refused 200-Mpixel panoramas as "unreadable". The converters apply their
  own ``--max-pixels`` (default 600 Mpixel) to the size before decoding, and say so.
- **EXIF orientation** (item 7): a JPEG tagged "rotate 180°" was converted upside down, and one
  tagged 6 (a portrait stored sideways, shown 2:1) was refused as "not 2:1". Images are now
  turned upright as the tag says before anything else.
"""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
from PIL import Image

from pyskick.data import ViewgridFile
from pyskick.data.panoramas import PanoramaSource, convert_panoramas, find_panoramas
from pyskick.data.panoramas import panorama_viewgrid as viewgrid
from pyskick_cli.main import main

W, H = 128, 64
ORIENTATION = 0x0112  # the EXIF tag


def _panorama(seed: int) -> np.ndarray:
    """A smooth, asymmetric uint8 ``[H, W, 3]`` panorama (so a turn cannot go unnoticed)."""
    y, x = np.mgrid[0:H, 0:W].astype(np.float64)
    phase = seed * 0.7
    rgb = np.stack(
        [
            128 + 100 * np.sin(x / W * 2 * np.pi + phase) * (y / H),
            40 + 200 * (y / H) ** 2,
            128 + 90 * np.cos(x / W * 4 * np.pi - phase) * (1 - y / H),
        ],
        axis=-1,
    )
    return np.clip(np.rint(rgb), 0, 255).astype(np.uint8)


def _folder(root: Path, count: int = 4) -> Path:
    root.mkdir(parents=True)
    for k in range(count):
        Image.fromarray(_panorama(k)).save(root / f"p{k}.png")
    return root


def _run(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    with pytest.raises(SystemExit) as exit_info:
        main(args)
    return int(exit_info.value.code or 0), capsys.readouterr().err


def test_a_link_loop_is_searched_once(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "p")
    (folder / "again").symlink_to(".")
    sources, problems = find_panoramas(folder)
    assert [s.path.name for s in sources] == ["p0.png", "p1.png", "p2.png", "p3.png"]
    assert all(s.path.parent == folder for s in sources)
    assert problems == [(folder / "again", f"the same folder as {folder} (a link); searched once")]


def test_two_links_to_one_folder_and_a_linked_image_are_found_once(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "p")
    (folder / "sub").mkdir()
    Image.fromarray(_panorama(9)).save(folder / "sub" / "q.png")
    (folder / "sub_link").symlink_to(folder / "sub")
    (folder / "z_alias.png").symlink_to(folder / "p0.png")
    sources, problems = find_panoramas(folder)
    names = [str(s.path.relative_to(folder)) for s in sources]
    assert names == ["p0.png", "p1.png", "p2.png", "p3.png", str(Path("sub", "q.png"))]
    assert sorted(str(p.relative_to(folder)) for p, _ in problems) == ["sub_link", "z_alias.png"]


def test_the_real_path_is_kept_whichever_sorts_first(tmp_path: Path) -> None:
    folder = _folder(tmp_path / "p", count=2)
    (folder / "z").mkdir()
    Image.fromarray(_panorama(5)).save(folder / "z" / "real.png")
    (folder / "a_alias.png").symlink_to(folder / "z" / "real.png")
    (folder / "a_dir").symlink_to(folder / "z")
    sources, problems = find_panoramas(folder)
    assert [str(s.path.relative_to(folder)) for s in sources] == [
        "p0.png",
        "p1.png",
        str(Path("z", "real.png")),
    ]
    assert sorted(str(p.relative_to(folder)) for p, _ in problems) == ["a_alias.png", "a_dir"]
    reasons = dict(problems)
    assert reasons[folder / "a_alias.png"] == (
        f"the same image as {folder / 'z' / 'real.png'} (a link); converted once"
    )


def test_a_cubemap_of_linked_faces_is_found_once(tmp_path: Path) -> None:
    from pyskick.data.projection import CUBE_FACES

    folder = tmp_path / "p"
    real, linked = folder / "b_cube", folder / "a_cube"
    real.mkdir(parents=True)
    linked.mkdir()
    for k, face in enumerate(CUBE_FACES):
        Image.fromarray(np.full((16, 16, 3), 40 * k, np.uint8)).save(real / f"{face}.png")
        (linked / f"{face}.png").symlink_to(real / f"{face}.png")
    sources, problems = find_panoramas(folder)
    assert [(s.path, s.kind) for s in sources] == [(real, "cubemap")]
    assert problems == [(linked, f"the same cubemap as {real} (a link); converted once")]


def test_no_panorama_reaches_two_splits_and_strict_fails_on_a_link(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path / "p", count=6)
    (folder / "again").symlink_to(".")
    out = tmp_path / "out.h5"
    code, err = _run(["data", "from-panoramas", str(folder), "--out", str(out), "--strict"], capsys)
    assert code == 2
    assert "again: the same folder as" in err
    assert not out.exists()
    code, err = _run(["data", "from-panoramas", str(folder), "--out", str(out)], capsys)
    assert code == 0, err
    assert "again" in err  # reported as skipped
    f = ViewgridFile(out)
    names = [n for split in f.splits for n in f.sample_names(split)]
    assert sorted(names) == [f"p{k}.png" for k in range(6)]  # each once, in one split
    with h5py.File(out) as h:
        assert sum(h[s].shape[0] for s in f.splits) == 6


def _save_tagged(path: Path, stored: np.ndarray, orientation: int, fmt: str) -> None:
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    Image.fromarray(stored).save(
        path, format=fmt, exif=exif, **({"quality": 95} if fmt == "JPEG" else {})
    )


@pytest.mark.parametrize("fmt", ["PNG", "JPEG"])
@pytest.mark.parametrize(
    ("orientation", "store"),
    [
        (3, lambda a: np.rot90(a, 2)),  # stored upside down, to be rotated 180°
        (6, lambda a: np.rot90(a, 1)),  # stored turned left (portrait), to be turned right
        (8, lambda a: np.rot90(a, -1)),  # stored turned right, to be turned left
        (2, lambda a: a[:, ::-1]),  # stored mirrored
    ],
)
def test_exif_orientation_is_applied(tmp_path: Path, fmt: str, orientation: int, store) -> None:
    upright = _panorama(3)
    suffix = ".png" if fmt == "PNG" else ".jpg"
    plain, tagged = tmp_path / f"plain{suffix}", tmp_path / f"tagged{suffix}"
    Image.fromarray(upright).save(plain, format=fmt, **({"quality": 95} if fmt == "JPEG" else {}))
    _save_tagged(tagged, np.ascontiguousarray(store(upright)), orientation, fmt)
    want = viewgrid(PanoramaSource(plain, "equirect")).float()
    got = viewgrid(PanoramaSource(tagged, "equirect")).float()
    # PNG is lossless: exact; JPEG compresses the turned blocks a little differently.
    tolerance = 0.0 if fmt == "PNG" else 2.0
    assert (got - want).abs().mean() <= tolerance
    # Read without the tag, the stored image is another panorama (or not 2:1 at all).
    if store(upright).shape == upright.shape:
        Image.fromarray(np.ascontiguousarray(store(upright))).save(
            tmp_path / f"raw{suffix}", format=fmt
        )
        raw = viewgrid(PanoramaSource(tmp_path / f"raw{suffix}", "equirect")).float()
        assert (raw - want).abs().mean() > 10


@pytest.mark.parametrize("orientation", [0, 9])
def test_an_orientation_that_is_not_one_is_read_as_stored(tmp_path: Path, orientation) -> None:
    upright = _panorama(2)
    Image.fromarray(upright).save(tmp_path / "a.png")
    exif = Image.Exif()
    exif[ORIENTATION] = orientation
    Image.fromarray(upright).save(tmp_path / "b.png", exif=exif)
    a = viewgrid(PanoramaSource(tmp_path / "a.png", "equirect"))
    assert torch.equal(a, viewgrid(PanoramaSource(tmp_path / "b.png", "equirect")))


def test_exif_that_cannot_be_parsed_counts_as_no_tag(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """A broken EXIF block (truncated) must neither stop the conversion nor turn the image."""
    upright = _panorama(4)
    Image.fromarray(upright).save(tmp_path / "a.png")
    Image.fromarray(upright).save(
        tmp_path / "b.png", exif=b"Exif\x00\x00MM\x00*\x00\x00\x00\x08\x00\x05"
    )
    a = viewgrid(PanoramaSource(tmp_path / "a.png", "equirect"))
    with caplog.at_level("WARNING", logger="pyskick"):
        assert torch.equal(a, viewgrid(PanoramaSource(tmp_path / "b.png", "equirect")))
    assert f"{tmp_path / 'b.png'}: EXIF ignored (Corrupt EXIF data" in caplog.text


def test_an_untagged_image_is_read_as_stored(tmp_path: Path) -> None:
    upright = _panorama(1)
    Image.fromarray(upright).save(tmp_path / "a.png")
    Image.fromarray(upright).save(tmp_path / "b.png", exif=Image.Exif())
    a = viewgrid(PanoramaSource(tmp_path / "a.png", "equirect"))
    assert torch.equal(a, viewgrid(PanoramaSource(tmp_path / "b.png", "equirect")))


def test_convert_uses_the_upright_images(tmp_path: Path) -> None:
    folder = tmp_path / "p"
    folder.mkdir()
    for k in range(3):
        _save_tagged(
            folder / f"p{k}.png", np.ascontiguousarray(np.rot90(_panorama(k), 1)), 6, "PNG"
        )
    f = ViewgridFile(convert_panoramas(folder, tmp_path / "out.h5", strict=True))
    assert sum(f.num_samples(s) for s in f.splits) == 3


def test_pillows_bomb_limit_does_not_refuse_a_panorama_and_is_restored(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, recwarn: pytest.WarningsRecorder
) -> None:
    """Pillow's limit set below the image (as 200 Mpixel is above the real one) is lifted for
    the converter's read only, with no warning of Pillow's printed."""
    Image.fromarray(_panorama(1)).save(tmp_path / "a.png")
    monkeypatch.setattr(Image, "MAX_IMAGE_PIXELS", 1000)  # 128 x 64 = 8192: > 2x, an error
    with pytest.raises(Image.DecompressionBombError):
        Image.open(tmp_path / "a.png")
    got = viewgrid(PanoramaSource(tmp_path / "a.png", "equirect"))
    assert got.shape == (4, 8, 3, 32, 32)
    assert Image.MAX_IMAGE_PIXELS == 1000
    assert not [w for w in recwarn if issubclass(w.category, Image.DecompressionBombWarning)]


def test_max_pixels_refuses_a_larger_image_by_name_before_decoding(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = _folder(tmp_path / "p", count=3)
    out = tmp_path / "out.h5"
    args = ["data", "from-panoramas", str(folder), "--out", str(out)]
    code, err = _run([*args, "--strict", "--max-pixels", "8000"], capsys)
    assert code == 2
    assert (
        f"{folder / 'p0.png'}: 128x64 is 8,192 pixels, more than --max-pixels 8,000 allows"
    ) in err
    assert "(and 2 more)" in err
    assert not out.exists()
    code, err = _run([*args, "--strict", "--max-pixels", "8192"], capsys)
    assert code == 0, err
    code, err = _run(
        [
            "data",
            "from-panoramas",
            str(folder),
            "--out",
            str(tmp_path / "o.h5"),
            "--max-pixels",
            "0",
        ],
        capsys,
    )
    assert code == 2
    assert "--max-pixels" in err


def test_the_limit_holds_only_inside_its_block(tmp_path: Path) -> None:
    from pyskick.data.panoramas import max_pixels

    Image.fromarray(_panorama(1)).save(tmp_path / "a.png")
    with max_pixels(100), pytest.raises(ValueError, match="more than --max-pixels 100 allows"):
        viewgrid(PanoramaSource(tmp_path / "a.png", "equirect"))
    assert viewgrid(PanoramaSource(tmp_path / "a.png", "equirect")).shape == (4, 8, 3, 32, 32)
    for bad in (0, -1, True, 1.5):
        with (
            pytest.raises(ValueError, match="max_pixels must be a positive int"),
            max_pixels(bad),  # type: ignore[arg-type]
        ):
            pass
