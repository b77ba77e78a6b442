"""Tests of pyskick.data.meshes: OBJ/OFF loading, normalisation and viewgrid rendering, on small
hand-written files and on the real sample meshes of shared/data/meshes."""

from __future__ import annotations

import csv
import os
from pathlib import Path

import numpy as np
import pytest

from pyskick.data.meshes import (
    LIGHT_CANDIDATES,
    load_mesh,
    normalize_mesh,
    random_lights,
    render_viewgrid,
    viewgrid_angles,
)


def shared_dir() -> Path:
    env = os.environ.get("PYSKICK_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[2] / ".." / "shared"


MESHES = shared_dir() / "data" / "meshes"
needs_meshes = pytest.mark.skipif(
    not (MESHES / "MANIFEST.csv").is_file(), reason=f"sample meshes not found under {MESHES}"
)
# Three of the smallest sample meshes (660 to 1,084 triangles): quads, pentagons, several parts.
SMALL = ["wardrobe/wardrobe_with_sliding_doors.obj", "lamp/japanese_lantern.obj",
         "table/technical_table1.obj"]  # fmt: skip


def write(tmp_path: Path, name: str, text: str) -> Path:
    path = tmp_path / name
    path.write_text(text)
    return path


# ----------------------------------------------------------------------------- OBJ
def test_obj_index_forms_parts_and_fan_triangulation(tmp_path: Path) -> None:
    path = write(
        tmp_path,
        "m.obj",
        "# comment\nmtllib m.mtl\no first\nv 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\n"
        "vt 0 0\nvt 1 0\nvn 0 0 1\nusemtl a\ns off\n"
        "f 1 2 3\nf 1/1 2/2 3/1 4/2\ng second\nv 0 0 1 1.0\nv 1 0 1\nv 1 1 1\n"
        "f -3//1 -2//1 -1//1\nf 5/1/1 6/2/1 7/1/1 4/1/1 1/1/1\nl 1 2\n",
    )
    vertices, faces = load_mesh(path)
    assert vertices.dtype == np.float32
    assert faces.dtype == np.int32
    assert vertices.shape == (7, 3)
    np.testing.assert_array_equal(vertices[4], [0, 0, 1])
    expected = [[0, 1, 2], [0, 1, 2], [0, 2, 3], [4, 5, 6], [4, 5, 6], [4, 6, 3], [4, 3, 0]]
    np.testing.assert_array_equal(faces, expected)


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("v 0 0 0\nv 1 0 0\nv 1 x 0\nf 1 2 3\n", r"m\.obj:3: bad vertex"),
        ("v 0 0\n", r"m\.obj:1: a vertex needs 3"),
        ("v 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 4\n", r"m\.obj:4: face vertex 4 is out of range"),
        ("v 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 2 -4\n", r"m\.obj:4: face vertex -4"),
        ("v 0 0 0\nv 1 0 0\nv 1 1 0\nf 0 1 2\n", r"m\.obj:4: face vertex 0"),
        ("v 0 0 0\nv 1 0 0\nf 1 2\n", r"m\.obj: the mesh has no renderable faces \(all 1 were"),
        ("v 0 0 0\nv 1 0 0\nv 1 1 0\nf 1 a 2\n", r"m\.obj:4: bad face vertex 'a'"),
        ("v 0 0 0\nv 1 0 0\nv 1 1 0\n", r"no renderable faces$"),
        ("v 0 0 nan\nv 1 0 0\nv 1 1 0\nf 1 2 3\n", "finite"),
        ("v 0 0 1e300\nv 1 0 0\nv 1 1 0\nf 1 2 3\n", "finite"),
    ],
)
def test_bad_obj_names_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_mesh(write(tmp_path, "m.obj", text))


# ----------------------------------------------------------------------------- OFF
def test_off_with_comments_and_colours(tmp_path: Path) -> None:
    text = (
        "OFF\n# a square and a triangle\n5 2 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n"
        "0.5 0.5 1\n4 0 1 2 3 255 0 0\n3 0 1 4\n"
    )
    vertices, faces = load_mesh(write(tmp_path, "m.off", text))
    assert vertices.shape == (5, 3)
    np.testing.assert_array_equal(faces, [[0, 1, 2], [0, 2, 3], [0, 1, 4]])


