"""HDF5 viewgrid files: round trip, recognition of the authors' files, validation, caching."""

from __future__ import annotations

import pickle
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from pyskick.data import BUILTIN_DATASETS, MODELNET_HARD, SUN360, GridSpec, ViewgridFile
from pyskick.data.builtin import builtin_dataset
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.synthetic_scenes import generate_synthetic_scenes

TINY = GridSpec(
    n_elevations=2,
    n_azimuths=3,
    channels=1,
    view_size=4,
    elevations_deg=(30.0, -30.0),
    azimuths_deg=(0.0, 120.0, 240.0),
    fov_deg=70.0,
    channel_mean=(100.0,),
    preset="custom",
)


def _random_splits(spec: GridSpec, sizes: tuple[int, ...] = (5, 2, 3), seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    names = ("train", "val", "test", "test_unseen")
    return {
        name: rng.integers(0, 256, size=(n, *spec.view_shape), dtype=np.uint8)
        for name, n in zip(names, sizes, strict=False)
    }


def _raw_file(path: Path, arrays: dict[str, np.ndarray], attrs: dict | None = None) -> Path:
    with h5py.File(path, "w") as f:
        for name, array in arrays.items():
            f.create_dataset(name, data=array)
        for key, value in (attrs or {}).items():
            f.attrs[key] = value
    return path


def test_round_trip_keeps_data_spec_and_attributes(tmp_path: Path) -> None:
    splits = _random_splits(TINY, (5, 2, 3, 4))
    path = write_viewgrids(
        tmp_path / "d.h5",
        splits,
        TINY,
        source="unit test",
        classes=["a", "b"],
        extra_attrs={"k": 3},
    )
    f = ViewgridFile(path)
    assert f.spec == TINY
    assert f.splits == ("train", "val", "test", "test_unseen")
    assert f.attrs["source"] == "unit test"
    assert f.attrs["classes"] == ["a", "b"]
    assert f.attrs["k"] == 3
    assert f.attrs["schema_version"] == 1
    for name, array in splits.items():
        split = f.split(name)
        assert len(split) == array.shape[0]
        assert torch.equal(split.load(), torch.from_numpy(array))
        assert torch.equal(split[1], torch.from_numpy(array[1]))
        assert torch.equal(split[-1], torch.from_numpy(array[-1]))
        assert split[0].dtype == torch.uint8
    with h5py.File(path) as h:
        assert h["train"].chunks == (1, *TINY.view_shape)


def test_load_any_order_with_repeats(tmp_path: Path) -> None:
    splits = _random_splits(TINY, (6, 2, 2))
    split = ViewgridFile(write_viewgrids(tmp_path / "d.h5", splits, TINY, source="t")).split(
        "train"
    )
    got = split.load([4, 1, 4, -1, 0])
    assert torch.equal(got, torch.from_numpy(splits["train"][[4, 1, 4, 5, 0]]))
    assert split.load([]).shape == (0, *TINY.view_shape)
    with pytest.raises(IndexError):
        split.load([6])
    with pytest.raises(IndexError):
        split[6]


def test_pickles_and_works_in_dataloader_workers(tmp_path: Path) -> None:
    splits = _random_splits(TINY, (8, 2, 2))
    f = ViewgridFile(write_viewgrids(tmp_path / "d.h5", splits, TINY, source="t"))
    train = f.split("train")
    assert train[0].shape == TINY.view_shape  # the parent process has a handle open now
    clone = pickle.loads(pickle.dumps(train))
    assert torch.equal(clone[3], train[3])
    loader = torch.utils.data.DataLoader(train, batch_size=4, num_workers=2)
    batches = torch.cat(list(loader))
    assert torch.equal(batches, torch.from_numpy(splits["train"]))


@pytest.mark.parametrize(
    ("shape", "spec"), [((4, 8, 3, 32, 32), SUN360), ((5, 9, 1, 32, 32), MODELNET_HARD)]
)
def test_authors_files_without_attributes_get_their_preset(
    tmp_path: Path, shape: tuple[int, ...], spec: GridSpec
) -> None:
    rng = np.random.default_rng(1)
    arrays = {
        s: rng.integers(0, 256, (2, *shape), dtype=np.uint8) for s in ("train", "val", "test")
    }
    f = ViewgridFile(_raw_file(tmp_path / "authors.h5", arrays))
    assert f.spec == spec
    assert f.attrs == {}
    assert torch.equal(f.split("val").load(), torch.from_numpy(arrays["val"]))


def test_float_files_are_converted_on_read(tmp_path: Path) -> None:
    rng = np.random.default_rng(2)
    arrays = {
        s: rng.integers(0, 256, (2, 4, 8, 3, 32, 32)).astype(np.float32)
        for s in ("train", "val", "test")
    }
    arrays["val"][0, 0, 0, 0, 0, :3] = (254.6, 0.2, 127.5)
    f = ViewgridFile(_raw_file(tmp_path / "float.h5", arrays))
    got = f.split("val").load()
    assert got.dtype == torch.uint8
    assert got[0, 0, 0, 0, 0, :3].tolist() == [255, 0, 128]
    assert torch.equal(f.split("train")[1], torch.from_numpy(arrays["train"][1].astype(np.uint8)))


def test_unknown_attribute_less_shape_names_the_attributes_to_add(tmp_path: Path) -> None:
    arrays = {s: np.zeros((1, 3, 3, 3, 8, 8), np.uint8) for s in ("train", "val", "test")}
    with pytest.raises(ValueError, match="n_elevations, n_azimuths, fov_deg"):
        ViewgridFile(_raw_file(tmp_path / "odd.h5", arrays))


def _sun(n: int = 1, dtype: type = np.uint8) -> np.ndarray:
    return np.zeros((n, 4, 8, 3, 32, 32), dtype)


MALFORMED = {
    "missing split": ({"train": _sun(), "val": _sun()}, "missing split.*test"),
    "wrong rank": ({"train": _sun(), "val": _sun(), "test": np.zeros((1, 8, 3, 32, 32))}, "6 dim"),
    "wrong dtype": (
        {"train": _sun(), "val": _sun(), "test": _sun(dtype=np.complex64)},
        "dtype complex64",
    ),
    "inconsistent": (
        {"train": _sun(), "val": _sun(), "test": np.zeros((1, 4, 8, 3, 16, 16), np.uint8)},
        "all splits need the same",
    ),
    "empty split": ({"train": _sun(), "val": _sun(0), "test": _sun()}, "'val' is empty"),
    "nan": (
        {"train": _sun(), "val": _sun(), "test": np.full((1, 4, 8, 3, 32, 32), np.nan, np.float32)},
        "non-finite",
    ),
    "out of range": (
        {"train": _sun(), "val": _sun(), "test": np.full((1, 4, 8, 3, 32, 32), 300.0)},
        r"\[0, 255\]",
    ),
}


@pytest.mark.parametrize("case", sorted(MALFORMED))
def test_malformed_files_give_one_clear_error(tmp_path: Path, case: str) -> None:
    arrays, pattern = MALFORMED[case]
    path = _raw_file(tmp_path / "bad.h5", arrays)
    with pytest.raises(ValueError, match=pattern) as info:
        ViewgridFile(path)
    assert str(path) in str(info.value)
    assert "\n" not in str(info.value)


def test_attributes_that_contradict_the_data_are_rejected(tmp_path: Path) -> None:
    attrs = {**TINY.to_attrs(), "n_azimuths": 4, "azimuths_deg": [0.0, 90.0, 180.0, 270.0]}
    arrays = {s: np.zeros((1, *TINY.view_shape), np.uint8) for s in ("train", "val", "test")}
    with pytest.raises(ValueError, match="attributes say 2x4 views"):
        ViewgridFile(_raw_file(tmp_path / "a.h5", arrays, attrs))
    with pytest.raises(ValueError, match="invalid grid attributes"):
        ViewgridFile(_raw_file(tmp_path / "c.h5", arrays, {**TINY.to_attrs(), "fov_deg": -1.0}))
    partial = {"n_elevations": 2, "n_azimuths": 3}
    with pytest.raises(ValueError, match="add fov_deg, elevations_deg"):
        ViewgridFile(_raw_file(tmp_path / "b.h5", arrays, partial))


def test_not_hdf5_and_missing_file(tmp_path: Path) -> None:
    junk = tmp_path / "junk.h5"
    junk.write_bytes(b"not an hdf5 file")
    with pytest.raises(ValueError, match="not a readable HDF5 file"):
        ViewgridFile(junk)
    with pytest.raises(FileNotFoundError):
        ViewgridFile(tmp_path / "absent.h5")


def test_write_rejects_bad_input_and_leaves_existing_file(tmp_path: Path) -> None:
    path = write_viewgrids(tmp_path / "d.h5", _random_splits(TINY), TINY, source="first")
    before = path.read_bytes()
    good = _random_splits(TINY)
    cases = [
        ({"train": good["train"], "val": good["val"]}, ValueError, "missing split"),
        ({**good, "extra": good["val"]}, ValueError, "unknown split"),
        ({**good, "val": good["val"].astype(np.float32)}, TypeError, "uint8"),
        ({**good, "val": good["val"][:, :1]}, ValueError, "expected"),
        ({**good, "val": good["val"][:0]}, ValueError, "empty"),
    ]
    for splits, error, pattern in cases:
        with pytest.raises(error, match=pattern):
            write_viewgrids(path, splits, TINY, source="second")
    assert path.read_bytes() == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["d.h5"]


def test_builtin_dataset_generates_once_and_caches(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setitem(BUILTIN_DATASETS, "synthetic-scenes", (generate_synthetic_scenes, 6, 5))
    path = builtin_dataset("synthetic-scenes", tmp_path)
    assert path.parent == tmp_path
    assert path.name == "synthetic-scenes-v1-n6-s5.h5"
    assert ViewgridFile(path).spec == SUN360
    stamp = path.stat().st_mtime_ns
    assert builtin_dataset("synthetic-scenes", tmp_path) == path
    assert path.stat().st_mtime_ns == stamp
    # A damaged cache file is regenerated.
    path.write_bytes(b"truncated")
    assert ViewgridFile(builtin_dataset("synthetic-scenes", tmp_path)).spec == SUN360
    monkeypatch.setenv("PYSKICK_DATA_DIR", str(tmp_path / "env"))
    assert builtin_dataset("synthetic-scenes").parent == tmp_path / "env"


def test_builtin_dataset_unknown_name_lists_valid_ones(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="synthetic-scenes"):
        builtin_dataset("sun360-full", tmp_path)
    assert not any(tmp_path.iterdir())
