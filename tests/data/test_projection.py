"""Gnomonic projection: orientation, azimuth wrap, and equirect/cubemap agreement."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.data import SUN360, GridSpec
from pyskick.data.projection import (
    cubemap_to_viewgrid,
    equirect_to_cubemap,
    equirect_to_viewgrid,
    view_directions,
)


def _direction(azimuth_deg: float, elevation_deg: float) -> torch.Tensor:
    a, e = math.radians(azimuth_deg), math.radians(elevation_deg)
    return torch.tensor(
        [math.sin(a) * math.cos(e), math.sin(e), math.cos(a) * math.cos(e)], dtype=torch.float64
    )


def test_view_centres_look_along_their_camera() -> None:
    spec = GridSpec(**{**SUN360.__dict__, "view_size": 2})  # centre = corner of 4 pixels
    dirs = view_directions(spec)
    centre = dirs.mean(dim=(2, 3))
    centre = centre / centre.norm(dim=-1, keepdim=True)
    for n, e in enumerate(spec.elevations_deg):
        for m, a in enumerate(spec.azimuths_deg):
            assert torch.allclose(centre[n, m], _direction(a, e), atol=1e-9)


def test_view_pixels_right_is_turning_right_and_top_is_up() -> None:
    dirs = view_directions(SUN360)
    front = dirs[1, 0]  # elevation 15, azimuth 0
    # Left to right: x (sin azimuth) increases; top to bottom: y decreases.
    assert front[16, -1, 0] > front[16, 0, 0]
    assert front[0, 16, 1] > front[-1, 16, 1]
    # Half the field of view between the centre and the middle of the right edge.
    edge = view_directions(GridSpec(**{**SUN360.__dict__, "view_size": 1}), supersample=64)
    corner = edge[2, 0, 31:33, -1].mean(0)
    angle = math.degrees(math.atan2(corner[0].item(), corner[2].item()))
    assert angle == pytest.approx(30.0, abs=0.5)


def _longitude_panorama(width: int) -> torch.Tensor:
    """Channel 0 = column index scaled, channel 1 = row index scaled, channel 2 = 0."""
    h = width // 2
    cols = torch.arange(width, dtype=torch.float32).expand(h, width) * (255.0 / (width - 1))
    rows = torch.arange(h, dtype=torch.float32).view(h, 1).expand(h, width) * (255.0 / (h - 1))
    return torch.stack([cols, rows, torch.zeros_like(cols)])[None]


def test_equirect_orientation_azimuth_and_elevation() -> None:
    pano = _longitude_panorama(512)
    grid = equirect_to_viewgrid(pano, SUN360).float()
    centre = grid[..., 14:18, 14:18].mean(dim=(-1, -2))  # [1, N, M, C]
    # Azimuth a maps to image column (a / 360 + 0.5) * width, wrapping at 180.
    for m, a in enumerate(SUN360.azimuths_deg):
        if a in (180.0,):
            continue  # the seam: the centre averages both image edges
        expected = ((a + 180.0) % 360.0) / 360.0 * 255.0
        assert centre[0, 1, m, 0].item() == pytest.approx(expected, abs=2.0)
    # Elevation row 0 (highest) samples the upper image rows.
    for n, e in enumerate(SUN360.elevations_deg):
        assert centre[0, n, 2, 1].item() == pytest.approx((90.0 - e) / 180.0 * 255.0, abs=2.0)


def test_views_across_the_image_seam_match_views_of_the_rolled_panorama() -> None:
    # Rolling an equirect image by half its width turns the world by 180 degrees: the views
    # straddling the seam (azimuths 135..225) must equal those of the rolled image, which lie
    # inside it (azimuths -45..45). Random pixels make any wrap error visible.
    pano = torch.from_numpy(np.random.default_rng(0).uniform(0, 255, (1, 3, 64, 128))).float()
    views = equirect_to_viewgrid(pano, SUN360).int()
    rolled = equirect_to_viewgrid(torch.roll(pano, 64, dims=-1), SUN360).int()
    assert (views - torch.roll(rolled, 4, dims=2)).abs().max() <= 1


def test_a_marker_right_of_centre_appears_right_in_view_zero() -> None:
    pano = torch.zeros(1, 3, 128, 256)
    # Marker at azimuth +15 (right of the image centre), elevation 0.
    col = int((15.0 / 360.0 + 0.5) * 256)
    pano[0, 0, 62:66, col - 2 : col + 2] = 255
    view = equirect_to_viewgrid(pano, SUN360)[0, 1, 0, 0].float()  # elevation 15, azimuth 0
    ys, xs = torch.nonzero(view > 20, as_tuple=True)
    assert xs.float().mean() > 16  # right half: not mirrored
    assert ys.float().mean() > 16  # below the centre of a view looking 15 degrees up


@settings(max_examples=5, deadline=None)
@given(seed=st.integers(0, 2**31 - 1))
def test_cubemap_and_equirect_give_the_same_views(seed: int) -> None:
    rng = np.random.default_rng(seed)
    # Smooth random panorama: low-frequency noise upsampled with wrap in longitude.
    coarse = torch.from_numpy(rng.uniform(0, 255, (1, 3, 8, 16))).float()
    coarse = torch.cat([coarse, coarse[..., :1]], -1)
    pano = torch.nn.functional.interpolate(coarse, size=(128, 257), mode="bicubic")[..., :256]
    pano = pano.clamp(0, 255)
    faces = equirect_to_cubemap(pano, 96)
    assert faces.shape == (1, 6, 3, 96, 96)
    from_cube = cubemap_to_viewgrid(faces, SUN360).float()
    from_equirect = equirect_to_viewgrid(pano, SUN360).float()
    assert (from_cube - from_equirect).abs().mean() < 1.5
    assert (from_cube - from_equirect).abs().max() < 20


def test_projection_rejects_wrong_shapes() -> None:
    with pytest.raises(ValueError, match=r"\[B, 3, Hp, Wp\]"):
        equirect_to_viewgrid(torch.zeros(3, 64, 128), SUN360)
    with pytest.raises(ValueError, match=r"\[B, 6, 3, F, F\]"):
        cubemap_to_viewgrid(torch.zeros(1, 5, 3, 8, 8), SUN360)
    with pytest.raises(ValueError, match="square"):
        cubemap_to_viewgrid(torch.zeros(1, 6, 3, 8, 9), SUN360)


def test_cubemap_faces_follow_the_opengl_layout() -> None:
    # Each face a flat colour, plus markers: on posz the right half is brighter (not mirrored);
    # on posy the bottom half is towards posz (the front).
    colours = {"posx": 40, "negx": 80, "posy": 120, "negy": 160, "posz": 200, "negz": 240}
    faces = torch.zeros(1, 6, 3, 64, 64)
    for k, name in enumerate(("posx", "negx", "posy", "negy", "posz", "negz")):
        faces[0, k] = colours[name]
    faces[0, 4, 1, :, 32:] = 255  # posz: green on its right half
    faces[0, 2, 2, 32:, :] = 255  # posy: blue on its bottom half (the +Z side)
    spec = GridSpec(
        n_elevations=3,
        n_azimuths=4,
        channels=3,
        view_size=8,
        elevations_deg=(80.0, 0.0, -80.0),
        azimuths_deg=(0.0, 90.0, 180.0, 270.0),
        fov_deg=20.0,
        channel_mean=(0.0, 0.0, 0.0),
        preset="custom",
    )
    views = cubemap_to_viewgrid(faces, spec)[0].float()  # [N, M, C, H, W]
    red = views[:, :, 0].mean(dim=(-1, -2))
    assert red[1].tolist() == [200.0, 40.0, 240.0, 80.0]  # front, right, back, left
    assert red[0].tolist() == [120.0] * 4  # up
    assert red[2].tolist() == [160.0] * 4  # down
    front = views[1, 0, 1]
    assert front[:, 6:].mean() == 255  # green on the right: not mirrored
    assert front[:, :2].mean() == 200
    # Looking up while facing front sees posy's bottom half; facing back does not.
    assert views[0, 0, 2].mean() > 250  # blended with the top half only at the zenith
    assert views[0, 2, 2, 1:].mean() == 120
