"""synthetic-scenes: deterministic, scene-like panoramas cut into SUN360-shaped viewgrids."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest
import torch

from pyskick.data import SUN360, ViewgridFile
from pyskick.data.synthetic_scenes import (
    check_view_size,
    generate_synthetic_scenes,
    render_panorama,
    render_viewgrids,
    split_sizes,
)


def test_scene_depends_only_on_seed_and_index() -> None:
    a = render_viewgrids(7, range(5))
    b = render_viewgrids(7, [3, 4])
    assert a.shape == (5, *SUN360.view_shape)
    assert a.dtype == torch.uint8
    assert torch.equal(a[3:], b)
    assert not torch.equal(render_viewgrids(8, [3]), a[3:4])
    assert not torch.equal(a[0], a[1])


def test_worker_processes_paint_the_same_scenes(monkeypatch: pytest.MonkeyPatch) -> None:
    # Batches of 2, so that 7 scenes are 4 tasks spread over 3 worker processes (last one short).
    monkeypatch.setattr("pyskick.data.synthetic_scenes._BATCH", 2)
    alone = render_viewgrids(5, range(7), workers=1)
    assert torch.equal(render_viewgrids(5, range(7), workers=3), alone)
    assert torch.equal(render_viewgrids(5, range(7)), alone)


def test_panoramas_look_like_scenes() -> None:
    panoramas = np.stack([render_panorama(0, i) for i in range(24)]).astype(np.float64)
    assert panoramas.shape == (24, 128, 256, 3)
    # The upper half (sky or ceiling) is brighter than the lower half (ground or floor).
    top = panoramas[:, :48].mean(axis=(1, 2, 3))
    bottom = panoramas[:, 80:].mean(axis=(1, 2, 3))
    assert (top > bottom).mean() >= 0.75
    # Colourful: not grey, and using much of the range.
    assert panoramas.std() > 30
    assert np.abs(panoramas[..., 2] - panoramas[..., 0]).mean() > 10


def test_views_differ_in_how_informative_they_are() -> None:
    grids = render_viewgrids(1, range(16)).float()
    detail = (grids[..., 1:] - grids[..., :-1]).abs().mean(dim=(-1, -2, -3))  # [B, N, M]
    spread = detail.flatten(1)
    # Within each scene some views are far busier than others (landmarks, horizon vs sky).
    ratio = spread.max(dim=1).values / spread.min(dim=1).values.clamp(min=0.1)
    assert (ratio > 3).float().mean() >= 0.75
    # The busiest view is not always at the same place.
    assert len(set(spread.argmax(dim=1).tolist())) >= 4


def test_split_sizes() -> None:
    assert split_sizes(2000) == (1600, 200, 200)
    assert split_sizes(3) == (1, 1, 1)
    assert sum(split_sizes(11)) == 11
    with pytest.raises(ValueError, match="at least 3"):
        split_sizes(2)


def test_generate_writes_a_valid_file(tmp_path: Path) -> None:
    path = generate_synthetic_scenes(tmp_path / "s.h5", num=10, seed=3)
    f = ViewgridFile(path)
    assert f.spec == SUN360
    assert [f.num_samples(s) for s in f.splits] == [8, 1, 1]
    assert f.attrs["generator"] == "synthetic-scenes"
    assert f.attrs["seed"] == 3
    assert torch.equal(f.split("test")[0], render_viewgrids(3, [9])[0])
    with pytest.raises(ValueError, match="seed"):
        generate_synthetic_scenes(tmp_path / "t.h5", num=10, seed=-1)
    assert not (tmp_path / "t.h5").exists()


def test_smaller_views_cut_the_same_scenes(tmp_path: Path) -> None:
    path = generate_synthetic_scenes(tmp_path / "s16.h5", num=10, seed=3, view_size=16)
    f = ViewgridFile(path)
    assert f.spec == dataclasses.replace(SUN360, view_size=16)
    assert f.split("train").load().shape == (8, 4, 8, 3, 16, 16)
    assert "view_size=16" in f.attrs["source"]
    # The same panoramas in the same views: each 16-pixel view is its 32-pixel view seen at
    # half the resolution, so their mean colours agree within a level (both are
    # supersampled from the same panorama, not one downsampled from the other).
    small = f.split("train").load().double().mean(dim=(-1, -2))
    large = render_viewgrids(3, range(8)).double().mean(dim=(-1, -2))
    assert (small - large).abs().max() < 1
    assert (small - large).abs().mean() < 0.2
    # Not the same views as another scene's.
    assert (small[1:] - large[:-1]).abs().mean() > 10


@pytest.mark.parametrize(
    ("view_size", "error", "match"),
    [
        (8, ValueError, "at least 16, got 8"),
        (20, ValueError, "multiple of 8 and at least 16, got 20"),
        (16.0, TypeError, "view_size must be an int, got float"),
        (True, TypeError, "got bool"),
    ],
)
def test_view_sizes_the_policies_cannot_take_are_refused(
    tmp_path: Path, view_size: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        check_view_size(view_size)  # type: ignore[arg-type]
    with pytest.raises(error, match=match):
        generate_synthetic_scenes(tmp_path / "v.h5", num=10, seed=3, view_size=view_size)  # type: ignore[arg-type]
    assert not (tmp_path / "v.h5").exists()
    check_view_size(24)
