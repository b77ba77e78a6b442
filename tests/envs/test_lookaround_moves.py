"""Transitions, proprioception, starts, time and budget, and input validation of LookAroundEnv."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.envs import ActionGrid, LookAroundEnv

N, M = 4, 8
GRID = ActionGrid()


def grids(B: int, n: int = N, m: int = M) -> torch.Tensor:
    return torch.zeros(B, n, m, 1, 2, 2, dtype=torch.uint8)


def one_move(env: LookAroundEnv, n: int, m: int, d_elev: int, d_azim: int) -> tuple[int, list]:
    """Start at (n, m), move once; return the new view index and the proprioception."""
    env.reset(grids(1), starts=torch.tensor([n * M + m]))
    obs = env.step(torch.tensor([GRID.index(d_elev, d_azim)])).observation
    return int(obs.position[0]), obs.proprio[0].tolist()


def test_azimuth_wraps_at_both_borders() -> None:
    env = LookAroundEnv()
    assert one_move(env, 1, 0, 0, -2)[0] == 1 * M + (M - 2)
    assert one_move(env, 1, 0, 0, -1)[0] == 1 * M + (M - 1)
    assert one_move(env, 1, M - 1, 0, 2)[0] == 1 * M + 1
    assert one_move(env, 1, M - 2, 0, 2)[0] == 1 * M + 0


def test_elevation_clips_and_proprio_reports_the_commanded_delta() -> None:
    env = LookAroundEnv()
    position, proprio = one_move(env, 0, 3, -1, 1)
    assert position == 0 * M + 4  # elevation stays at 0, azimuth moves
    assert proprio == [-1, 1, 0]  # the commanded -1, as the authors' code reports
    position, proprio = one_move(env, N - 1, 3, 1, 0)
    assert position == (N - 1) * M + 3
    assert proprio == [1, 0, N - 1]


def test_wrap_elevation_and_clip_azimuth_are_configurable() -> None:
    env = LookAroundEnv(wrap_elevation=True, wrap_azimuth=False)
    assert one_move(env, 0, 3, -1, 0)[0] == (N - 1) * M + 3
    assert one_move(env, N - 1, 3, 1, 0)[0] == 0 * M + 3
    position, proprio = one_move(env, 2, 0, 0, -2)
    assert position == 2 * M + 0
    assert proprio == [0, -2, 2]
    assert one_move(env, 2, M - 1, 0, 2)[0] == 2 * M + (M - 1)
    assert one_move(env, 2, M - 2, 0, 2)[0] == 2 * M + (M - 1)


def test_known_azimuth_adds_the_absolute_azimuth_to_proprio() -> None:
    env = LookAroundEnv(known_azimuth=True)
    assert env.proprio_dim == 4
    obs = env.reset(grids(2), starts=torch.tensor([1 * M + 6, 3 * M + 0]))
    assert obs.proprio.tolist() == [[0, 0, 1, 6], [0, 0, 3, 0]]
    assert obs.proprio.dtype == torch.float32
    obs = env.step(torch.tensor([GRID.index(1, 2), GRID.index(0, -1)])).observation
    assert obs.proprio.tolist() == [[1, 2, 2, 0], [0, -1, 3, M - 1]]
    assert LookAroundEnv().proprio_dim == 3


def test_given_starts_are_the_first_positions() -> None:
    env = LookAroundEnv()
    starts = torch.tensor([0, 7, 8, 31])
    obs = env.reset(grids(4), starts=starts)
    assert obs.position.tolist() == starts.tolist()
    assert env.starts.tolist() == starts.tolist()
    assert obs.proprio[:, 2].tolist() == [0, 0, 1, 3]
    assert obs.time == 0
    assert env.visited_views.tolist() == [[0], [7], [8], [31]]


def test_random_starts_are_seeded_uniform_draws() -> None:
    env = LookAroundEnv()
    first = env.reset(grids(512), generator=torch.Generator().manual_seed(5)).position
    again = env.reset(grids(512), generator=torch.Generator().manual_seed(5)).position
    other = env.reset(grids(512), generator=torch.Generator().manual_seed(6)).position
    assert torch.equal(first, again)
    assert not torch.equal(first, other)
    assert set(first.tolist()) == set(range(N * M))


@pytest.mark.parametrize(
    ("starts", "error", "match"),
    [
        (torch.tensor([0, 32]), ValueError, r"starts must lie in \[0, 32\).*\[0, 32\]"),
        (torch.tensor([-1, 3]), ValueError, r"starts must lie in \[0, 32\)"),
        (torch.tensor([1, 2, 3]), ValueError, r"starts must have shape \[2\]"),
        (torch.tensor([1.0, 2.0]), TypeError, "starts must have an integer dtype"),
        ([1, 2], TypeError, "starts must be a \\[2\\] integer torch.Tensor"),
    ],
)
def test_invalid_starts_are_refused(starts: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        LookAroundEnv().reset(grids(2), starts=starts)  # type: ignore[arg-type]


def test_time_budget_and_bookkeeping() -> None:
    env = LookAroundEnv(T=4)
    obs = env.reset(grids(2), starts=torch.tensor([9, 0]))
    assert (obs.time, env.t, env.done) == (0, 0, False)
    assert env.actions_taken.shape == (2, 0)
    moves = [GRID.index(0, 1), GRID.index(0, 0), GRID.index(0, -1)]
    for t, action in enumerate(moves, start=1):
        obs, _, done = env.step(torch.tensor([action, action]))
        assert obs.time == t == env.t
        assert done == (t == 3) == env.done
    assert env.visited_views.tolist() == [[9, 10, 10, 9], [0, 1, 1, 0]]
    assert env.actions_taken.tolist() == [moves, moves]
    assert env.visited.shape == (2, N * M)
    assert env.visited.nonzero().tolist() == [[0, 9], [0, 10], [1, 0], [1, 1]]
    with pytest.raises(RuntimeError, match="budget of T=4 glimpses"):
        env.step(torch.tensor([7, 7]))
    env.reset(grids(2))
    assert env.t == 0


def test_one_glimpse_episodes_are_done_at_reset() -> None:
    env = LookAroundEnv(T=1)
    env.reset(grids(3))
    assert env.done
    with pytest.raises(RuntimeError, match="budget of T=1"):
        env.step(torch.tensor([7, 7, 7]))


def test_using_the_env_before_reset_is_an_error() -> None:
    env = LookAroundEnv()
    with pytest.raises(RuntimeError, match="call reset"):
        env.step(torch.tensor([7]))
    with pytest.raises(RuntimeError, match="call reset"):
        _ = env.positions


@pytest.mark.parametrize(
    ("actions", "match"),
    [
        (torch.tensor([15, 3]), r"actions must lie in \[0, 15\), got \[15\] at batch index \[0\]"),
        (torch.tensor([3, -1]), r"got \[-1\] at batch index \[1\]"),
        (torch.tensor([7.0, 7.0]), "actions must have an integer dtype, got torch.float32"),
        (torch.tensor([True, False]), "integer dtype, got torch.bool"),
        (torch.tensor([7, 7, 7]), r"actions must have shape \[2\], got \[3\]"),
        (torch.tensor([[7, 7]]), r"actions must have shape \[2\], got \[1, 2\]"),
        (torch.empty(2, dtype=torch.int64, device="meta"), "actions must be on cpu"),
        ([7, 7], "actions must be a \\[2\\] integer torch.Tensor, got list"),
    ],
)
def test_invalid_actions_are_refused_and_change_nothing(actions: object, match: str) -> None:
    env = LookAroundEnv()
    env.reset(grids(2), starts=torch.tensor([9, 0]))
    with pytest.raises(ValueError, match=match):
        env.step(actions)  # type: ignore[arg-type]
    assert env.t == 0
    assert env.positions.tolist() == [9, 0]


def test_other_integer_dtypes_are_accepted() -> None:
    env = LookAroundEnv()
    env.reset(grids(1), starts=torch.tensor([9]))
    obs = env.step(torch.tensor([8], dtype=torch.int32)).observation
    assert obs.position.tolist() == [10]


@pytest.mark.parametrize(
    ("kwargs", "error", "match"),
    [
        ({"T": 0}, ValueError, "T must be >= 1"),
        ({"T": 4.0}, TypeError, "T must be an int"),
        ({"reward_radius": -1}, ValueError, "reward_radius must be >= 0"),
        ({"action_grid": (3, 4)}, ValueError, "azimuth must be odd"),
        ({"channel_mean": [300.0]}, ValueError, r"channel_mean must lie in \[0, 255\]"),
        ({"channel_mean": []}, ValueError, "channel_mean must be a non-empty sequence"),
    ],
)
def test_invalid_settings_are_refused(kwargs: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        LookAroundEnv(**kwargs)


@pytest.mark.parametrize(
    ("value", "error", "match"),
    [
        (torch.zeros(2, 4, 8, 1, 2, 2, dtype=torch.int32), TypeError, "uint8 or float32"),
        (torch.zeros(4, 8, 1, 2, 2, dtype=torch.uint8), ValueError, r"\[B, N, M, C, H, W\]"),
        (torch.zeros(0, 4, 8, 1, 2, 2, dtype=torch.uint8), ValueError, "no empty axis"),
        (torch.zeros(2, 4, 8, 3, 2, 2, dtype=torch.uint8), ValueError, "3 channels but"),
        ("grids", TypeError, "grids must be a torch.Tensor"),
    ],
)
def test_invalid_grids_are_refused(value: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        LookAroundEnv(channel_mean=[10.0]).reset(value)  # type: ignore[arg-type]


# ---------------------------------------------------------------- reference model
def reference_episode(
    n_elev: int,
    n_azim: int,
    start: int,
    actions: list[int],
    rewards: list[list[float]],
    radius: int,
    wrap_elevation: bool,
    wrap_azimuth: bool,
    action_grid: ActionGrid,
    start_zeroing: str = "view",
) -> tuple[list[int], list[list[int]], list[float], list[list[float]]]:
    """One episode with plain Python loops: positions, proprio, collected rewards, final map."""
    rewards = [row[:] for row in rewards]

    def near(a: int, b: int, size: int, wrap: bool) -> bool:
        d = abs(a - b)
        return (min(d, size - d) if wrap else d) <= radius

    def spend(n: int, m: int) -> None:
        for i in range(n_elev):
            for j in range(n_azim):
                if near(i, n, n_elev, wrap_elevation) and near(j, m, n_azim, wrap_azimuth):
                    rewards[i][j] = 0.0

    n, m = divmod(start, n_azim)
    if start_zeroing == "neighbourhood":
        spend(n, m)
    elif start_zeroing == "view":
        rewards[n][m] = 0.0
    positions, proprio, collected = [start], [[0, 0, n]], []
    for action in actions:
        d_elev = action // action_grid.azimuth - action_grid.elevation // 2
        d_azim = action % action_grid.azimuth - action_grid.azimuth // 2
        n = (n + d_elev) % n_elev if wrap_elevation else min(max(n + d_elev, 0), n_elev - 1)
        m = (m + d_azim) % n_azim if wrap_azimuth else min(max(m + d_azim, 0), n_azim - 1)
        collected.append(rewards[n][m])
        spend(n, m)
        positions.append(n * n_azim + m)
        proprio.append([d_elev, d_azim, n])
    return positions, proprio, collected, rewards


@st.composite
def episodes(draw: st.DrawFn) -> dict:
    n_elev = draw(st.integers(1, 5))
    n_azim = draw(st.integers(1, 9))
    action_grid = ActionGrid(draw(st.sampled_from([1, 3, 5])), draw(st.sampled_from([1, 3, 5])))
    T = draw(st.integers(1, 6))
    B = draw(st.integers(1, 4))
    V = n_elev * n_azim
    return {
        "n_elev": n_elev,
        "n_azim": n_azim,
        "action_grid": action_grid,
        "T": T,
        "starts": draw(st.lists(st.integers(0, V - 1), min_size=B, max_size=B)),
        "actions": draw(
            st.lists(
                st.lists(st.integers(0, action_grid.n_actions - 1), min_size=B, max_size=B),
                min_size=T - 1,
                max_size=T - 1,
            )
        ),
        "rewards": draw(
            st.lists(
                st.lists(
                    st.lists(
                        st.sampled_from([0.0, 0.5, 1.0, 37.0, 255.0]),
                        min_size=n_azim,
                        max_size=n_azim,
                    ),
                    min_size=n_elev,
                    max_size=n_elev,
                ),
                min_size=B,
                max_size=B,
            )
        ),
        "radius": draw(st.integers(0, 3)),
        "start_zeroing": draw(st.sampled_from(["view", "neighbourhood", "none"])),
        "wrap_elevation": draw(st.booleans()),
        "wrap_azimuth": draw(st.booleans()),
    }


@settings(max_examples=60, deadline=None)
@given(case=episodes())
def test_batched_episodes_match_a_python_reference(case: dict) -> None:
    B = len(case["starts"])
    env = LookAroundEnv(
        case["T"],
        action_grid=case["action_grid"],
        wrap_elevation=case["wrap_elevation"],
        wrap_azimuth=case["wrap_azimuth"],
        reward_radius=case["radius"],
        start_zeroing=case["start_zeroing"],
    )
    # Every view of every episode its own values, so that a view taken from the wrong
    # position or the wrong episode shows.
    shape = (B, case["n_elev"], case["n_azim"], 1, 2, 2)
    distinct = (torch.arange(torch.Size(shape).numel()) % 251).to(torch.uint8).view(shape)
    obs = env.reset(
        distinct,
        starts=torch.tensor(case["starts"]),
        reward_maps=torch.tensor(case["rewards"], dtype=torch.float32),
    )
    positions, proprio, collected = [obs.position], [obs.proprio], []
    views = [obs.view]
    for step_actions in case["actions"]:
        obs, reward, _ = env.step(torch.tensor(step_actions))
        positions.append(obs.position)
        proprio.append(obs.proprio)
        collected.append(reward)
        views.append(obs.view)
    assert env.done
    # Each observation is the normalised view at its position.
    by_view = env.grid.flatten(1, 2)  # [B, V, C, H, W]
    for position, view in zip(positions, views, strict=True):
        assert torch.equal(view, by_view[torch.arange(B), position])
    for b in range(B):
        expected = reference_episode(
            case["n_elev"],
            case["n_azim"],
            case["starts"][b],
            [a[b] for a in case["actions"]],
            case["rewards"][b],
            case["radius"],
            case["wrap_elevation"],
            case["wrap_azimuth"],
            case["action_grid"],
            case["start_zeroing"],
        )
        assert [int(p[b]) for p in positions] == expected[0]
        assert [p[b].tolist() for p in proprio] == expected[1]
        assert [float(r[b]) for r in collected] == expected[2]
        assert env.reward_map[b].tolist() == expected[3]
        assert env.visited_views[b].tolist() == expected[0]
        assert sorted(env.visited[b].nonzero().flatten().tolist()) == sorted(set(expected[0]))
