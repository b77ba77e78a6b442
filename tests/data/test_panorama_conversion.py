"""from-panoramas on the real CC0 panoramas in ../shared/data, cubemaps, and bad inputs."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np
import pytest
import torch
from PIL import Image

from pyskick.data import SUN360, ViewgridFile
from pyskick.data.panoramas import (
    assign_splits,
    convert_panoramas,
    find_panoramas,
    load_equirect,
    parse_split,
)
from pyskick.data.projection import CUBE_FACES, equirect_to_cubemap, equirect_to_viewgrid

SUBSET = (
    "blender_city",
    "blender_forest",
    "blender_sunset",
    "pmndrs_park",
    "pmndrs_venice",
    "pmndrs_esplanade",
)


def _shared_dir() -> Path:
    env = os.environ.get("PYSKICK_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared"


PANORAMAS = _shared_dir() / "data" / "panoramas"
needs_panoramas = pytest.mark.skipif(
    not PANORAMAS.is_dir(), reason=f"real sample panoramas not found at {PANORAMAS}"
)


@pytest.fixture(scope="module")
def converted(tmp_path_factory: pytest.TempPathFactory) -> ViewgridFile:
    folder = tmp_path_factory.mktemp("panoramas")
    for name in SUBSET:
        (folder / f"{name}.png").symlink_to(PANORAMAS / f"{name}.png")
    out = tmp_path_factory.mktemp("out") / "real.h5"
    skipped: list[tuple[Path, str]] = []
    convert_panoramas(folder, out, seed=1, report=lambda p, r: skipped.append((p, r)))
    assert skipped == []
    return ViewgridFile(out)


def _all_views(f: ViewgridFile) -> torch.Tensor:
    return torch.cat([f.split(s).load() for s in f.splits]).float()


@needs_panoramas
def test_real_panoramas_convert_to_sun360_viewgrids(converted: ViewgridFile) -> None:
    assert converted.spec == SUN360
    assert sum(converted.num_samples(s) for s in converted.splits) == len(SUBSET)
    assert all(converted.num_samples(s) >= 1 for s in ("train", "val", "test"))
    names = [name for s in converted.splits for name in converted.sample_names(s) or []]
    assert sorted(names) == sorted(f"{n}.png" for n in SUBSET)


@needs_panoramas
def test_sky_rows_are_brighter_than_ground_rows(converted: ViewgridFile) -> None:
    views = _all_views(converted)  # [B, N, M, C, H, W]
    per_row = views.mean(dim=(0, 2, 3, 4, 5))
    assert per_row[0] > per_row[-1] + 20
    # Every outdoor panorama here has a sky above its ground.
    per_grid = views.mean(dim=(2, 3, 4, 5))
    assert (per_grid[:, 0] > per_grid[:, -1]).all()


@needs_panoramas
def test_neighbouring_views_continue_each_other(converted: ViewgridFile) -> None:
    views = _all_views(converted)
    horizon = views[:, 1:3]  # elevations 15 and -15, close to zero elevation
    right_edge = horizon[..., -1]  # [B, 2, M, C, H]
    left_edge = horizon[..., 0]
    # Right edge of view m against left edge of view m+1 (with wrap) ...
    neighbours = (right_edge - torch.roll(left_edge, -1, dims=2)).abs().mean()
    # ... against the left edge of a random other view of the same row.
    gen = torch.Generator().manual_seed(0)
    shift = torch.randint(2, 7, (1,), generator=gen).item()
    random_pairs = (right_edge - torch.roll(left_edge, -shift, dims=2)).abs().mean()
    assert neighbours < 0.5 * random_pairs


@needs_panoramas
def test_no_seam_where_the_image_edges_meet() -> None:
    # Rolling the image by half its width turns the world by 180 degrees, so the views that
    # straddle the image border must equal views from the middle of the rolled image.
    pano = load_equirect(PANORAMAS / "pmndrs_esplanade.png")[None]
    views = equirect_to_viewgrid(pano, SUN360, supersample=3).int()
    rolled = equirect_to_viewgrid(torch.roll(pano, pano.shape[-1] // 2, -1), SUN360, supersample=3)
    assert (views - torch.roll(rolled.int(), 4, dims=2)).abs().max() <= 1


def _write_cubemap(folder: Path, panorama: torch.Tensor, size: int) -> None:
    folder.mkdir()
    faces = equirect_to_cubemap(panorama[None], size)[0]
    for name, face in zip(CUBE_FACES, faces, strict=True):
        Image.fromarray(face.permute(1, 2, 0).numpy()).save(folder / f"{name}.png")


@needs_panoramas
def test_cubemap_folder_converts_like_its_equirect_source(tmp_path: Path) -> None:
    pano = load_equirect(PANORAMAS / "pmndrs_venice.png")
    folder = tmp_path / "in"
    folder.mkdir()
    _write_cubemap(folder / "venice_cube", pano, 128)
    # Three copies so that each split gets one sample (copies: links are searched once).
    for k in (1, 2):
        shutil.copytree(folder / "venice_cube", folder / f"copy{k}")
    sources, problems = find_panoramas(folder)
    assert [s.kind for s in sources] == ["cubemap"] * 3
    assert problems == []
    f = ViewgridFile(convert_panoramas(folder, tmp_path / "cube.h5"))
    from_cube = f.split("test")[0].float()
    from_equirect = equirect_to_viewgrid(pano[None], SUN360, supersample=3)[0].float()
    assert (from_cube - from_equirect).abs().mean() < 3.0
    # Far closer than two different views of the same panorama.
    other = torch.roll(from_equirect, 1, dims=1)
    assert (from_cube - from_equirect).abs().mean() < 0.2 * (from_cube - other).abs().mean()


def _good_image(path: Path, size: tuple[int, int] = (64, 32), seed: int = 0) -> None:
    rng = np.random.default_rng(seed)
    array = rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)
    Image.fromarray(array).save(path)


def test_bad_files_are_reported_by_path_and_skipped(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(3):
        _good_image(folder / f"good{k}.png", seed=k)
    _good_image(folder / "square.jpg", size=(32, 32))
    (folder / "broken.png").write_bytes(b"\x89PNG not really")
    partial = folder / "partial_cube"
    partial.mkdir()
    _good_image(partial / "posx.png", size=(16, 16))
    skipped: list[tuple[Path, str]] = []
    out = tmp_path / "out.h5"
    convert_panoramas(folder, out, report=lambda p, r: skipped.append((p, r)))
    reasons = {p.name: r for p, r in skipped}
    assert set(reasons) == {"square.jpg", "broken.png", "partial_cube"}
    assert "2:1" in reasons["square.jpg"]
    assert "unreadable" in reasons["broken.png"]
    assert "missing faces negx" in reasons["partial_cube"]
    assert sum(ViewgridFile(out).num_samples(s) for s in ("train", "val", "test")) == 3


def test_strict_fails_and_writes_nothing(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    for k in range(3):
        _good_image(folder / f"good{k}.png", seed=k)
    (folder / "broken.jpg").write_bytes(b"garbage")
    out = tmp_path / "out.h5"
    with pytest.raises(ValueError, match=r"broken\.jpg: unreadable image"):
        convert_panoramas(folder, out, strict=True)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["in"]


def test_too_few_panoramas(tmp_path: Path) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    _good_image(folder / "one.png")
    with pytest.raises(ValueError, match="at least 3 readable inputs"):
        convert_panoramas(folder, tmp_path / "o.h5", report=lambda p, r: None)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match="no panoramas"):
        convert_panoramas(empty, tmp_path / "o.h5")


def test_splits_are_deterministic_and_cover_everything() -> None:
    a = assign_splits(20, (0.7, 0.15, 0.15), seed=4)
    b = assign_splits(20, (0.7, 0.15, 0.15), seed=4)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    assert [len(a[k]) for k in ("train", "val", "test")] == [14, 3, 3]
    assert sorted(np.concatenate(list(a.values())).tolist()) == list(range(20))
    assert [len(v) for v in assign_splits(3, (0.98, 0.01, 0.01), 0).values()] == [1, 1, 1]
    assert parse_split("7,1.5,1.5") == pytest.approx((0.7, 0.15, 0.15))
    with pytest.raises(ValueError, match="three positive"):
        parse_split("0.5,0.5")
