"""F3/F4 (issue 14): damaged or forged viewgrid files are refused in one line naming the file
and the split (exit 2), quickly, in ``data info`` and ``pretrain``, and nothing is written.

Every file is a real HDF5 file: a small synthetic-scenes file, copied and then damaged the way
a user's file can be (a dangling link, a flipped byte inside a gzip chunk, a truncated copy, a
shape that declares far more data than the file holds, ...).
"""

from __future__ import annotations

import functools
import shutil
import tracemalloc
import zlib
from collections.abc import Callable
from pathlib import Path

import h5py
import numpy as np
import pytest

from pyskick import memory
from pyskick.data import hdf5_read
from pyskick.data.builtin import make_builtin
from pyskick.data.hdf5_format import ViewgridFileError
from pyskick.data.hdf5_read import ViewgridFile
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.spec import GridSpec

FAST = ["--preset", "cpu-demo", "--epochs", "1", "--batch-size", "8", "--device", "cpu"]
VIEW = (4, 8, 3, 32, 32)  # the SUN360 viewgrid of synthetic-scenes


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A valid gzip-chunked synthetic-scenes file (copied, never changed)."""
    return make_builtin("synthetic-scenes", tmp_path_factory.mktemp("base") / "base.h5", 24, 1)


def _copy(base: Path, path: Path) -> Path:
    shutil.copy(base, path)
    return path


def _replace_split(path: Path, name: str, make: Callable[[h5py.File], object]) -> None:
    with h5py.File(path, "a") as f:
        del f[name]
        make(f)


def flip_chunk_bytes(path: Path, split: str, sample: int) -> None:
    """Flip bytes in the middle of the (gzip) chunk holding ``sample`` of ``split``."""
    with h5py.File(path, "r") as f:
        info = f[split].id.get_chunk_info_by_coord((sample, 0, 0, 0, 0, 0))
    with path.open("r+b") as handle:
        handle.seek(info.byte_offset + info.size // 2)
        data = handle.read(16)
        handle.seek(info.byte_offset + info.size // 2)
        handle.write(bytes(b ^ 0xFF for b in data))


def _dangling_soft_link(base: Path, path: Path) -> tuple[str, ...]:
    _replace_split(_copy(base, path), "val", lambda f: f.__setitem__("val", h5py.SoftLink("/x")))
    return ("split 'val'", "soft link to /x", "does not exist")


def _dangling_external_link(base: Path, path: Path) -> tuple[str, ...]:
    link = h5py.ExternalLink("absent.h5", "/train")
    _replace_split(_copy(base, path), "test", lambda f: f.__setitem__("test", link))
    return ("split 'test'", "external link to absent.h5")


def _corrupt_gzip_chunk(base: Path, path: Path) -> tuple[str, ...]:
    flip_chunk_bytes(_copy(base, path), "val", 1)
    return ("split 'val'", "damaged")


def _corrupt_gzip_chunk_late_in_train(base: Path, path: Path) -> tuple[str, ...]:
    flip_chunk_bytes(_copy(base, path), "train", 17)
    return ("split 'train'", "damaged")


def _huge_chunked(base: Path, path: Path) -> tuple[str, ...]:
    """The issue's file: ``[2^40, 4, 8, 3, 32, 32]`` chunked, one chunk written (~20 KB)."""
    with h5py.File(path, "w") as f:
        for name in ("train", "val", "test"):
            ds = f.create_dataset(
                name, (2**40, *VIEW), np.uint8, chunks=(1, *VIEW), compression="gzip"
            )
            ds[0] = 7
    return ("split 'train'", "declares", "96.0 PiB", "stores 1")


def _huge_float(base: Path, path: Path) -> tuple[str, ...]:
    """Float32 ``[2^30, ...]``: its value check on open used to run for ever."""
    with h5py.File(path, "w") as f:
        for name in ("train", "val", "test"):
            ds = f.create_dataset(
                name, (2**30, *VIEW), np.float32, chunks=(1, *VIEW), compression="gzip"
            )
            ds[0] = 1.0
    return ("split 'train'", "declares", "float32")


