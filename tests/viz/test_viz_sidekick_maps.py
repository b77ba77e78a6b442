"""Reward-sidekick score maps and the coverage grid of grids."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from pyskick.ops import nms_rewards
from pyskick.viz import draw_sidekick_maps, plot_coverage_grid, plot_reward_maps
from pyskick.viz.sidekick_maps import INNER_GAP, _one_view_coverage, coverage_mosaic


def _grid(seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, 256, (3, 4, 3, 16, 16), generator=g, dtype=torch.uint8)


def test_reward_maps_png(tmp_path, assert_real_png):
    normal = torch.rand(3, 4, generator=torch.Generator().manual_seed(0))
    out = plot_reward_maps(normal, nms_rewards(normal[None], 2, 1)[0], _grid(), tmp_path / "r.png")
    assert_real_png(out, min_size=(600, 150))


def test_coverage_grid_png_and_layout(tmp_path, assert_real_png):
    N, M = 3, 4
    coverage = torch.rand(N * M, N * M, generator=torch.Generator().manual_seed(1))
    assert_real_png(plot_coverage_grid(coverage, _grid(), tmp_path / "c.png"), min_size=(400, 300))
    big = coverage_mosaic(coverage.double().numpy(), N, M)
    assert big.shape == (N * (N + INNER_GAP) - INNER_GAP, M * (M + INNER_GAP) - INNER_GAP)
    for i, j, n, m in [(0, 0, 0, 0), (1, 2, 2, 3), (2, 3, 1, 0)]:
        cell = big[i * (N + INNER_GAP) + n, j * (M + INNER_GAP) + m]
        assert cell == pytest.approx(float(coverage[i * M + j, n * M + m]))
    assert np.isnan(big[N, 0])  # the gap between block rows


@pytest.mark.parametrize(
    ("call", "error", "match"),
    [
        (lambda p: plot_reward_maps(torch.rand(3, 5), torch.rand(3, 4), _grid(), p),
         ValueError, r"normal must have shape \[3, 4\]"),
        (lambda p: plot_reward_maps(torch.rand(3, 4), torch.ones(3, 4).long(), _grid(), p),
         TypeError, "nms must be a floating-point tensor"),
        (lambda p: plot_reward_maps(torch.full((3, 4), torch.nan), torch.rand(3, 4), _grid(), p),
         ValueError, "NaN"),
        (lambda p: plot_coverage_grid(torch.rand(12, 11), _grid(), p),
         ValueError, r"coverage must have shape \[12, 12\]"),
        (lambda p: plot_coverage_grid(torch.rand(12, 12), _grid().float(), p),
         TypeError, "grid must be uint8"),
        (lambda p: plot_coverage_grid(torch.rand(12, 12), _grid(), p.with_suffix(".gif")),
         ValueError, "must end with"),
    ],
)  # fmt: skip
def test_bad_inputs_write_nothing(tmp_path, call, error, match):
    with pytest.raises(error, match=match):
        call(tmp_path / "out" / "f.png")
    assert not (tmp_path / "out").exists()


def test_maps_from_a_one_view_run(tiny_runs, tmp_path, assert_real_png):
    grids = tiny_runs.data.val[:2]
    mean = tiny_runs.data.channel_mean
    paths = draw_sidekick_maps(
        tiny_runs.one_view, grids, channel_mean=mean, out_dir=tmp_path, names=["a", "b"]
    )
    assert [p.name for p in paths] == [
        "a_reward_maps.png", "a_coverage.png", "b_reward_maps.png", "b_coverage.png"
    ]  # fmt: skip
    for path in paths:
        assert_real_png(path, min_size=(400, 150))
    coverage = _one_view_coverage(tiny_runs.one_view, grids, channel_mean=mean, device="cpu")
    assert coverage.shape == (2, 12, 12)
    # Min-max normalised over sources for each target (max just below 1: the 1e-8 guard).
    torch.testing.assert_close(coverage.amin(1), torch.zeros(2, 12), atol=1e-6, rtol=0)
    assert bool(((coverage.amax(1) > 0) & (coverage.amax(1) <= 1)).all())
    with pytest.raises(ValueError, match="one entry per viewgrid"):
        draw_sidekick_maps(tiny_runs.one_view, grids, channel_mean=mean, out_dir=tmp_path, names=[])
