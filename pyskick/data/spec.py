"""Viewgrid geometry: how many views, where each camera looks, and the dataset presets.

A viewgrid is a uint8 array ``[N, M, C, H, W]``: N elevations by M azimuths of square C-channel
views. Orientation convention (docs/data-formats.md, "Orientation convention"): elevation
index 0 is the highest elevation, so a viewgrid laid out as an image has the top of the world
on its first row; azimuth index increases turning right (clockwise seen from above); azimuth 0
looks at the centre of an equirectangular panorama, which is the +Z face of a cubemap.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

PRESETS = ("sun360", "modelnet-hard", "custom")


@dataclass(frozen=True)
class GridSpec:
    """Geometry and normalisation of a viewgrid dataset.

    Attributes:
        n_elevations: N, rows of the viewgrid.
        n_azimuths: M, columns of the viewgrid.
        channels: C, 3 for RGB, 1 for grayscale.
        view_size: H == W of every view in pixels.
        elevations_deg: camera elevation of each row; index 0 is the highest.
        azimuths_deg: camera azimuth of each column; increasing = turning right, 0 = centre of
            an equirectangular image.
        fov_deg: horizontal (= vertical) field of view of one view.
        channel_mean: per-channel mean on the 0-255 scale; views are normalised as
            ``(x - mean) / 255``.
        preset: ``"sun360"``, ``"modelnet-hard"`` or ``"custom"``.
    """

    n_elevations: int
    n_azimuths: int
    channels: int
    view_size: int
    elevations_deg: tuple[float, ...]
    azimuths_deg: tuple[float, ...]
    fov_deg: float
    channel_mean: tuple[float, ...]
    preset: str

    def __post_init__(self) -> None:
        for name in ("n_elevations", "n_azimuths", "channels", "view_size"):
            value = getattr(self, name)
            if isinstance(value, bool) or not isinstance(value, int) or value < 1:
                raise ValueError(f"GridSpec.{name} must be a positive int, got {value!r}")
        for name, expected in (
            ("elevations_deg", self.n_elevations),
            ("azimuths_deg", self.n_azimuths),
            ("channel_mean", self.channels),
        ):
            values = getattr(self, name)
            if len(values) != expected:
                raise ValueError(
                    f"GridSpec.{name} must have {expected} values, got {len(values)}: {values!r}"
                )
            if not all(math.isfinite(v) for v in values):
                raise ValueError(f"GridSpec.{name} must be finite, got {values!r}")
        if list(self.elevations_deg) != sorted(self.elevations_deg, reverse=True):
            raise ValueError(
                "GridSpec.elevations_deg must decrease (index 0 = highest elevation), "
                f"got {self.elevations_deg!r}"
            )
        if not all(-90.0 <= e <= 90.0 for e in self.elevations_deg):
            raise ValueError(
                f"GridSpec.elevations_deg must lie in [-90, 90], got {self.elevations_deg!r}"
            )
        if not 0.0 < self.fov_deg < 180.0:
            raise ValueError(f"GridSpec.fov_deg must lie in (0, 180), got {self.fov_deg!r}")
        if not all(0.0 <= m <= 255.0 for m in self.channel_mean):
            raise ValueError(
                f"GridSpec.channel_mean must lie in [0, 255], got {self.channel_mean!r}"
            )
        if self.preset not in PRESETS:
            raise ValueError(f"GridSpec.preset must be one of {PRESETS}, got {self.preset!r}")

    @property
    def view_shape(self) -> tuple[int, int, int, int, int]:
        """Shape ``(N, M, C, H, W)`` of one viewgrid."""
        return (self.n_elevations, self.n_azimuths, self.channels, self.view_size, self.view_size)

    def to_attrs(self) -> dict[str, Any]:
        """The HDF5 attributes that describe this spec (see docs/data-formats.md)."""
        return {
            "n_elevations": self.n_elevations,
            "n_azimuths": self.n_azimuths,
            "fov_deg": float(self.fov_deg),
            "elevations_deg": [float(e) for e in self.elevations_deg],
            "azimuths_deg": [float(a) for a in self.azimuths_deg],
            "channel_mean": [float(m) for m in self.channel_mean],
            "preset": self.preset,
        }


def evenly_spaced_azimuths(n_azimuths: int, step_deg: float | None = None) -> tuple[float, ...]:
    """Azimuths ``0, step, 2*step, ...``; the step defaults to a full turn / ``n_azimuths``."""
    step = 360.0 / n_azimuths if step_deg is None else step_deg
    return tuple(float(i * step) for i in range(n_azimuths))


SUN360 = GridSpec(
    n_elevations=4,
    n_azimuths=8,
    channels=3,
    view_size=32,
    elevations_deg=(45.0, 15.0, -15.0, -45.0),
    azimuths_deg=evenly_spaced_azimuths(8, 45.0),
    fov_deg=60.0,
    channel_mean=(119.16, 107.68, 95.12),
    preset="sun360",
)

# Objects are seen from a camera orbiting them every 40 degrees; a 40 degree field of view lets
# a unit-sphere object fill the view from a camera about three radii away.
MODELNET_HARD = GridSpec(
    n_elevations=5,
    n_azimuths=9,
    channels=1,
    view_size=32,
    elevations_deg=(80.0, 40.0, 0.0, -40.0, -80.0),
    azimuths_deg=evenly_spaced_azimuths(9, 40.0),
    fov_deg=40.0,
    channel_mean=(193.0162338615919,),
    preset="modelnet-hard",
)

PRESET_SPECS: dict[str, GridSpec] = {"sun360": SUN360, "modelnet-hard": MODELNET_HARD}