def _huge_only_val(base: Path, path: Path) -> tuple[str, ...]:
    def make(f: h5py.File) -> None:
        ds = f.create_dataset("val", (2**36, *VIEW), np.uint8, chunks=(64, *VIEW))
        ds[0] = 1

    _replace_split(_copy(base, path), "val", make)
    return ("split 'val'", "declares", "chunks")


@functools.cache
def _zeros_gzip_chunk(count: int, dtype: str) -> bytes:
    """A valid gzip (zlib) chunk of ``count`` zero viewgrids, compressed piece by piece."""
    compressor = zlib.compressobj()
    zeros = bytes(int(np.prod(VIEW)) * np.dtype(dtype).itemsize)
    return b"".join(compressor.compress(zeros) for _ in range(count)) + compressor.flush()


def _huge_chunks(dtype: str, rows: int) -> Callable[[Path, Path], tuple[str, ...]]:
    """Splits of ``2 * rows`` zero viewgrids in two valid gzip chunks (a file under 1 MB).

    Every chunk is stored, so the storage check passes; but HDF5 decompresses a whole chunk for
    each read that touches it, so opening (float: the value check) and reading (``data info``)
    decompressed a whole huge chunk for every few viewgrids."""

    def make(base: Path, path: Path) -> tuple[str, ...]:
        payload = _zeros_gzip_chunk(rows, dtype)
        with h5py.File(path, "w") as f:
            for name in ("train", "val", "test"):
                ds = f.create_dataset(
                    name, (2 * rows, *VIEW), dtype, chunks=(rows, *VIEW), compression="gzip"
                )
                for start in (0, rows):
                    ds.id.write_direct_chunk((start, 0, 0, 0, 0, 0), payload)
        size = hdf5_read._size(rows * int(np.prod(VIEW)) * np.dtype(dtype).itemsize)
        return ("split 'train'", f"chunks of {rows}x4x8x3x32x32", size, "32.0 MiB allowed")

    return make


def _contiguous_never_written(base: Path, path: Path) -> tuple[str, ...]:
    _replace_split(
        _copy(base, path), "test", lambda f: f.create_dataset("test", (2**20, *VIEW), np.uint8)
    )
    return ("split 'test'", "never written")


def _missing_chunks(base: Path, path: Path) -> tuple[str, ...]:
    """A split whose last samples were never written (a writer that stopped half-way)."""

    def make(f: h5py.File) -> None:
        ds = f.create_dataset("train", (20, *VIEW), np.uint8, chunks=(1, *VIEW))
        ds[:12] = 3

    _replace_split(_copy(base, path), "train", make)
    return ("split 'train'", "in 20 chunks", "stores 12")


