"""The action set: index mapping, round trips, and the move each of the 15 actions makes."""

from __future__ import annotations

import pytest
import torch

from pyskick.envs import ActionGrid, LookAroundEnv


def test_paper_action_grid_maps_every_move_to_its_index() -> None:
    grid = ActionGrid()
    assert (grid.elevation, grid.azimuth, grid.n_actions, grid.stay) == (3, 5, 15, 7)
    expected = {}
    for d_elev in (-1, 0, 1):
        for d_azim in (-2, -1, 0, 1, 2):
            expected[(d_elev + 1) * 5 + (d_azim + 2)] = (d_elev, d_azim)
    assert sorted(expected) == list(range(15))
    for action, move in expected.items():
        assert grid.index(*move) == action
        assert grid.delta(action) == move
    assert grid.delta(0) == (-1, -2)
    assert grid.delta(7) == (0, 0)
    assert grid.delta(14) == (1, 2)
    table = grid.deltas()
    assert table.dtype == torch.int64
    assert table.tolist() == [list(expected[a]) for a in range(15)]


def test_each_of_the_15_actions_moves_the_camera_by_its_delta() -> None:
    N, M = 4, 8
    grids = torch.zeros(15, N, M, 1, 2, 2, dtype=torch.uint8)
    env = LookAroundEnv(T=2)
    start_n, start_m = 1, 4  # far from every border: no wrap, no clip
    env.reset(grids, starts=torch.full((15,), start_n * M + start_m))
    obs, _, done = env.step(torch.arange(15))
    assert done
    grid = ActionGrid()
    for action in range(15):
        d_elev, d_azim = grid.delta(action)
        assert obs.position[action] == (start_n + d_elev) * M + (start_m + d_azim)
        assert obs.proprio[action].tolist() == [d_elev, d_azim, start_n + d_elev]


def test_other_action_grids() -> None:
    grid = ActionGrid(1, 3)
    assert grid.n_actions == 3
    assert [grid.delta(a) for a in range(3)] == [(0, -1), (0, 0), (0, 1)]
    assert ActionGrid.of((5, 7)) == ActionGrid(5, 7)
    assert ActionGrid(5, 7).index(-2, -3) == 0
    assert ActionGrid(5, 7).index(2, 3) == 34


@pytest.mark.parametrize(
    ("args", "error", "match"),
    [
        ((2, 5), ValueError, "elevation must be odd"),
        ((3, 4), ValueError, "azimuth must be odd"),
        ((0, 5), ValueError, "elevation must be odd and >= 1"),
        ((True, 5), TypeError, "elevation must be an int"),
        ((3, 5.0), TypeError, "azimuth must be an int"),
    ],
)
def test_invalid_action_grids_are_refused(args: tuple, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        ActionGrid(*args)


def test_out_of_grid_moves_and_indices_are_refused() -> None:
    grid = ActionGrid()
    with pytest.raises(ValueError, match=r"move \(2, 0\) is outside"):
        grid.index(2, 0)
    with pytest.raises(ValueError, match=r"move \(0, -3\) is outside"):
        grid.index(0, -3)
    with pytest.raises(ValueError, match=r"action must lie in \[0, 15\), got 15"):
        grid.delta(15)
    with pytest.raises(TypeError, match="action_grid must be a pair"):
        ActionGrid.of((3, 5, 7))  # type: ignore[arg-type]