@pytest.mark.parametrize("header", ["OFF 3 1 0", "OFF3 1 0", "COFF\n3 1 0"])
def test_off_header_variants(tmp_path: Path, header: str) -> None:
    text = f"{header}\n0 0 0 9 9 9\n1 0 0 9 9 9\n0 1 0\n3 2 1 0\n"
    vertices, faces = load_mesh(write(tmp_path, "m.OFF", text))
    np.testing.assert_array_equal(vertices, [[0, 0, 0], [1, 0, 0], [0, 1, 0]])
    np.testing.assert_array_equal(faces, [[2, 1, 0]])


@pytest.mark.parametrize(
    ("text", "match"),
    [
        ("PLY\n3 1 0\n", r"m\.off:1: not an OFF file"),
        ("4OFF\n3 1 0\n", r"m\.off:1: not an OFF file"),
        ("", r"m\.off:1: not an OFF file"),
        ("OFF\nthree 1 0\n", r"m\.off:2: bad counts"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n", "announces 3 vertices and 1 faces"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1 3\n", r"m\.off:6: face index out of range"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n2 0 1\n", r"m\.off: the mesh has no renderable"),
        ("OFF\n3 1 0\n0 0 0\n1 0 0\n0 1 0\n3 0 1\n", r"m\.off:6: a face needs k >= 0 and k"),
        ("OFF\n3 1 0\n0 0 0\n1 0 q\n0 1 0\n3 0 1 2\n", r"m\.off:4: bad vertex"),
    ],
)
def test_bad_off_names_file_and_line(tmp_path: Path, text: str, match: str) -> None:
    with pytest.raises(ValueError, match=match):
        load_mesh(write(tmp_path, "m.off", text))


@pytest.mark.parametrize(
    ("name", "text"),
    [
        # A 2-corner face and a quad that repeats a corner (one fan triangle degenerate).
        ("m.obj", "v 0 0 0\nv 1 0 0\nv 1 1 0\nv 0 1 0\nf 1 2\nf 1 2 3\nf 1 3 3 4\n"),
        ("m.off", "OFF\n4 3 0\n0 0 0\n1 0 0\n1 1 0\n0 1 0\n2 0 1\n3 0 1 2\n4 0 2 2 3\n"),
    ],
)
def test_degenerate_faces_are_dropped_with_one_warning(
    tmp_path: Path, caplog: pytest.LogCaptureFixture, name: str, text: str
) -> None:
    """Real CAD models hold faces of fewer than 3 distinct corners (22 of 767 sweethome3d
    models were refused for one such face): dropped, as trimesh and Blender drop them."""
    with caplog.at_level("WARNING", logger="pyskick.data.meshes"):
        _, faces = load_mesh(write(tmp_path, name, text))
    np.testing.assert_array_equal(faces, [[0, 1, 2], [0, 2, 3]])
    (record,) = caplog.records
    expected = "dropped 2 degenerate face(s) (fewer than 3 distinct vertices); kept 2"
    assert record.getMessage() == f"{tmp_path / name}: {expected}"


def test_missing_file_and_unknown_format(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"nope\.obj"):
        load_mesh(tmp_path / "nope.obj")
    with pytest.raises(ValueError, match=r"unsupported mesh format '\.stl'"):
        load_mesh(write(tmp_path, "m.stl", "solid\n"))


# ----------------------------------------------------------------------------- normalisation
def test_normalize_mesh_fits_the_unit_sphere() -> None:
    rng = np.random.default_rng(0)
    v = rng.uniform([10, -5, 100], [30, 40, 120], size=(50, 3))
    out = normalize_mesh(v)
    assert out.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(out, axis=1).max(), 1.0, rtol=1e-6)
    np.testing.assert_allclose(out.min(0) + out.max(0), 0.0, atol=1e-6)
    # Shape is kept: a similarity transform preserves distance ratios.
    d_in, d_out = np.linalg.norm(v[1:] - v[0], axis=1), np.linalg.norm(out[1:] - out[0], axis=1)
    np.testing.assert_allclose(d_out / d_in, d_out[0] / d_in[0], rtol=1e-5)


@pytest.mark.parametrize(
    "vertices", [np.zeros((0, 3)), np.ones((4, 3)), np.zeros((3, 2)), np.full((2, 3), np.nan)]
)
def test_normalize_mesh_rejects_degenerate_input(vertices: np.ndarray) -> None:
    with pytest.raises(ValueError, match="normalize_mesh"):
        normalize_mesh(vertices)


