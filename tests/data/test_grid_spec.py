"""GridSpec presets and validation."""

from __future__ import annotations

import pytest

from pyskick.data import MODELNET_HARD, SUN360, GridSpec


def test_presets_match_the_paper() -> None:
    assert SUN360.view_shape == (4, 8, 3, 32, 32)
    assert SUN360.elevations_deg == (45.0, 15.0, -15.0, -45.0)
    assert SUN360.azimuths_deg == tuple(float(a) for a in range(0, 360, 45))
    assert SUN360.channel_mean == (119.16, 107.68, 95.12)
    assert SUN360.fov_deg == 60.0
    assert MODELNET_HARD.view_shape == (5, 9, 1, 32, 32)
    assert MODELNET_HARD.elevations_deg == (80.0, 40.0, 0.0, -40.0, -80.0)
    assert MODELNET_HARD.azimuths_deg == tuple(float(a) for a in range(0, 360, 40))
    assert MODELNET_HARD.channel_mean == (193.0162338615919,)


@pytest.mark.parametrize(
    ("change", "pattern"),
    [
        ({"n_elevations": 0}, "positive int"),
        ({"elevations_deg": (45.0, 15.0, -15.0)}, "4 values"),
        ({"elevations_deg": (-45.0, -15.0, 15.0, 45.0)}, "decrease"),
        ({"channel_mean": (1.0, 2.0)}, "3 values"),
        ({"fov_deg": 180.0}, "fov_deg"),
        ({"preset": "imagenet"}, "preset"),
        ({"azimuths_deg": (0.0,) * 7 + (float("nan"),)}, "finite"),
    ],
)
def test_invalid_specs_are_rejected(change: dict, pattern: str) -> None:
    with pytest.raises(ValueError, match=pattern):
        GridSpec(**{**SUN360.__dict__, **change})
