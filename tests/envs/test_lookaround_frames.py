"""Normalisation, the start-relative target, pasting observed views, and the absolute frame."""

from __future__ import annotations

import pytest
import torch

from pyskick.envs import ActionGrid, LookAroundEnv, denormalize_views, normalize_views

N, M, C, H, W = 4, 8, 3, 2, 3
MEAN = [119.16, 107.68, 95.12]
GRID = ActionGrid()


def labelled_grids(B: int) -> torch.Tensor:
    """uint8 viewgrids whose every view differs: pixel values from (b, n, m, c, h, w)."""
    g = torch.Generator().manual_seed(0)
    return torch.randint(0, 256, (B, N, M, C, H, W), dtype=torch.uint8, generator=g)


def test_views_are_mean_subtracted_and_divided_by_255() -> None:
    grids = torch.zeros(1, N, M, C, H, W, dtype=torch.uint8)
    grids[0, 1, 2] = torch.tensor([0, 255, 119], dtype=torch.uint8)[:, None, None]
    env = LookAroundEnv(channel_mean=MEAN)
    view = env.reset(grids, starts=torch.tensor([1 * M + 2])).view
    assert view.dtype == torch.float32
    assert view.shape == (1, C, H, W)
    expected = [(0 - 119.16) / 255, (255 - 107.68) / 255, (119 - 95.12) / 255]
    assert view[0, :, 0, 0].tolist() == pytest.approx(expected, abs=1e-6)
    assert torch.equal(view[0, :, 1:, 1:], view[0, :, :1, :1].expand(C, 1, 2))
    assert bool((env.grid >= -1).all() and (env.grid <= 1).all())


def test_float32_grids_and_no_mean_give_x_over_255() -> None:
    grids = labelled_grids(2)
    env = LookAroundEnv()
    env.reset(grids.float(), starts=torch.tensor([0, 0]))
    assert torch.allclose(env.grid, grids.float() / 255, atol=0, rtol=1e-6)
    env_u8 = LookAroundEnv()
    env_u8.reset(grids, starts=torch.tensor([0, 0]))
    assert torch.equal(env.grid, env_u8.grid)


DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.cuda,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
        ],
    ),
]


@pytest.mark.parametrize("device", DEVICES)
def test_normalized_views_are_exactly_rounded_on_every_device(device: str) -> None:
    # Every 0-255 value against three means: the quotient rounded once (float32 division is
    # exactly the float64 quotient rounded), not a multiplication by 1/255 (one bit off).
    raw = torch.arange(256, dtype=torch.uint8).repeat(3, 1).reshape(1, 3, 16, 16)
    mean = torch.tensor(MEAN)
    exact = ((raw.float() - mean[:, None, None]).double() / 255).float()
    assert torch.equal(normalize_views(raw.to(device), mean.to(device)).cpu(), exact)


def test_normalize_round_trip() -> None:
    grids = labelled_grids(1)
    mean = torch.tensor(MEAN)
    normalised = normalize_views(grids, mean)
    assert torch.allclose(denormalize_views(normalised, mean), grids.float(), atol=1e-4)


def test_target_slot_k_is_absolute_azimuth_start_plus_k() -> None:
    grids = labelled_grids(3)
    starts = torch.tensor([1 * M + 0, 2 * M + 5, 3 * M + 7])
    env = LookAroundEnv(channel_mean=MEAN)
    env.reset(grids, starts=starts)
    expected_grid = normalize_views(grids, torch.tensor(MEAN))
    assert torch.equal(env.grid, expected_grid)
    for b, start in enumerate(starts.tolist()):
        start_m = start % M
        for k in range(M):
            assert torch.equal(env.target[b, :, k], expected_grid[b, :, (start_m + k) % M])
    assert torch.equal(env.to_absolute(env.target), env.grid)


def test_with_known_azimuth_the_target_is_the_absolute_grid() -> None:
    grids = labelled_grids(2)
    env = LookAroundEnv(known_azimuth=True, channel_mean=MEAN)
    env.reset(grids, starts=torch.tensor([5, 30]))
    # Not the authors' all-zeros target (docs/paper-reference.md §8.23).
    assert torch.equal(env.target, env.grid)
    assert bool(env.target.abs().sum() > 0)
    assert torch.equal(env.to_absolute(env.target), env.grid)


