"""Tests of pyskick.data.synthetic_objects: procedural meshes and the HDF5 viewgrid file."""

from __future__ import annotations

from pathlib import Path

import h5py
import numpy as np
import pytest

from pyskick.data import ViewgridFile
from pyskick.data.meshes import render_viewgrid
from pyskick.data.synthetic_objects import (
    FAMILIES,
    SEEN_FAMILIES,
    SPLITS,
    UNSEEN_FAMILIES,
    MeshBuilder,
    make_object,
    make_synthetic_objects,
    split_families,
    split_sizes,
)


@pytest.mark.parametrize("family", list(FAMILIES))
def test_every_family_builds_a_valid_visible_mesh(family: str) -> None:
    for seed in range(3):
        vertices, faces = make_object(family, np.random.default_rng(seed))
        assert vertices.dtype == np.float32
        assert faces.dtype == np.int32
        assert np.isfinite(vertices).all()
        assert faces.min() >= 0
        assert faces.max() < len(vertices)
        extent = vertices.max(0) - vertices.min(0)
        assert (extent > 0.05).all()
        assert vertices[:, 1].min() >= -1e-6  # standing on the floor, Y up
        grid = render_viewgrid(vertices, faces, image_size=16, supersample=2,
                               rng=np.random.default_rng(0))  # fmt: skip
        assert (grid < 250).any(axis=(2, 3, 4)).all()  # visible from every camera


def test_families_vary_with_the_seed_and_repeat_with_it() -> None:
    a = make_object("chair", np.random.default_rng(1))
    b = make_object("chair", np.random.default_rng(1))
    c = make_object("chair", np.random.default_rng(2))
    np.testing.assert_array_equal(a[0], b[0])
    assert a[0].shape != c[0].shape or not np.array_equal(a[0], c[0])
    with pytest.raises(ValueError, match="unknown object family 'spaceship'"):
        make_object("spaceship", np.random.default_rng(0))


def test_mesh_builder_parts() -> None:
    m = MeshBuilder()
    m.box((0, 0, 0), (2, 2, 2))
    m.cylinder((0, 0, 0), 1.0, 2.0, axis="x", segments=8)
    v, f = m.build()
    assert len(v) == 24 + 2 * 8 + 2 * (8 + 1)  # box sides, cylinder wall, two cap fans
    assert len(f) == 12 + 2 * 8 + 2 * 8
    np.testing.assert_allclose(np.abs(v[:24]).max(0), [1, 1, 1])
    np.testing.assert_allclose(v[24:, 0].min(), -1.0)  # the cylinder lies along x
    with pytest.raises(ValueError, match="axis"):
        m.cylinder((0, 0, 0), 1.0, 1.0, axis="w")


def test_splits_hold_seen_and_unseen_families_apart() -> None:
    assert set(SEEN_FAMILIES) | set(UNSEEN_FAMILIES) == set(FAMILIES)
    assert not set(SEEN_FAMILIES) & set(UNSEEN_FAMILIES)
    assert len(SEEN_FAMILIES) >= 8
    for split in SPLITS:
        families = split_families(split, 20, seed=3)
        allowed = UNSEEN_FAMILIES if split == "test_unseen" else SEEN_FAMILIES
        assert set(families) == set(allowed)  # all of them, balanced in turn
    assert split_families("train", 20, 3) == split_families("train", 20, 3)
    sizes = split_sizes(100)
    assert sizes == {"train": 56, "val": 8, "test": 16, "test_unseen": 20}
    assert min(split_sizes(4).values()) == 1


def test_make_synthetic_objects_writes_the_authors_layout(tmp_path: Path) -> None:
    path = make_synthetic_objects(tmp_path / "objects.h5", num=8, seed=5)
    assert path == tmp_path / "objects.h5"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["objects.h5"]  # no temp file left
    with h5py.File(path, "r") as f:
        assert set(f.keys()) == set(SPLITS)
        sizes = split_sizes(8)
        for split in SPLITS:
            assert f[split].shape == (sizes[split], 5, 9, 1, 32, 32)
            assert f[split].dtype == np.uint8
        train = f["train"][...]
        assert list(f.attrs["elevations_deg"]) == [80, 40, 0, -40, -80]
        assert list(f.attrs["azimuths_deg"]) == list(range(0, 360, 40))
        assert f.attrs["n_elevations"] == 5
        assert f.attrs["n_azimuths"] == 9
        assert f.attrs["fov_deg"] == 40.0
        np.testing.assert_allclose(f.attrs["channel_mean"], [train.mean()])
        assert f.attrs["source"] == "synthetic-objects"
        assert list(f.attrs["classes"]) == list(FAMILIES)
        assert list(f.attrs["unseen_classes"]) == list(UNSEEN_FAMILIES)
        assert f.attrs["schema_version"] == 1
        # Objects on a white background, centred: the borders are mostly 255.
        border = np.concatenate([train[..., 0, :], train[..., -1, :]], axis=-1)
        assert (border == 255).mean() > 0.9
        assert 150 < train.mean() < 250
    # Deterministic from the seed; another seed gives other objects.
    again = make_synthetic_objects(tmp_path / "again.h5", num=8, seed=5)
    other = make_synthetic_objects(tmp_path / "other.h5", num=8, seed=6)
    with h5py.File(path, "r") as a, h5py.File(again, "r") as b, h5py.File(other, "r") as c:
        for split in SPLITS:
            np.testing.assert_array_equal(a[split][...], b[split][...])
        assert not np.array_equal(a["train"][...], c["train"][...])


@pytest.mark.parametrize(("num", "seed"), [(3, 0), (10, -1), (10.0, 0), (True, 0)])
def test_bad_arguments_write_nothing(tmp_path: Path, num: object, seed: object) -> None:
    with pytest.raises(ValueError, match=r"num|seed"):
        make_synthetic_objects(tmp_path / "objects.h5", num=num, seed=seed)  # type: ignore[arg-type]
    assert list(tmp_path.iterdir()) == []


def test_readable_through_the_dataset_reader(tmp_path: Path) -> None:
    path = make_synthetic_objects(tmp_path / "new" / "objects.h5", num=8, seed=1)
    vf = ViewgridFile(path)
    assert vf.splits == ("train", "val", "test", "test_unseen")
    assert vf.spec.view_shape == (5, 9, 1, 32, 32)
    assert vf.spec.preset == "modelnet-hard"
    assert vf.split("test_unseen").load().shape[1:] == (5, 9, 1, 32, 32)
