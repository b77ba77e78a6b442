"""Tests of render_mesh_views: native kernel against the PyTorch twin, hand-computed images,
camera conventions, edge cases and input validation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.errors import UserError
from pyskick.ops import _reference as reference
from pyskick.ops import has_native, render_mesh_views

BACKENDS = [
    "reference",
    pytest.param(
        "native", marks=pytest.mark.skipif(not has_native(), reason="pyskick._C not built")
    ),
]
needs_native = pytest.mark.skipif(not has_native(), reason="pyskick._C not built")


def mesh(vertices: list[list[float]], faces: list[list[int]]) -> tuple[torch.Tensor, torch.Tensor]:
    return torch.tensor(vertices, dtype=torch.float32), torch.tensor(faces, dtype=torch.int32)


def angles(*values: float) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.float32)


def render(v: torch.Tensor, f: torch.Tensor, **kwargs: object) -> torch.Tensor:
    """One view from the front (elevation 0, azimuth 0) unless angles are given."""
    el = kwargs.pop("el", angles(0.0))
    az = kwargs.pop("az", angles(0.0))
    return render_mesh_views(v, f, el, az, **kwargs)


def quad(z: float, half: float = 1.0) -> tuple[list[list[float]], list[list[int]]]:
    """A square in the plane at depth z, facing +z."""
    v = [[-half, -half, z], [half, -half, z], [half, half, z], [-half, half, z]]
    return v, [[0, 1, 2], [0, 2, 3]]


def marker(center: tuple[float, float, float], size: float = 0.3) -> tuple[torch.Tensor, ...]:
    """A small cube (12 triangles) around ``center``."""
    cx, cy, cz = center
    h = size / 2
    v = [
        [cx + sx * h, cy + sy * h, cz + sz * h]
        for sx in (-1, 1)
        for sy in (-1, 1)
        for sz in (-1, 1)
    ]
    f = [
        [0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
        [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3],
    ]  # fmt: skip
    return mesh(v, f)


def foreground_centroid(image: torch.Tensor) -> tuple[float, float]:
    """(row, col) centroid of the non-background pixels of an ``[H, W]`` image."""
    mask = (image < 0.999).double()
    rows, cols = torch.meshgrid(
        torch.arange(image.shape[0]).double(), torch.arange(image.shape[1]).double(), indexing="ij"
    )
    total = mask.sum()
    assert total > 0, "nothing was drawn"
    return float((rows * mask).sum() / total), float((cols * mask).sum() / total)


# ----------------------------------------------------------------------------- native == twin
@st.composite
def random_scene(draw: st.DrawFn) -> dict[str, object]:
    n_vertices = draw(st.integers(1, 10))
    coord = st.floats(-1.5, 1.5, width=32, allow_nan=False)
    vertices = draw(st.lists(st.lists(coord, min_size=3, max_size=3), min_size=n_vertices,
                             max_size=n_vertices))  # fmt: skip
    index = st.integers(0, n_vertices - 1)
    faces = draw(st.lists(st.lists(index, min_size=3, max_size=3), min_size=1, max_size=12))
    angle = st.floats(-180, 360, width=32)
    light = st.tuples(
        st.floats(-1, 1, width=32), st.floats(-1, 1, width=32), st.floats(0.125, 1, width=32),
        st.floats(0, 1, width=32),
    )  # fmt: skip
    return {
        "vertices": torch.tensor(vertices, dtype=torch.float32),
        "faces": torch.tensor(faces, dtype=torch.int32).reshape(-1, 3),
        "elevations_deg": torch.tensor(draw(st.lists(angle, min_size=1, max_size=2))),
        "azimuths_deg": torch.tensor(draw(st.lists(angle, min_size=1, max_size=2))),
        "image_size": draw(st.integers(1, 7)),
        "supersample": draw(st.integers(1, 3)),
        "lights": torch.tensor(draw(st.lists(light, min_size=1, max_size=2))),
        "ambient": draw(st.floats(0, 1)),
        "diffuse": draw(st.floats(0, 1)),
        "specular": draw(st.floats(0, 1)),
        "shininess": draw(st.floats(0, 30)),
        "albedo": draw(st.floats(0, 1)),
        "fov_deg": draw(st.floats(20, 100)),
        # Close cameras put vertices behind the camera plane and near it.
        "distance": draw(st.floats(0.5, 4.0)),
        "background": draw(st.floats(0, 1)),
    }


@needs_native
@settings(max_examples=40, deadline=None)
@given(scene=random_scene())
def test_native_matches_reference_on_random_meshes(scene: dict[str, object]) -> None:
    native = render_mesh_views(**scene, backend="native")
    twin = render_mesh_views(**scene, backend="reference")
    n, m = len(scene["elevations_deg"]), len(scene["azimuths_deg"])  # type: ignore[arg-type]
    size = scene["image_size"]
    assert native.shape == (n, m, size, size)
    assert native.dtype == torch.float32
    torch.testing.assert_close(native, twin, rtol=0, atol=1e-5)
    assert bool(((native >= 0) & (native <= 1)).all())


@needs_native
def test_native_matches_reference_on_a_closed_mesh_grid() -> None:
    v, f = marker((0.1, -0.2, 0.05), size=1.0)
    kwargs = {"image_size": 12, "supersample": 2}
    el, az = angles(80, 40, 0, -40, -80), angles(*range(0, 360, 40))
    native = render_mesh_views(v, f, el, az, **kwargs, backend="native")
    twin = render_mesh_views(v, f, el, az, **kwargs, backend="reference")
    torch.testing.assert_close(native, twin, rtol=0, atol=1e-6)


@needs_native
def test_native_matches_reference_on_a_procedural_chair() -> None:
    from pyskick.data.meshes import normalize_mesh
    from pyskick.data.synthetic_objects import make_object

    vertices, faces = make_object("chair", np.random.default_rng(0))
    v, f = torch.from_numpy(normalize_mesh(vertices)), torch.from_numpy(faces)
    el, az = angles(40, -40), angles(0, 120, 280)
    kwargs = {"image_size": 16, "supersample": 2}
    native = render_mesh_views(v, f, el, az, **kwargs, backend="native")
    twin = render_mesh_views(v, f, el, az, **kwargs, backend="reference")
    torch.testing.assert_close(native, twin, rtol=0, atol=1e-6)
    assert float((native < 1).float().mean()) > 0.1


# ----------------------------------------------------------------------------- hand-computed
@pytest.mark.parametrize("backend", BACKENDS)
def test_triangle_covers_the_pixels_inside_it(backend: str) -> None:
    # fov 90 and distance 4 map the plane z = 0 to screen x = 4 + x, y = 4 - y at 8 x 8.
    v, f = mesh([[-3, 3, 0], [3.25, 3, 0], [-3, -3.25, 0]], [[0, 1, 2]])
    out = render(v, f, image_size=8, supersample=1, fov_deg=90.0, distance=4.0, ambient=1.0,
                 diffuse=0.0, specular=0.0, albedo=0.5, backend=backend)[0, 0]  # fmt: skip
    # Screen triangle (1, 1), (7.25, 1), (1, 7.25): centres (j + .5, i + .5) with i, j >= 1 and
    # i + j <= 7 are inside, every other centre is at least 0.25 away from it.
    expected = torch.ones(8, 8)
    for i in range(8):
        for j in range(8):
            if i >= 1 and j >= 1 and i + j <= 7:
                expected[i, j] = 0.5
    torch.testing.assert_close(out, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("flip", [False, True])
def test_quad_shade_matches_phong_by_hand(backend: str, flip: bool) -> None:
    verts, faces = quad(0.0, half=1.0)
    if flip:  # the other winding: lighting is two-sided
        faces = [face[::-1] for face in faces]
    v, f = mesh(verts, faces)
    lights = torch.tensor([[0.0, 0.0, 2.0, 0.8]])
    material = {"ambient": 0.4, "diffuse": 0.9, "specular": 0.7, "shininess": 15.0, "albedo": 0.3}
    out = render(v, f, image_size=8, supersample=2, lights=lights, **material, distance=4.0,
                 backend=backend)  # fmt: skip
    # Every vertex: n = +-z, l = +z, |n.l| = 1, r = +z, v = (-x, -y, 4) / |.| with |x| = |y| = 1.
    r_dot_v = 4.0 / math.sqrt(1 + 1 + 16)
    shade = 0.3 * (0.4 + 0.9 * 0.8 * 1.0) + 0.7 * 0.8 * r_dot_v**15
    # The quad spans screen [4 - 1.37, 4 + 1.37] at 8 px: the 2 x 2 centre pixels are inside.
    centre = out[0, 0, 3:5, 3:5]
    torch.testing.assert_close(centre, torch.full((2, 2), shade), rtol=0, atol=1e-6)
    assert out[0, 0, 0, 0] == 1.0  # background


@pytest.mark.parametrize("backend", BACKENDS)
def test_oblique_light_gives_cosine_diffuse(backend: str) -> None:
    v, f = mesh(*quad(0.0))
    lights = torch.tensor([[0.0, math.sin(math.radians(60)), 0.5, 1.0]])  # 60° from the normal
    out = render(v, f, image_size=8, supersample=1, lights=lights, ambient=0.2, diffuse=1.0,
                 specular=0.0, albedo=0.8, backend=backend)  # fmt: skip
    torch.testing.assert_close(out[0, 0, 4, 4], torch.tensor(0.8 * (0.2 + 0.5)), atol=1e-6, rtol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("near_first", [False, True])
def test_nearest_face_wins_regardless_of_order(backend: str, near_first: bool) -> None:
    far_v, far_f = quad(-0.5, half=1.0)
    # Near quad tilted 60° about x: its normal makes 60° with the light, so its shade differs.
    c, s = math.cos(math.radians(60)), math.sin(math.radians(60))
    near_v = [
        [x, y * c, 0.5 + y * s] for x, y in ((-0.4, -0.4), (0.4, -0.4), (0.4, 0.4), (-0.4, 0.4))
    ]
    near_f = [[4, 5, 6], [4, 6, 7]]
    faces = near_f + far_f if near_first else far_f + near_f
    v, f = mesh(far_v + near_v, faces)
    kwargs = {"ambient": 0.2, "diffuse": 1.0, "specular": 0.0, "albedo": 1.0}
    lights = torch.tensor([[0.0, 0.0, 1.0, 1.0]])
    out = render(v, f, image_size=16, supersample=1, lights=lights, **kwargs, backend=backend)
    torch.testing.assert_close(out[0, 0, 8, 8], torch.tensor(0.2 + 0.5), atol=1e-6, rtol=0)
    torch.testing.assert_close(out[0, 0, 8, 3], torch.tensor(0.2 + 1.0).clamp(max=1.0))


# ----------------------------------------------------------------------------- conventions
@pytest.mark.parametrize("backend", BACKENDS)
def test_camera_convention(backend: str) -> None:
    kwargs = {"image_size": 16, "supersample": 2, "backend": backend}
    # A marker at +x: right of centre from the front, left from the back, centred from the sides.
    v, f = marker((0.7, 0.0, 0.0))
    views = render_mesh_views(v, f, angles(0.0), angles(0, 90, 180, 270), **kwargs)[0]
    assert foreground_centroid(views[0])[1] > 10
    assert foreground_centroid(views[2])[1] < 6
    assert abs(foreground_centroid(views[1])[1] - 7.5) < 1
    assert abs(foreground_centroid(views[3])[1] - 7.5) < 1
    # Azimuth 90 puts the camera at -x (clockwise seen from above): the front (+z) is on the right.
    v, f = marker((0.0, 0.0, 0.7))
    assert foreground_centroid(render(v, f, az=angles(90), **kwargs)[0, 0])[1] > 10
    assert foreground_centroid(render(v, f, az=angles(-90), **kwargs)[0, 0])[1] < 6
    # Y is up; from above (elevation 80) the front (+z) is at the bottom of the image.
    v, f = marker((0.0, 0.7, 0.0))
    assert foreground_centroid(render(v, f, **kwargs)[0, 0])[0] < 6
    v, f = marker((0.0, 0.0, 0.7))
    assert foreground_centroid(render(v, f, el=angles(80), **kwargs)[0, 0])[0] > 10
    assert foreground_centroid(render(v, f, el=angles(-80), **kwargs)[0, 0])[0] < 6


@pytest.mark.parametrize("backend", BACKENDS)
def test_unit_sphere_fits_the_default_view(backend: str) -> None:
    # Points on the unit sphere's silhouette ring, seen from the front, stay inside the image.
    ring = [
        [math.cos(t), math.sin(t), 0.0] for t in torch.linspace(0, 2 * math.pi, 13)[:-1].tolist()
    ]
    v, f = mesh([[0.0, 0.0, 0.0], *ring], [[0, 1 + k, 1 + (k + 1) % 12] for k in range(12)])
    out = render(v, f, image_size=32, supersample=1, backend=backend)[0, 0]
    assert bool((out[0] == 1).all() and (out[-1] == 1).all())
    assert bool((out[:, 0] == 1).all() and (out[:, -1] == 1).all())
    assert float((out < 1).float().mean()) > 0.5


# ----------------------------------------------------------------------------- edge cases
@pytest.mark.parametrize("backend", BACKENDS)
def test_no_faces_renders_background(backend: str) -> None:
    v = torch.zeros(0, 3)
    f = torch.zeros(0, 3, dtype=torch.int32)
    out = render_mesh_views(v, f, angles(0, 10), angles(0, 1, 2), image_size=4,
                            background=0.25, backend=backend)  # fmt: skip
    assert out.shape == (2, 3, 4, 4)
    assert bool((out == 0.25).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_degenerate_triangles_draw_nothing(backend: str) -> None:
    # Repeated indices, and distinct vertices at one position: zero screen area, nothing drawn.
    v, f = mesh(
        [[0, 0, 0], [0.5, 0.5, 0.5], [0.2, 0.1, 0.3], [0.2, 0.1, 0.3], [0.2, 0.1, 0.3]],
        [[0, 0, 1], [2, 2, 2], [2, 3, 4]],
    )
    out = render(v, f, az=angles(0, 45, 90), image_size=8, backend=backend)
    assert bool((out == 1).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_faces_behind_or_across_the_camera_are_dropped(backend: str) -> None:
    # The camera sits at z = 1: one triangle straddles its plane, one lies behind it, and one
    # has a vertex exactly at the camera.
    v, f = mesh(
        [[-1, -1, -5], [1, -1, -5], [0, 1, 5], [-1, -1, 3], [1, -1, 3], [0, 1, 3], [0, 0, 1]],
        [[0, 1, 2], [3, 4, 5], [6, 0, 1]],
    )
    out = render(v, f, distance=1.0, image_size=8, backend=backend)
    assert bool((out == 1).all())


@pytest.mark.parametrize("backend", BACKENDS)
def test_empty_camera_grid(backend: str) -> None:
    v, f = marker((0, 0, 0))
    assert render_mesh_views(v, f, angles(), angles(0), backend=backend).shape == (0, 1, 32, 32)


@needs_native
def test_far_off_vertices_do_not_crash() -> None:
    v, f = mesh([[-3e37, -3e37, 0], [3e37, -3e37, 0], [0, 3e37, 0]], [[0, 1, 2]])
    out = render(v, f, image_size=4, backend="native")
    assert bool(torch.isfinite(out).all())


# ----------------------------------------------------------------------------- validation
def valid() -> dict[str, object]:
    v, f = marker((0, 0, 0))
    return {"vertices": v, "faces": f, "elevations_deg": angles(0), "azimuths_deg": angles(0)}


@pytest.mark.parametrize(
    ("change", "error", "match"),
    [
        ({"vertices": torch.zeros(8, 3, dtype=torch.float64)}, TypeError, "vertices"),
        ({"vertices": torch.zeros(8, 2)}, ValueError, "vertices"),
        ({"faces": torch.zeros(1, 3, dtype=torch.int64)}, TypeError, "faces"),
        ({"faces": torch.zeros(1, 4, dtype=torch.int32)}, ValueError, "faces"),
        ({"faces": torch.tensor([[0, 1, 8]], dtype=torch.int32)}, ValueError, r"faces.*\[0, 8\]"),
        ({"faces": torch.tensor([[0, -1, 2]], dtype=torch.int32)}, ValueError, "faces"),
        ({"vertices": torch.full((8, 3), math.nan)}, ValueError, "vertices"),
        ({"elevations_deg": torch.tensor([math.inf])}, ValueError, "elevations_deg"),
        ({"azimuths_deg": torch.zeros(2, 2)}, ValueError, "azimuths_deg"),
        ({"image_size": 0}, ValueError, "image_size"),
        ({"image_size": 5000}, ValueError, "image_size"),
        ({"image_size": 8.0}, TypeError, "image_size"),
        ({"supersample": 0}, ValueError, "supersample"),
        ({"supersample": 17}, ValueError, "supersample"),
        ({"image_size": 1024, "supersample": 8}, ValueError, r"image_size \* supersample"),
        ({"lights": torch.zeros(1, 3)}, ValueError, "lights"),
        ({"lights": torch.tensor([[0.0, 0.0, 0.0, 1.0]])}, ValueError, "direction"),
        ({"lights": torch.tensor([[0.0, 0.0, 1.0, -1.0]])}, ValueError, "intensities"),
        ({"fov_deg": 0.0}, ValueError, "fov_deg"),
        ({"fov_deg": 180.0}, ValueError, "fov_deg"),
        ({"distance": 0.0}, ValueError, "distance"),
        ({"background": 1.5}, ValueError, "background"),
        ({"albedo": math.nan}, ValueError, "albedo"),
        ({"specular": -0.1}, ValueError, "specular"),
        ({"ambient": True}, TypeError, "ambient"),
        ({"backend": "gpu"}, ValueError, "backend"),
    ],
)
def test_bad_input_is_rejected(change: dict[str, object], error: type, match: str) -> None:
    with pytest.raises(error, match=match) as raised:
        render_mesh_views(**{**valid(), **change})  # type: ignore[arg-type]
    assert isinstance(raised.value, UserError), type(raised.value)  # the caller's error


def test_reference_twin_is_the_same_function() -> None:
    kwargs = valid()
    direct = reference.render_mesh_views(*kwargs.values(), image_size=6, supersample=2)  # type: ignore[arg-type]
    wrapped = render_mesh_views(**kwargs, image_size=6, supersample=2, backend="reference")  # type: ignore[arg-type]
    torch.testing.assert_close(direct, wrapped)