def _truncated(base: Path, path: Path) -> tuple[str, ...]:
    data = base.read_bytes()
    path.write_bytes(data[: len(data) * 2 // 3])
    return ("not a readable HDF5 file",)  # the rest is the HDF5 library's wording


def _not_hdf5(base: Path, path: Path) -> tuple[str, ...]:
    path.write_text("train,val,test\n1,2,3\n")
    return ("not a readable HDF5 file",)


def _wrong_rank(base: Path, path: Path) -> tuple[str, ...]:
    _replace_split(
        _copy(base, path), "val", lambda f: f.create_dataset("val", data=np.zeros((2, 8, 3, 32)))
    )
    return ("split 'val'", "6 dimensions")


def _string_dtype(base: Path, path: Path) -> tuple[str, ...]:
    _replace_split(
        _copy(base, path),
        "test",
        lambda f: f.create_dataset("test", (1, *VIEW), dtype="S2"),
    )
    return ("split 'test'", "dtype")


def _compound_dtype(base: Path, path: Path) -> tuple[str, ...]:
    kind = np.dtype([("a", np.uint8), ("b", np.float32)])
    _replace_split(
        _copy(base, path), "val", lambda f: f.create_dataset("val", (1, *VIEW), dtype=kind)
    )
    return ("split 'val'", "dtype")


def _split_is_group(base: Path, path: Path) -> tuple[str, ...]:
    _replace_split(_copy(base, path), "train", lambda f: f.create_group("train"))
    return ("split 'train'", "found a group")


def _no_pixels(base: Path, path: Path) -> tuple[str, ...]:
    def make(f: h5py.File) -> None:
        for name in ("train", "val", "test"):
            del f[name]
            f.create_dataset(name, (3, 4, 8, 3, 0, 0), np.uint8)

    with h5py.File(_copy(base, path), "a") as f:
        make(f)
    return ("split 'train'", "no pixels")


def _missing_attribute(base: Path, path: Path) -> tuple[str, ...]:
    with h5py.File(_copy(base, path), "a") as f:
        del f.attrs["fov_deg"]
    return ("incomplete grid attributes", "fov_deg")


def _attribute_of_wrong_type(base: Path, path: Path) -> tuple[str, ...]:
    with h5py.File(_copy(base, path), "a") as f:
        f.attrs["elevations_deg"] = "high, low"
    return ("invalid grid attribute elevations_deg: 'high, low'",)


def _attribute_not_utf8(base: Path, path: Path) -> tuple[str, ...]:
    with h5py.File(_copy(base, path), "a") as f:
        f.attrs["preset"] = np.bytes_(b"\xff\xfe")
    return ("root attribute 'preset' cannot be read",)


def _infinite_attribute(base: Path, path: Path) -> tuple[str, ...]:
    with h5py.File(_copy(base, path), "a") as f:
        f.attrs["n_azimuths"] = np.inf
    return ("invalid grid attribute n_azimuths: inf",)


def _a_word_for_a_number(base: Path, path: Path) -> tuple[str, ...]:
    with h5py.File(_copy(base, path), "a") as f:
        f.attrs["n_elevations"] = "four"
    return ("invalid grid attribute n_elevations: 'four'",)


def _a_newer_schema(base: Path, path: Path) -> tuple[str, ...]:
    with h5py.File(_copy(base, path), "a") as f:
        f.attrs["schema_version"] = 99
    return ("written with schema_version 99; this pyskick reads up to 1",)


def _nan_floats(base: Path, path: Path) -> tuple[str, ...]:
    def make(f: h5py.File) -> None:
        values = np.full((300, *VIEW), 10.0, np.float32)
        values[270, 1, 2, 0, 3, 4] = np.nan
        f.create_dataset("val", data=values, chunks=(1, *VIEW), compression="gzip")

    _replace_split(_copy(base, path), "val", make)
    return ("split 'val'", "non-finite", "sample 270")


def _virtual_split(base: Path, path: Path) -> tuple[str, ...]:
    source = path.with_name("source.h5")
    _copy(base, source)
    layout = h5py.VirtualLayout((24, *VIEW), np.uint8)
    layout[:] = h5py.VirtualSource(str(source), "train", shape=(24, *VIEW))
    _replace_split(_copy(base, path), "train", lambda f: f.create_virtual_dataset("train", layout))
    return ("split 'train'", "outside the file")


CORPUS: dict[str, Callable[[Path, Path], tuple[str, ...]]] = {
    "dangling soft link": _dangling_soft_link,
    "dangling external link": _dangling_external_link,
    "corrupted gzip chunk": _corrupt_gzip_chunk,
    "corrupted gzip chunk late in train": _corrupt_gzip_chunk_late_in_train,
    "[2^40, 4, 8, 3, 32, 32] chunked split": _huge_chunked,
    "float32 [2^30, ...] split": _huge_float,
    "one huge split among valid ones": _huge_only_val,
    "float32 split in 112 MiB gzip chunks": _huge_chunks("float32", 300),
    "uint8 split in 56 MiB gzip chunks": _huge_chunks("uint8", 600),
    "contiguous split never written": _contiguous_never_written,
    "split with missing chunks": _missing_chunks,
    "truncated file": _truncated,
    "not an HDF5 file": _not_hdf5,
    "wrong rank": _wrong_rank,
    "string dtype": _string_dtype,
    "compound dtype": _compound_dtype,
    "split is a group": _split_is_group,
    "views without pixels": _no_pixels,
    "missing attribute": _missing_attribute,
    "attribute of the wrong type": _attribute_of_wrong_type,
    "attribute that is not UTF-8": _attribute_not_utf8,
    "infinite attribute": _infinite_attribute,
    "a word for a number": _a_word_for_a_number,
    "a newer schema": _a_newer_schema,
    "NaN in a float split": _nan_floats,
    "virtual split": _virtual_split,
}


@pytest.mark.parametrize(
    "version", [1, np.int8(1), np.uint64(1), np.float64(1.0), "1", b"1", np.array([1])]
)
def test_schema_version_one_is_read_however_it_is_stored(
    base: Path, tmp_path: Path, version: object
) -> None:
    # Other tools write it as a double (MATLAB), a string or a 1-element array.
    path = _copy(base, tmp_path / "v.h5")
    with h5py.File(path, "a") as f:
        f.attrs["schema_version"] = version
    assert ViewgridFile(path).spec.n_elevations == 4


@pytest.mark.timeout(60)
@pytest.mark.parametrize("case", list(CORPUS))
@pytest.mark.parametrize("command", ["data info", "pretrain"])
def test_damaged_file_is_refused_in_one_line(
    base: Path, tmp_path: Path, refuse, case: str, command: str
) -> None:
    data = tmp_path / "data"
    data.mkdir()
    path = data / "bad.h5"
    needles = CORPUS[case](base, path)
    out = tmp_path / "run"
    args = (
        ["data", "info", path]
        if command == "data info"
        else ["pretrain", "--dataset", path, *FAST, "--out", out]
    )
    refuse(args, 2, str(path), *needles, watch=[data, out])


@pytest.mark.timeout(60)
@pytest.mark.parametrize("command", ["data info", "pretrain"])
def test_a_read_larger_than_the_memory_limit_is_refused(
    base: Path, tmp_path: Path, refuse, monkeypatch: pytest.MonkeyPatch, command: str
) -> None:
    monkeypatch.setenv("PYSKICK_MAX_READ_BYTES", "10000")  # less than one viewgrid (24 KiB)
    out = tmp_path / "run"
    args = (
        ["data", "info", base]
        if command == "data info"
        else ["pretrain", "--dataset", base, *FAST, "--out", out]
    )
    refuse(args, 2, str(base), "split 'train'", "more than", "PYSKICK_MAX_READ_BYTES",
           watch=[base.parent, out])  # fmt: skip


def test_a_bad_memory_limit_is_refused(base: Path, refuse, monkeypatch) -> None:
    monkeypatch.setenv("PYSKICK_MAX_READ_BYTES", "lots")
    refuse(["data", "info", base], 2, "PYSKICK_MAX_READ_BYTES", "'lots'", watch=[base.parent])


@pytest.mark.timeout(60)
def test_a_chunk_damaged_after_opening_names_file_and_split_on_every_read(
    base: Path, tmp_path: Path
) -> None:
    """Lazy reads (DataLoader items, batches) of a chunk found damaged mid-epoch."""
    path = _copy(base, tmp_path / "d.h5")
    opened = ViewgridFile(path)
    train = opened.split("train")
    assert train[3].shape == VIEW
    flip_chunk_bytes(path, "train", 5)
    opened.close()  # drop cached chunks: the next read goes to the disk
    for read in (lambda: train[5], lambda: train.load([0, 5]), train.load):
        with pytest.raises(ViewgridFileError) as info:
            read()
        message = str(info.value)
        assert str(path) in message
        assert "split 'train'" in message
        assert "\n" not in message
    assert train[4].shape == VIEW  # the other chunks still read


@pytest.mark.timeout(60)
def test_a_file_replaced_after_opening_names_file_and_split(base: Path, tmp_path: Path) -> None:
    path = _copy(base, tmp_path / "d.h5")
    opened = ViewgridFile(path)
    path.write_text("gone")
    with pytest.raises(ViewgridFileError, match=r"d\.h5: split 'val' cannot be read"):
        opened.split("val")[0]


def test_valid_links_to_other_files_and_datasets_still_load(base: Path, tmp_path: Path) -> None:
    """The storage bounds are checked against the file that holds the data: a split behind an
    external link into a larger file, or a soft link, is accepted and reads exactly."""
    big = tmp_path / "big.h5"
    rng = np.random.default_rng(0)
    grids = rng.integers(0, 256, (40, *VIEW), dtype=np.uint8)
    with h5py.File(big, "w") as f:
        f.create_dataset("padding", data=np.zeros(2**20, np.uint8))
        f.create_dataset("grids", data=grids)  # contiguous, far beyond the small file's end
    path = _copy(base, tmp_path / "linked.h5")
    with h5py.File(path, "a") as f:
        del f["test"], f["val"]
        f["test"] = h5py.ExternalLink("big.h5", "/grids")
        f.create_dataset("spare/val", data=grids[:3])
        f["val"] = h5py.SoftLink("/spare/val")
    assert path.stat().st_size < big.stat().st_size
    opened = ViewgridFile(path)
    assert np.array_equal(opened.split("test").load().numpy(), grids)
    assert np.array_equal(opened.split("val")[2].numpy(), grids[2])


@pytest.mark.timeout(60)
def test_any_flipped_byte_of_the_root_metadata_is_refused_in_one_line(
    base: Path, tmp_path: Path
) -> None:
    """A damaged superblock or root group used to escape as a bare ``RuntimeError`` from the
    split lookup (``"train" in f``: "Unable to synchronously check link existence")."""
    data = base.read_bytes()
    path = tmp_path / "flipped.h5"
    for offset in range(256):  # the superblock and the root group's header and links
        damaged = bytearray(data)
        damaged[offset] ^= 0xFF
        path.write_bytes(damaged)
        try:
            ViewgridFile(path)
        except ViewgridFileError as exc:
            message = str(exc)
        else:
            continue  # a byte that does not matter (padding, a timestamp)
        assert str(path) in message, offset
        assert "\n" not in message, offset


TINY = GridSpec(
    n_elevations=2,
    n_azimuths=3,
    channels=1,
    view_size=64,
    elevations_deg=(30.0, -30.0),
    azimuths_deg=(0.0, 120.0, 240.0),
    fov_deg=70.0,
    channel_mean=(100.0,),
    preset="custom",
)


def _tiny_file(
    path: Path, dtype: str, n: int = 8, chunk_rows: int = 1, spec: GridSpec = TINY
) -> np.ndarray:
    """A valid file of ``n`` random viewgrids stored as ``dtype``; returns the uint8 values."""
    values = np.random.default_rng(0).integers(0, 256, (n, *spec.view_shape), dtype=np.uint8)
    with h5py.File(path, "w") as f:
        for name in ("train", "val", "test"):
            f.create_dataset(name, data=values.astype(dtype), chunks=(chunk_rows, *spec.view_shape))
        for key, value in spec.to_attrs().items():
            f.attrs[key] = value
    return values


def _peak_bytes(read: Callable[[], object]) -> int:
    """Peak of the memory ``read`` allocates through Python and numpy (tracemalloc)."""
    tracemalloc.start()
    try:
        read()
        return tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


@pytest.mark.parametrize("dtype", ["uint8", "float32", "int16"])
@pytest.mark.parametrize(
    "indices", [None, [0, 2, 5, 7], [7, 0, 7, 3]], ids=["all", "in order", "gather"]
)
def test_the_memory_a_read_is_checked_against_is_what_it_allocates(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, dtype: str, indices: list[int] | None
) -> None:
    """The estimate used to count a uint8 copy that a uint8 read never makes (a load twice as
    large refused) and to miss the copy ``np.rint`` made of a float read (half counted)."""
    values = _tiny_file(tmp_path / "d.h5", dtype)
    split = ViewgridFile(tmp_path / "d.h5").split("train")
    split[0]  # open the handle outside the measurement
    peak = _peak_bytes(lambda: split.load(indices))
    monkeypatch.setenv("PYSKICK_MAX_READ_BYTES", str(peak))  # what it really needs: accepted
    expected = values if indices is None else values[indices]
    assert np.array_equal(split.load(indices).numpy(), expected)
    # Below what its arrays take (the peak counts ~10 KiB of Python objects too): refused.
    monkeypatch.setenv("PYSKICK_MAX_READ_BYTES", str(peak - 64 * 2**10))
    with pytest.raises(ViewgridFileError, match="more than the"):
        split.load(indices)


def test_a_large_viewgrid_of_wide_values_is_checked_before_its_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Single items skip the check unless a viewgrid is large: in bytes, not in values."""
    _tiny_file(tmp_path / "d.h5", "float64", n=2)
    values = int(np.prod(TINY.view_shape))
    monkeypatch.setattr(hdf5_read, "_SCAN_BYTES", 2 * values)  # above its values, below its bytes
    monkeypatch.setenv("PYSKICK_MAX_READ_BYTES", str(values))
    split = ViewgridFile(tmp_path / "d.h5").split("val")
    with pytest.raises(ViewgridFileError, match="split 'val': reading 1 viewgrids needs"):
        split[1]


def test_blocks_are_slices_of_whole_chunk_rows(tmp_path: Path) -> None:
    values = _tiny_file(tmp_path / "d.h5", "uint8", n=18, chunk_rows=4)
    split = ViewgridFile(tmp_path / "d.h5").split("test")
    per_sample = int(np.prod(TINY.view_shape))
    blocks = list(split.blocks(max_bytes=6 * per_sample))
    assert [len(b) for b in blocks] == [4, 4, 4, 4, 2]  # not 6 + 6 + 6: chunks read twice
    assert np.array_equal(np.concatenate([b.numpy() for b in blocks]), values)
    assert [len(b) for b in split.blocks(max_bytes=3 * per_sample)] == [3] * 6  # within a row


@pytest.mark.parametrize(
    ("shape", "chunks", "itemsize", "max_bytes"),
    [
        ((10, 3, 4, 5), (4, 2, 4, 5), 4, 1000),  # rows of chunks too large: cut along axis 1
        ((10, 3, 4, 5), (4, 2, 4, 5), 4, 100),  # one chunk (160 B) above the bound
        ((10, 3, 4, 5), (1, 1, 1, 1), 8, 100),  # contiguous: any slab
        ((3, 5), (8, 2), 2, 8),  # chunks beyond the shape (an extendible dataset)
        ((7, 6), (2, 6), 1, 1000),  # many rows per read
    ],
)
def test_value_check_reads_cover_the_data_once_in_whole_chunks(
    shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int, max_bytes: int
) -> None:
    covered = np.zeros(shape, np.int32)
    largest = max(max_bytes, int(np.prod(chunks)) * itemsize)
    for where in hdf5_read._slabs(shape, chunks, itemsize, max_bytes):
        covered[where] += 1
        extents = [s.stop - s.start for s in where] + list(shape[len(where) :])
        assert int(np.prod(extents)) * itemsize <= largest, where
        for axis, part in enumerate(where):
            assert part.start % chunks[axis] == 0, where
            assert part.stop % chunks[axis] == 0 or part.stop == shape[axis], where
    assert (covered == 1).all()


def test_running_out_of_memory_in_a_read_names_file_and_split(
    base: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    split = ViewgridFile(base).split("val")

    def out_of_memory(*_args: object) -> None:
        raise MemoryError("Unable to allocate 96.0 PiB for an array")

    monkeypatch.setattr(h5py.Dataset, "__getitem__", out_of_memory)
    for read in (lambda: split[0], split.load, lambda: split.load([1]), lambda: [*split.blocks()]):
        with pytest.raises(ViewgridFileError, match=r"base\.h5: split 'val': out of memory"):
            read()


def test_an_unknown_split_is_not_called_damage(base: Path) -> None:
    with pytest.raises(ValueError, match=r"no split 'nope'; available: train, val, test") as info:
        ViewgridFile(base).dataset("nope")
    assert "damaged" not in str(info.value)


def _tiny_splits() -> dict[str, np.ndarray]:
    return {s: np.zeros((2, *TINY.view_shape), np.uint8) for s in ("train", "val", "test")}


def test_write_refuses_an_integer_attribute_beyond_64_bits_before_making_folders(
    tmp_path: Path,
) -> None:
    out = tmp_path / "new" / "sub" / "o.h5"
    with pytest.raises(ValueError, match=r"attribute 'seed' = 1180591620717411303424 does not fit"):
        write_viewgrids(out, _tiny_splits(), TINY, source="t", extra_attrs={"seed": 2**70})
    assert list(tmp_path.iterdir()) == []


def test_a_written_file_that_does_not_open_is_named_by_its_final_path(tmp_path: Path) -> None:
    out = tmp_path / "o.h5"
    with pytest.raises(ViewgridFileError) as info:  # an attribute that reads back as no text
        write_viewgrids(
            out, _tiny_splits(), TINY, source="t", extra_attrs={"note": np.bytes_(b"\xff")}
        )
    assert str(info.value).startswith(f"{out}: root attribute 'note' cannot be read")
    assert ".tmp" not in str(info.value)
    assert list(tmp_path.iterdir()) == []


def _cgroup(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        (root / name).parent.mkdir(parents=True, exist_ok=True)
        (root / name).write_text(text)
    return root


GIB = 2**30
# A container limited to 8 GiB whose page cache filled it: 1 GiB of it in use, 6.5 GiB of
# inactive file pages the kernel reclaims on demand (the old check saw 1 MiB left).
CGROUPS = {
    "v2 limit": (
        {"memory.max": f"{8 * GIB}\n", "memory.current": f"{8 * GIB - 2**20}\n",
         "memory.stat": f"anon {GIB}\nfile {7 * GIB}\nactive_file {GIB // 2}\n"
                        f"inactive_file {13 * GIB // 2}\n"},
        13 * GIB // 2 + 2**20,
    ),
    "v1 limit": (
        {"memory/memory.limit_in_bytes": f"{8 * GIB}\n",
         "memory/memory.usage_in_bytes": f"{8 * GIB - 2**20}\n",
         "memory/memory.stat": f"cache {7 * GIB}\ninactive_file {GIB}\n"
                               f"total_inactive_file {13 * GIB // 2}\n"},
        13 * GIB // 2 + 2**20,
    ),
    "v2 without a limit": ({"memory.max": "max\n", "memory.current": "5\n"}, None),
    "v1 without a limit": (
        {"memory/memory.limit_in_bytes": "9223372036854771712\n",
         "memory/memory.usage_in_bytes": f"{GIB}\n", "memory/memory.stat": "cache 0\n"},
        9223372036854771712 - GIB,
    ),
    "no memory controller": ({}, None),
}  # fmt: skip


@pytest.mark.parametrize("case", list(CGROUPS))
def test_the_memory_limit_of_a_container_leaves_out_its_page_cache(
    tmp_path: Path, case: str
) -> None:
    files, left = CGROUPS[case]
    root = _cgroup(tmp_path, files)
    assert memory._cgroup_available(root) == left
    if left is not None:
        assert 0 < memory.available_memory(root) <= left
