"""Sidekick reward collection: raw rewards, neighbourhood zeroing, the start view, revisits."""

from __future__ import annotations

import pytest
import torch

from pyskick.envs import ActionGrid, LookAroundEnv, neighbourhood

N, M = 4, 8
GRID = ActionGrid()


def grids(B: int = 1) -> torch.Tensor:
    return torch.zeros(B, N, M, 1, 2, 2, dtype=torch.uint8)


def ramp(B: int = 1) -> torch.Tensor:
    """Reward maps whose every cell is distinct and nonzero: 1 + v for view v."""
    return (torch.arange(N * M, dtype=torch.float32) + 1).reshape(1, N, M).repeat(B, 1, 1)


def zeroed(env: LookAroundEnv) -> set[tuple[int, int]]:
    return {tuple(cell) for cell in (env.reward_map[0] == 0).nonzero().tolist()}


def window(ms: list[int], rows: list[int]) -> set[tuple[int, int]]:
    return {(r, c) for r in rows for c in ms}


def test_a_move_collects_the_raw_reward_and_zeroes_the_3x3_window() -> None:
    env = LookAroundEnv(reward_radius=1, start_zeroing="neighbourhood")
    maps = ramp() * 10  # raw 0–255-like values: no scaling inside the env
    env.reset(grids(), starts=torch.tensor([1 * M + 2]), reward_maps=maps)
    reward = env.step(torch.tensor([GRID.index(1, 2)])).reward  # to (2, 4)
    assert reward.dtype == torch.float32
    assert reward.tolist() == [float(maps[0, 2, 4])]
    start_window = window([1, 2, 3], [0, 1, 2])
    assert zeroed(env) == start_window | window([3, 4, 5], [1, 2, 3])
    untouched = ~env.reward_map[0].eq(0)
    assert torch.equal(env.reward_map[0][untouched], maps[0][untouched])


def test_zeroing_wraps_across_the_azimuth_seam() -> None:
    env = LookAroundEnv(reward_radius=1, start_zeroing="neighbourhood")
    env.reset(grids(), starts=torch.tensor([2 * M + 1]), reward_maps=ramp())
    assert zeroed(env) == window([0, 1, 2], [1, 2, 3])
    env.step(torch.tensor([GRID.index(0, -1)]))  # to (2, 0): also zeroes azimuth M - 1
    assert zeroed(env) == window([M - 1, 0, 1, 2], [1, 2, 3])

    wide = LookAroundEnv(reward_radius=2, start_zeroing="neighbourhood")
    wide.reset(grids(), starts=torch.tensor([1 * M + M - 1]), reward_maps=ramp())
    assert zeroed(wide) == window([M - 3, M - 2, M - 1, 0, 1], [0, 1, 2, 3])


def test_zeroing_does_not_cross_elevation_borders() -> None:
    env = LookAroundEnv(reward_radius=1, start_zeroing="neighbourhood")
    env.reset(grids(), starts=torch.tensor([0 * M + 4]), reward_maps=ramp())
    assert zeroed(env) == window([3, 4, 5], [0, 1])  # row N - 1 keeps its rewards
    env.reset(grids(), starts=torch.tensor([(N - 1) * M + 4]), reward_maps=ramp())
    assert zeroed(env) == window([3, 4, 5], [N - 2, N - 1])


def test_with_wrapping_elevation_the_zeroing_wraps_too() -> None:
    env = LookAroundEnv(reward_radius=1, wrap_elevation=True, start_zeroing="neighbourhood")
    env.reset(grids(), starts=torch.tensor([0 * M + 4]), reward_maps=ramp())
    assert zeroed(env) == window([3, 4, 5], [N - 1, 0, 1])


def test_the_start_view_never_pays_and_revisits_collect_nothing() -> None:
    env = LookAroundEnv(T=6, reward_radius=1)  # the default rule: the start view is spent
    maps = ramp()
    env.reset(grids(), starts=torch.tensor([1 * M + 1]), reward_maps=maps)
    assert float(env.reward_map[0, 1, 1]) == 0.0
    rewards = []
    for d_elev, d_azim in [(0, 0), (0, 2), (0, 2), (0, -2), (0, -2)]:
        rewards.append(float(env.step(torch.tensor([GRID.index(d_elev, d_azim)])).reward[0]))
    # stay (start), (1, 3) new, (1, 5) new, back to (1, 3), back to the start
    assert rewards == [0.0, float(maps[0, 1, 3]), float(maps[0, 1, 5]), 0.0, 0.0]