def test_paste_observed_writes_the_true_views_in_their_relative_slots() -> None:
    grids = labelled_grids(2)
    env = LookAroundEnv(T=4, channel_mean=MEAN)
    env.reset(grids, starts=torch.tensor([1 * M + 6, 0 * M + 0]))
    for move in [(0, 2), (1, 1), (0, -2)]:
        env.step(torch.full((2,), GRID.index(*move)))
    # sample 0: (1, 6) -> (1, 0) -> (2, 1) -> (2, 7); sample 1: (0, 0) -> (0, 2) -> (1, 3) -> (1, 1)
    visited = [[(1, 6), (1, 0), (2, 1), (2, 7)], [(0, 0), (0, 2), (1, 3), (1, 1)]]
    assert env.visited_views.tolist() == [[n * M + m for n, m in v] for v in visited]
    decoded = torch.full((2, N, M, C, H, W), 7.0)
    pasted = env.paste_observed(decoded)
    assert torch.equal(decoded, torch.full_like(decoded, 7.0))  # input left alone
    for b, (start_m, views) in enumerate(zip([6, 0], visited, strict=True)):
        slots = set()
        for n, m in views:
            slot = (m - start_m) % M
            slots.add((n, slot))
            assert torch.equal(pasted[b, n, slot], env.grid[b, n, m])
        for n in range(N):
            for k in range(M):
                if (n, k) not in slots:
                    assert bool((pasted[b, n, k] == 7.0).all())
    absolute = env.to_absolute(pasted)
    for b, views in enumerate(visited):
        for n, m in views:
            assert torch.equal(absolute[b, n, m], env.grid[b, n, m])


def test_paste_observed_with_known_azimuth_uses_absolute_slots() -> None:
    env = LookAroundEnv(T=2, known_azimuth=True)
    env.reset(labelled_grids(1), starts=torch.tensor([1 * M + 6]))
    env.step(torch.tensor([GRID.index(0, 2)]))  # to (1, 0)
    pasted = env.paste_observed(torch.zeros(1, N, M, C, H, W))
    assert torch.equal(pasted[0, 1, 6], env.grid[0, 1, 6])
    assert torch.equal(pasted[0, 1, 0], env.grid[0, 1, 0])
    assert int((pasted.flatten(3).abs().sum(-1) > 0).sum()) == 2


def test_paste_observed_keeps_gradients_of_the_unpasted_slots() -> None:
    env = LookAroundEnv(T=1)
    env.reset(labelled_grids(1), starts=torch.tensor([9]))
    decoded = torch.zeros(1, N, M, C, H, W, requires_grad=True)
    env.paste_observed(decoded).sum().backward()
    grad = decoded.grad.flatten(3).sum(-1)[0]
    expected = torch.full((N, M), float(C * H * W))
    expected[1, 0] = 0.0  # start (1, 1) sits in relative slot (1, 0)
    assert torch.equal(grad, expected)


@pytest.mark.parametrize(
    ("decoded", "error", "match"),
    [
        (torch.zeros(1, N, M, C, H, W, dtype=torch.int64), TypeError, "floating tensor"),
        (torch.zeros(1, N, M, C, H, H), ValueError, "decoded must have shape"),
        (torch.zeros(2, N, M, C, H, W), ValueError, "decoded must have shape"),
        (torch.zeros(1, N, M, C, H, W, device="meta"), ValueError, "decoded must be on cpu"),
        (None, TypeError, "decoded must be a torch.Tensor"),
    ],
)
def test_paste_observed_refuses_bad_grids(decoded: object, error: type, match: str) -> None:
    env = LookAroundEnv()
    env.reset(labelled_grids(1))
    with pytest.raises(error, match=match):
        env.paste_observed(decoded)  # type: ignore[arg-type]


def test_to_absolute_refuses_bad_grids() -> None:
    env = LookAroundEnv()
    env.reset(labelled_grids(1))
    with pytest.raises(ValueError, match="grid_rel must have shape"):
        env.to_absolute(torch.zeros(1, N, M + 1, C, H, W))
    with pytest.raises(TypeError, match=r"grid_rel must be a torch\.Tensor"):
        env.to_absolute("grid")  # type: ignore[arg-type]
