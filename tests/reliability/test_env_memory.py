"""Issue 25, item 8: the Gymnasium environments refuse episodes whose memory cannot fit, before
allocating (before, ``T = 1e9`` took 16 GB and 62 s at reset, and ``make_vec(num_envs=100000)``
tried a 39 GB copy)."""

from __future__ import annotations

import gymnasium
import pytest
import torch

import pyskick.envs  # noqa: F401 - registers the environments
from pyskick import memory
from pyskick.errors import UserError


@pytest.fixture
def eight_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine's available memory pinned, so that a refusal does not depend on the host."""
    monkeypatch.setattr(memory, "available_memory", lambda: 8 << 30)


def _grids() -> torch.Tensor:
    return torch.randint(0, 256, (4, 2, 3, 1, 16, 16), dtype=torch.uint8)


def test_an_episode_too_long_to_fit_is_refused_at_once(eight_gib: None) -> None:
    with pytest.raises(UserError, match=r"1 look-around episode\(s\) of T = 1000000000 needs"):
        gymnasium.make("pyskick/LookAround-v0", grids=_grids(), channel_mean=[120.0], T=10**9)


def test_too_many_environments_to_fit_are_refused_at_once(eight_gib: None) -> None:
    with pytest.raises(UserError, match=r"fewer environments \(num_envs\) or a smaller T"):
        gymnasium.make_vec(
            "pyskick/LookAround-v0", num_envs=10**6, grids=_grids(), channel_mean=[120.0]
        )
    envs = gymnasium.make_vec("pyskick/LookAround-v0", num_envs=8, grids=_grids(),
                              channel_mean=[120.0])  # fmt: skip
    observation, _ = envs.reset(seed=0)
    assert observation["view"].shape[0] == 8
    envs.close()
