"""Flags are booleans at every public boundary (issue 25, item 15).

``gymnasium.make(..., known_azimuth="false")`` was taken as True (a non-empty string is
truthy); ``rotate_viewgrid(inverse="no")`` raised pybind11's multi-line TypeError on one backend
and rolled inversely on the other; ``greedy_coverage(wrap_azimuth="no")`` wrapped. A flag that
is not a bool is now refused with one line naming it, on every backend.
"""

from __future__ import annotations

import gymnasium
import pytest
import torch

from pyskick.envs import GYM_ID, LookAroundEnv
from pyskick.ops import greedy_coverage, rotate_viewgrid

BACKENDS = ["native", "reference"]
NOT_BOOLS = ["false", "no", 0, 1, None, 1.0]


@pytest.mark.parametrize("value", NOT_BOOLS)
@pytest.mark.parametrize("flag", ["known_azimuth", "wrap_azimuth", "wrap_elevation"])
def test_the_gymnasium_env_refuses_a_flag_that_is_not_a_bool(flag, value):
    grids = torch.randint(0, 256, (3, 4, 8, 3, 4, 4), dtype=torch.uint8)
    with pytest.raises(TypeError, match=rf"^{flag} must be a bool, got "):
        gymnasium.make(GYM_ID, grids=grids, channel_mean=[120.0] * 3, **{flag: value})
    with pytest.raises(TypeError, match=rf"^{flag} must be a bool, got "):
        LookAroundEnv(**{flag: value})


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_rotate_viewgrid_refuses_an_inverse_that_is_not_a_bool(backend, value):
    grid = torch.zeros(2, 4, 8, 3, 2, 2)
    shift = torch.tensor([1, 2])
    with pytest.raises(TypeError, match=r"^rotate_viewgrid: inverse must be a bool, got "):
        rotate_viewgrid(grid, shift, inverse=value, backend=backend)
    assert torch.equal(rotate_viewgrid(grid, shift, inverse=True, backend=backend), grid)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("flag", ["wrap_azimuth", "wrap_elevation", "check_values"])
@pytest.mark.parametrize("value", NOT_BOOLS)
def test_greedy_coverage_refuses_a_flag_that_is_not_a_bool(backend, flag, value):
    arguments = {
        "coverage": torch.rand(2, 6, 6),
        "starts": torch.zeros(2, 3, dtype=torch.int64),
        "steps": 3,
        "n_elevations": 2,
        "n_azimuths": 3,
    }
    with pytest.raises(TypeError, match=rf"^greedy_coverage: {flag} must be a bool, got "):
        greedy_coverage(**arguments, backend=backend, **{flag: value})