# ----------------------------------------------------------------------------- viewgrids
def test_viewgrid_angles() -> None:
    assert viewgrid_angles() == ([80.0, 40.0, 0.0, -40.0, -80.0], [float(40 * m) for m in range(9)])
    assert viewgrid_angles(4, 8, 30.0)[0] == [45.0, 15.0, -15.0, -45.0]
    with pytest.raises(ValueError, match="below 90"):
        viewgrid_angles(7, 9, 40.0)


def test_random_lights_pick_one_candidate_per_light() -> None:
    rng = np.random.default_rng(0)
    seen: set[tuple[tuple[float, ...], ...]] = set()
    for _ in range(40):
        lights = random_lights(rng)
        assert lights.shape == (2, 4)
        rows = tuple(tuple(row) for row in lights.tolist())
        for row, candidates in zip(rows, LIGHT_CANDIDATES, strict=True):
            assert row in [tuple(np.float32(x).item() for x in c) for c in candidates]
        seen.add(rows)
    assert len(seen) == 4  # every combination of positions occurs


def box_mesh() -> tuple[np.ndarray, np.ndarray]:
    v = np.array([[x, y, z] for x in (0, 2) for y in (0, 1) for z in (0, 3)], dtype=np.float32)
    f = np.array(
        [[0, 1, 3], [0, 3, 2], [4, 6, 7], [4, 7, 5], [0, 4, 5], [0, 5, 1],
         [2, 3, 7], [2, 7, 6], [0, 2, 6], [0, 6, 4], [1, 5, 7], [1, 7, 3]],
        dtype=np.int32,
    )  # fmt: skip
    return v, f


def test_render_viewgrid_layout_and_determinism() -> None:
    v, f = box_mesh()
    grid = render_viewgrid(v, f, image_size=16, supersample=2, rng=np.random.default_rng(1))
    assert grid.shape == (5, 9, 1, 16, 16)
    assert grid.dtype == np.uint8
    again = render_viewgrid(v, f, image_size=16, supersample=2, rng=np.random.default_rng(1))
    np.testing.assert_array_equal(grid, again)
    assert (grid[:, :, 0, 0, :] == 255).mean() > 0.9  # white background at the border
    assert (grid < 255).any(axis=(2, 3, 4)).all()  # the object is in every view


# ----------------------------------------------------------------------------- real meshes
def manifest() -> dict[str, dict[str, str]]:
    with (MESHES / "MANIFEST.csv").open(newline="") as f:
        return {row["file"]: row for row in csv.DictReader(f)}


@needs_meshes
@pytest.mark.parametrize("name", SMALL)
def test_sample_mesh_counts_match_the_manifest(name: str) -> None:
    vertices, faces = load_mesh(MESHES / name)
    row = manifest()[name]
    assert vertices.shape == (int(row["vertices"]), 3)
    assert faces.shape == (int(row["faces"]), 3)
    extent = vertices.max(0) - vertices.min(0)
    expected = [float(x) for x in row["obj_extent_xyz"].split()]
    np.testing.assert_allclose(extent, expected, rtol=1e-3, atol=0.01)


@needs_meshes
@pytest.mark.parametrize("name", SMALL)
def test_sample_mesh_renders_centred_and_varied(name: str) -> None:
    vertices, faces = load_mesh(MESHES / name)
    grid = render_viewgrid(vertices, faces, rng=np.random.default_rng(0))[:, :, 0]  # [5, 9, H, W]
    foreground = grid < 250
    border = np.concatenate(
        [
            foreground[..., 0, :],
            foreground[..., -1, :],
            foreground[..., :, 0],
            foreground[..., :, -1],
        ],
        axis=-1,
    )
    assert border.mean() < 0.05  # background all around
    rows, cols = np.nonzero(foreground.reshape(-1, 32, 32).any(0))
    assert abs(rows.mean() - 15.5) < 4
    assert abs(cols.mean() - 15.5) < 4
    # Every view shows the object, and views at different azimuths differ.
    assert foreground.any(axis=(2, 3)).all()
    side = grid[2].astype(np.int16)
    assert all(np.abs(side[m] - side[0]).mean() > 1 for m in range(1, 9))