def test_radius_zero_spends_only_the_visited_view() -> None:
    env = LookAroundEnv(reward_radius=0)
    env.reset(grids(), starts=torch.tensor([5]), reward_maps=ramp())
    assert zeroed(env) == {(0, 5)}
    assert env.step(torch.tensor([GRID.index(0, 1)])).reward.tolist() == [7.0]


def test_rewards_are_per_sample_and_the_input_maps_are_not_modified() -> None:
    maps = torch.stack([ramp()[0], ramp()[0] * 2])
    before = maps.clone()
    env = LookAroundEnv()
    env.reset(grids(2), starts=torch.tensor([0, 0]), reward_maps=maps)
    reward = env.step(torch.tensor([GRID.index(1, 2), GRID.index(1, 2)])).reward
    assert reward.tolist() == [float(maps[0, 1, 2]), float(maps[1, 1, 2])]
    assert torch.equal(maps, before)


def test_without_reward_maps_the_reward_is_zero() -> None:
    env = LookAroundEnv()
    env.reset(grids(3))
    assert env.reward_map is None
    reward = env.step(torch.tensor([0, 7, 14])).reward
    assert reward.dtype == torch.float32
    assert reward.tolist() == [0.0, 0.0, 0.0]


def test_neighbourhood_matrix() -> None:
    near = neighbourhood(N, M, 1, wrap_elevation=False, wrap_azimuth=True)
    assert near.shape == (N * M, N * M)
    assert torch.equal(near, near.T)
    assert near.sum(1).reshape(N, M)[:, 0].tolist() == [6, 9, 9, 6]
    everything = neighbourhood(N, M, max(N, M), wrap_elevation=False, wrap_azimuth=True)
    assert bool(everything.all())


@pytest.mark.parametrize(
    ("maps", "error", "match"),
    [
        (torch.zeros(1, N, M, dtype=torch.float64), TypeError, "reward_maps must be float32"),
        (torch.zeros(1, M, N), ValueError, r"reward_maps must have shape \[1, 4, 8\]"),
        (torch.full((1, N, M), float("nan")), ValueError, "NaN or infinite"),
        (torch.zeros(1, N, M, device="meta"), ValueError, "reward_maps must be on cpu"),
    ],
)
def test_invalid_reward_maps_are_refused(maps: torch.Tensor, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        LookAroundEnv().reset(grids(), reward_maps=maps)


@pytest.mark.parametrize(
    ("rule", "spent"),
    [
        ("neighbourhood", window([1, 2, 3], [0, 1, 2])),
        ("view", {(1, 2)}),
        ("none", set()),
    ],
)
def test_start_zeroing_rules(rule: str, spent: set[tuple[int, int]]) -> None:
    env = LookAroundEnv(T=3, reward_radius=1, start_zeroing=rule)
    maps = ramp()
    env.reset(grids(), starts=torch.tensor([1 * M + 2]), reward_maps=maps)
    assert zeroed(env) == spent
    # A move to a neighbour of the start pays unless the rule spent it.
    reward = float(env.step(torch.tensor([GRID.index(0, 1)])).reward[0])  # to (1, 3)
    assert reward == (0.0 if rule == "neighbourhood" else float(maps[0, 1, 3]))
    # Returning to the start pays only under the authors' rule (nothing spent at reset)...
    back = float(env.step(torch.tensor([GRID.index(0, -1)])).reward[0])
    # ... except that the visit to (1, 3) zeroed its own neighbourhood, the start included.
    assert back == 0.0
    again = LookAroundEnv(T=2, reward_radius=0, start_zeroing=rule)
    again.reset(grids(), starts=torch.tensor([1 * M + 2]), reward_maps=maps)
    stay = float(again.step(torch.tensor([GRID.index(0, 0)])).reward[0])
    assert stay == (float(maps[0, 1, 2]) if rule == "none" else 0.0)


def test_unknown_start_zeroing_is_refused() -> None:
    assert LookAroundEnv().start_zeroing == "view"
    with pytest.raises(ValueError, match="start_zeroing must be one of view, neighbourhood, none"):
        LookAroundEnv(start_zeroing="all")
