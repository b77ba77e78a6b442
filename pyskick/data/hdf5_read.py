"""Reading viewgrid HDF5 files: validated on open, read lazily in bounded reads.

:class:`ViewgridFile` checks a file's splits, storage and attributes on open (the format:
:mod:`pyskick.data.hdf5_format`); :class:`ViewgridSplit` reads one split as uint8
``[N, M, C, H, W]`` viewgrids, refusing reads larger than :func:`read_limit`.
"""

from __future__ import annotations

import functools
import math
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TypeVar

import h5py
import numpy as np
import torch

from pyskick import memory
from pyskick.data.hdf5_format import (
    NAMES_GROUP,
    OPTIONAL_SPLITS,
    REQUIRED_SPLITS,
    SCHEMA_VERSION,
    SHAPE_PRESETS,
    SPEC_ATTRS,
    SPLITS,
    ViewgridFileError,
)
from pyskick.data.spec import PRESET_SPECS, GridSpec
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.files import file_digest

# Values of non-uint8 files are checked on open in reads of at most this many bytes.
_SCAN_BYTES = 32 * 2**20
# Overrides the memory a single read may allocate (default: the memory available).
READ_LIMIT_ENV = "PYSKICK_MAX_READ_BYTES"
# HDF5 decompresses a whole chunk for any read that touches it, so chunks are refused above
# this size (or one viewgrid, when that is larger): a small file of huge compressed chunks would
# otherwise make every partial read decompress gigabytes.
_MAX_CHUNK_BYTES = _SCAN_BYTES
# h5py/HDF5 errors of a damaged file (MemoryError: a chunk or read too large for this machine).
_H5_ERRORS = (OSError, KeyError, RuntimeError, TypeError, ValueError, MemoryError)


def _attr_value(value: Any) -> Any:
    """HDF5 attribute -> plain Python value."""
    if isinstance(value, h5py.Empty):
        return None
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return [_attr_value(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


_T = TypeVar("_T")


def _spec_from_attrs(path: Path, attrs: Mapping[str, Any], shape: tuple[int, ...]) -> GridSpec:
    """The GridSpec of a file from its attributes, or from its shape when it has none."""
    _check_schema(path, attrs.get("schema_version"))
    n, m, c, h, _ = shape
    present = [a for a in SPEC_ATTRS if a in attrs]
    if not present:
        preset = SHAPE_PRESETS.get((n, m, c))
        if preset is None:
            raise ViewgridFileError(
                f"{path}: views of shape N={n}, M={m}, C={c} match no known preset (SUN360 is "
                "4x8x3, ModelNet Hard 5x9x1); add the root attributes "
                f"{', '.join(SPEC_ATTRS)} to describe the grid"
            )
        base = PRESET_SPECS[preset]
        return GridSpec(**{**base.__dict__, "view_size": h})
    missing = [a for a in SPEC_ATTRS if a not in attrs]
    if missing:
        raise ViewgridFileError(f"{path}: incomplete grid attributes, add {', '.join(missing)}")

    def number(name: str) -> int:
        return _converted(path, attrs, name, int)

    def numbers(name: str) -> tuple[float, ...]:
        return _converted(path, attrs, name, lambda value: tuple(float(x) for x in value))

    n_elevations, n_azimuths = number("n_elevations"), number("n_azimuths")
    elevations, azimuths = numbers("elevations_deg"), numbers("azimuths_deg")
    fov, mean = _converted(path, attrs, "fov_deg", float), numbers("channel_mean")
    try:
        spec = GridSpec(
            n_elevations=n_elevations,
            n_azimuths=n_azimuths,
            channels=c,
            view_size=h,
            elevations_deg=elevations,
            azimuths_deg=azimuths,
            fov_deg=fov,
            channel_mean=mean,
            preset=str(attrs.get("preset", "custom")),
        )
    except (TypeError, ValueError, OverflowError) as exc:
        raise ViewgridFileError(f"{path}: invalid grid attributes: {exc}") from None
    if (spec.n_elevations, spec.n_azimuths) != (n, m):
        raise ViewgridFileError(
            f"{path}: attributes say {spec.n_elevations}x{spec.n_azimuths} views but the splits "
            f"hold {n}x{m}; fix n_elevations/n_azimuths or the data"
        )
    return spec


def _converted(path: Path, attrs: Mapping[str, Any], name: str, convert: Callable[[Any], _T]) -> _T:
    """Root attribute ``name`` through ``convert``; a value it refuses names the attribute."""
    try:
        return convert(attrs[name])
    except (TypeError, ValueError, OverflowError):
        raise ViewgridFileError(
            f"{path}: invalid grid attribute {name}: {attrs[name]!r:.80}"
        ) from None


def _check_schema(path: Path, version: Any) -> None:
    """Refuse a file of a newer layout than this pyskick reads (``schema_version``; files
    without it are read as version 1)."""
    if version is None:
        return
    # Other tools store it their own way (MATLAB a double, some a string or a 1-element array).
    raw = version
    if np.ndim(raw) == 1 and np.size(raw) == 1:
        raw = np.asarray(raw).ravel()[0]
    try:
        number = float(raw.decode() if isinstance(raw, bytes) else raw)
    except (TypeError, ValueError, UnicodeDecodeError):
        number = math.nan
    if isinstance(raw, bool) or not number.is_integer():
        raise ViewgridFileError(f"{path}: schema_version {version!r:.40} is not a whole number")
    version = int(number)
    if version > SCHEMA_VERSION:
        raise ViewgridFileError(
            f"{path}: written with schema_version {version}; this pyskick reads up to "
            f"{SCHEMA_VERSION} (upgrade pyskick)"
        )


def _brief(exc: BaseException) -> str:
    """One line of an h5py/OS error (a KeyError's text without its quotes)."""
    text = exc.args[0] if isinstance(exc, KeyError) and exc.args else str(exc)
    text = " ".join(str(text).split()) or type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def _size(nbytes: int) -> str:
    """``1536`` -> ``"1.5 KiB"``."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB", "PiB"):
        if value < 1024 or unit == "PiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")


def read_limit() -> int:
    """The most bytes one read of viewgrids may allocate.

    ``$PYSKICK_MAX_READ_BYTES`` when set, else the memory available now. Reads that would need
    more are refused before anything is allocated.

    Raises:
        ValueError: the variable is not a positive integer.
    """
    text = os.environ.get(READ_LIMIT_ENV, "").strip()
    if not text:
        return memory.available_memory()  # through the module: one place to pin it
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise UserError(f"{READ_LIMIT_ENV} must be a positive number of bytes, got {text!r}")
    return value


def _slabs(
    shape: tuple[int, ...], chunks: tuple[int, ...], itemsize: int, max_bytes: int
) -> Iterator[tuple[slice, ...]]:
    """Slices covering an array of ``shape`` in order, each made of whole ``chunks`` and of at
    most about ``max_bytes`` (one chunk when a chunk is larger).

    Rows of chunks are grouped along the first axis; a row larger than ``max_bytes`` is cut
    along its next axis, and so on, so a huge declared sample never needs one huge read. Whole
    chunks, because HDF5 decompresses a whole chunk for every read that touches it: a read of
    part of a chunk would decompress it again for each part.
    """
    if not shape:
        yield ()
        return
    row = math.prod(shape[1:]) * itemsize * chunks[0]
    if row <= max_bytes or len(shape) == 1:
        step = chunks[0] * max(1, max_bytes // max(row, 1))
        for start in range(0, shape[0], step):
            yield (slice(start, min(start + step, shape[0])),)
        return
    for start in range(0, shape[0], chunks[0]):
        stop = min(start + chunks[0], shape[0])
        for rest in _slabs(shape[1:], chunks[1:], itemsize * (stop - start), max_bytes):
            yield (slice(start, stop), *rest)


def _check_values(path: Path, name: str, ds: h5py.Dataset) -> None:
    """Check that a non-uint8 split holds finite values in [0, 255], in bounded reads."""
    chunks = ds.chunks or (1,) * ds.ndim  # contiguous data reads any slab at the same cost
    for where in _slabs(ds.shape, chunks, ds.dtype.itemsize, _SCAN_BYTES):
        block = ds[where]
        first = where[0].start
        if np.issubdtype(block.dtype, np.floating) and not np.isfinite(block).all():
            bad = int(np.argwhere(~np.isfinite(block))[0][0]) + first
            raise ViewgridFileError(
                f"{path}: split {name!r} holds non-finite values (first in sample {bad}); "
                "remove or repair those samples"
            )
        lo, hi = block.min(), block.max()
        if lo < 0 or hi > 255:
            raise ViewgridFileError(
                f"{path}: split {name!r} holds values in [{lo}, {hi}], expected pixel "
                "intensities in [0, 255]; rescale the data to 0-255"
            )


def _open_split(path: Path, f: h5py.File, name: str) -> h5py.Dataset:
    """The dataset behind a split name, following soft and external links."""
    where = f"{path}: split {name!r}"
    link = f.get(name, getlink=True)
    if isinstance(link, h5py.SoftLink | h5py.ExternalLink):
        external = isinstance(link, h5py.ExternalLink)
        target = (
            f"an external link to {link.filename}:{link.path}"
            if external
            else f"a soft link to {link.path}"
        )
        try:
            obj = f.get(name)
        except (OSError, KeyError, RuntimeError, ValueError) as exc:
            raise ViewgridFileError(
                f"{where} is {target}, which cannot be opened ({_brief(exc)})"
            ) from None
        if obj is None:
            raise ViewgridFileError(f"{where} is {target}, which does not exist")
    else:
        obj = f[name]
    if not isinstance(obj, h5py.Dataset):
        kind = "a group" if isinstance(obj, h5py.Group) else type(obj).__name__
        raise ViewgridFileError(f"{where} must be a dataset, found {kind}")
    return obj


def _holding_file_size(ds: h5py.Dataset) -> int | None:
    """Size of the file that holds ``ds`` (another one behind an external link)."""
    try:
        return Path(ds.file.filename).stat().st_size
    except (OSError, ValueError):
        return None


def _check_storage(path: Path, name: str, ds: h5py.Dataset) -> None:
    """Refuse a split that declares more data than the file stores (before any read).

    Contiguous data must be stored whole, inside the file; chunked data must have every chunk
    its shape declares (a missing chunk would read as zeros: a truncated or never-written split,
    or a forged shape), each of at most :data:`_MAX_CHUNK_BYTES` or one viewgrid. Compressed
    chunks still decode to at most ~1000x their stored size, so the work of a full read stays
    bounded by the file's size.
    """
    where = f"{path}: split {name!r}"
    declared = math.prod(ds.shape) * ds.dtype.itemsize
    shape = "x".join(str(s) for s in ds.shape)
    dcpl = ds.id.get_create_plist()
    layout = dcpl.get_layout()
    if layout == h5py.h5d.VIRTUAL or dcpl.get_external_count() > 0:
        raise ViewgridFileError(
            f"{where} keeps its data outside the file (a virtual or external dataset); copy it "
            "into the file"
        )
    if layout == h5py.h5d.CONTIGUOUS:
        stored = ds.id.get_storage_size()
        offset = ds.id.get_offset()
        size = _holding_file_size(ds)
        end = None if offset is None else offset + stored
        if size is not None and end is not None and end > size:
            stored = max(size - offset, 0)
        if stored != declared or (declared and offset is None):
            raise ViewgridFileError(
                f"{where} declares {shape} {ds.dtype} ({_size(declared)}) but the file holds "
                f"{_size(stored)} of it; the file is truncated or the split was never written"
            )
    elif layout == h5py.h5d.CHUNKED:
        chunks = ds.chunks or ds.shape
        chunk_bytes = math.prod(chunks) * ds.dtype.itemsize
        limit = max(_MAX_CHUNK_BYTES, math.prod(ds.shape[1:]) * ds.dtype.itemsize)
        if chunk_bytes > limit:
            raise ViewgridFileError(
                f"{where} is stored in chunks of {'x'.join(str(c) for c in chunks)} "
                f"{ds.dtype} ({_size(chunk_bytes)}), more than the {_size(limit)} allowed (HDF5 "
                "decompresses a whole chunk for every read); rewrite it with chunks of one "
                "viewgrid"
            )
        wanted = math.prod(-(-s // c) for s, c in zip(ds.shape, chunks, strict=True))
        stored = ds.id.get_num_chunks()
        if stored < wanted:
            raise ViewgridFileError(
                f"{where} declares {shape} {ds.dtype} ({_size(declared)}) in {wanted} chunks "
                f"but the file stores {stored}; the file is truncated, the split was never "
                "fully written, or its shape is wrong"
            )


def _check_split(path: Path, f: h5py.File, name: str) -> h5py.Dataset:
    """Validate one split's dataset (shape, dtype, storage, values) without reading it whole."""
    where = f"{path}: split {name!r}"
    ds = _open_split(path, f, name)
    if ds.shape is None or ds.ndim != 6:
        raise ViewgridFileError(
            f"{where} has shape {ds.shape}, expected 6 dimensions [n, N, M, C, H, W]"
        )
    kind = ds.dtype.kind
    if kind not in "uif" or ds.dtype.itemsize > 8:
        raise ViewgridFileError(
            f"{where} has dtype {ds.dtype}, expected uint8 pixel intensities "
            "(or a float/integer array with values in [0, 255])"
        )
    if ds.shape[0] == 0:
        raise ViewgridFileError(f"{where} is empty; every split needs samples")
    if min(ds.shape[1:]) == 0:
        raise ViewgridFileError(f"{where} has viewgrids of shape {ds.shape[1:]} with no pixels")
    if ds.shape[4] != ds.shape[5]:
        raise ViewgridFileError(f"{where} has non-square views {ds.shape[4:]}")
    _check_storage(path, name, ds)
    return ds


def _read_attrs(path: Path, f: h5py.File) -> dict[str, Any]:
    """Root attributes as plain Python values."""
    attrs: dict[str, Any] = {}
    for key in f.attrs:
        try:
            attrs[key] = _attr_value(f.attrs[key])
        except (OSError, KeyError, RuntimeError, TypeError, ValueError) as exc:
            raise ViewgridFileError(
                f"{path}: root attribute {key!r} cannot be read ({_brief(exc)})"
            ) from None
    return attrs


def _validate(path: Path, f: h5py.File) -> tuple[GridSpec, tuple[str, ...], dict[str, Any]]:
    """Validate an open file; returns its spec, splits and root attributes.

    An h5py/OS error outside a split (the root group's links or attributes damaged) is left to
    the caller, which names the file.
    """
    missing = [s for s in REQUIRED_SPLITS if s not in f]
    if missing:
        raise ViewgridFileError(
            f"{path}: missing split(s) {', '.join(missing)}; a viewgrid file needs datasets "
            f"{', '.join(REQUIRED_SPLITS)} (and optionally {', '.join(OPTIONAL_SPLITS)})"
        )
    splits = tuple(s for s in SPLITS if s in f)
    shape: tuple[int, ...] | None = None
    for name in splits:
        try:
            ds = _check_split(path, f, name)
            if shape is None:
                shape = ds.shape[1:]
            elif ds.shape[1:] != shape:
                raise ViewgridFileError(
                    f"{path}: split {name!r} has viewgrids of shape {ds.shape[1:]} but "
                    f"{splits[0]!r} has {shape}; all splits need the same [N, M, C, H, W]"
                )
            if ds.dtype != np.uint8:
                _check_values(path, name, ds)
        except ViewgridFileError:
            raise
        except _H5_ERRORS as exc:
            raise ViewgridFileError(
                f"{path}: split {name!r} cannot be read ({_brief(exc)}); the file is damaged"
            ) from exc
    assert shape is not None
    attrs = _read_attrs(path, f)
    return _spec_from_attrs(path, attrs, shape), splits, attrs


@contextmanager
def _reading(path: Path, split: str) -> Iterator[None]:
    """Turn an h5py/OS error of a read (a damaged chunk found mid-epoch) into one line."""
    try:
        yield
    except ViewgridFileError:
        raise
    except MemoryError as exc:
        raise ViewgridFileError(
            f"{path}: split {split!r}: out of memory reading it ({_brief(exc)}); set "
            f"{READ_LIMIT_ENV} to the memory this machine can spare"
        ) from exc
    except (OSError, KeyError, RuntimeError) as exc:
        raise ViewgridFileError(
            f"{path}: split {split!r} cannot be read ({_brief(exc)}); the file is damaged"
        ) from exc


class ViewgridFile:
    """A validated, read-only viewgrid HDF5 file.

    The h5py handle is opened lazily in each process (keyed on the process id), so the object can
    be pickled into DataLoader workers and used after a fork. Every problem with the file, on
    open or on a later read, raises :class:`ViewgridFileError` (one line naming file and split).

    It is also a command's reference to its dataset: opened once, it carries the path, the
    spec and, on first use, the file's SHA-256 (:attr:`digest`), so that one command opens and
    hashes the file once whoever needs them (the run records, the one-view cache key).

    Attributes:
        path: the file.
        spec: its grid geometry (from attributes, or from the preset its shape matches).
        splits: the splits present, in the order train, val, test, test_unseen.
        attrs: its root attributes as plain Python values.
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise UserFileNotFoundError(f"no viewgrid file at {self.path}")
        try:
            f = h5py.File(self.path, "r")
        except OSError as exc:
            raise ViewgridFileError(
                f"{self.path}: not a readable HDF5 file ({_brief(exc)})"
            ) from None
        with f:
            try:
                self.spec, self.splits, self.attrs = _validate(self.path, f)
                self._lengths = {s: int(f[s].shape[0]) for s in self.splits}
                self._dtypes = {s: f[s].dtype for s in self.splits}
                self._chunk_rows = {s: (f[s].chunks or (1,))[0] for s in self.splits}
            except ViewgridFileError:
                raise
            except _H5_ERRORS as exc:
                raise ViewgridFileError(
                    f"{self.path}: cannot be read ({_brief(exc)}); the file is damaged"
                ) from exc
        self._handle: h5py.File | None = None
        self._pid: int | None = None

    @functools.cached_property
    def digest(self) -> str:
        """SHA-256 of the file's bytes (hex), computed on first use and kept."""
        return file_digest(self.path)

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={n}" for s, n in self._lengths.items())
        return f"ViewgridFile({str(self.path)!r}, preset={self.spec.preset!r}, {sizes})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_handle"], state["_pid"] = None, None
        return state

    def dataset(self, split: str) -> h5py.Dataset:
        """The h5py dataset of a split, opening this process's handle if needed."""
        self._check_split(split)
        with _reading(self.path, split):
            if self._handle is None or self._pid != os.getpid():
                self._handle = h5py.File(self.path, "r")
                self._pid = os.getpid()
            return self._handle[split]

    def close(self) -> None:
        """Close this process's handle (it reopens on the next read)."""
        if self._handle is not None and self._pid == os.getpid():
            self._handle.close()
        self._handle, self._pid = None, None

    def num_samples(self, split: str) -> int:
        """Number of viewgrids in a split."""
        self._check_split(split)
        return self._lengths[split]

    def sample_names(self, split: str) -> list[str] | None:
        """Per-sample names of a split (e.g. source files), when the file records them."""
        self._check_split(split)
        key = f"{NAMES_GROUP}/{split}"
        handle = self.dataset(split).file
        with _reading(self.path, key):
            return [_attr_value(v) for v in handle[key][()]] if key in handle else None

    def split(self, name: str) -> ViewgridSplit:
        """A map-style torch Dataset over one split."""
        self._check_split(name)
        return ViewgridSplit(self, name)

    def check_read(self, split: str, count: int, *, gathered: int = 0) -> None:
        """Refuse to read ``count`` viewgrids of a split when they need more than
        :func:`read_limit` bytes at once: the raw data with its uint8 conversion (none for uint8
        data), then the uint8 data with the ``gathered`` viewgrids of a copy that reorders or
        repeats them (the raw data is freed by then).

        Raises:
            ViewgridFileError: naming the file, the split, the bytes needed and the limit.
        """
        self._check_split(split)
        dtype = self._dtypes[split]
        converted = count * (dtype.itemsize + (0 if dtype == np.uint8 else 1))
        gathering = count + gathered if gathered else 0
        needed = max(converted, gathering) * math.prod(self.spec.view_shape)
        count = max(count, gathered)  # the viewgrids asked for, as the message says
        limit = read_limit()
        if needed > limit:
            raise ViewgridFileError(
                f"{self.path}: split {split!r}: reading {count} viewgrids needs "
                f"{_size(needed)}, more than the {_size(limit)} of memory available (set "
                f"{READ_LIMIT_ENV} to change the limit)"
            )

    def _check_split(self, name: str) -> None:
        if name not in self.splits:
            raise UserError(f"{self.path}: no split {name!r}; available: {', '.join(self.splits)}")


def _to_uint8(block: np.ndarray) -> np.ndarray:
    """Validated pixel data of any numeric dtype -> uint8 (floats rounded to nearest).

    A float block (freshly read, owned here) is rounded in place: the only new array is the
    uint8 one, as :meth:`ViewgridFile.check_read` counts.
    """
    if block.dtype == np.uint8:
        return block
    if np.issubdtype(block.dtype, np.floating):
        np.rint(block, out=block)
    return block.astype(np.uint8)


class ViewgridSplit(torch.utils.data.Dataset[torch.Tensor]):
    """One split of a :class:`ViewgridFile`; items are uint8 ``[N, M, C, H, W]`` tensors.

    Reads are refused when they would need more than :func:`read_limit` bytes; a read that fails
    (a damaged chunk) raises :class:`ViewgridFileError` naming the file and the split.
    """

    def __init__(self, file: ViewgridFile, name: str) -> None:
        self.file = file
        self.name = name
        self.spec = file.spec

    def __len__(self) -> int:
        return self.file.num_samples(self.name)

    def __getitem__(self, index: int) -> torch.Tensor:
        n = len(self)
        if not -n <= index < n:
            raise IndexError(f"index {index} out of range for split {self.name!r} of size {n}")
        itemsize = self.file._dtypes[self.name].itemsize
        if math.prod(self.spec.view_shape) * itemsize > _SCAN_BYTES:  # only a huge one is checked
            self.file.check_read(self.name, 1)
        ds = self.file.dataset(self.name)
        with _reading(self.file.path, self.name):
            return torch.from_numpy(_to_uint8(ds[index % n]))

    def load(self, indices: Sequence[int] | None = None) -> torch.Tensor:
        """Read many viewgrids at once.

        Args:
            indices: sample indices in any order (repeats allowed); ``None`` reads the split.

        Returns:
            uint8 ``[n, N, M, C, H, W]``, in the order of ``indices``.

        Raises:
            ViewgridFileError: the read needs more memory than :func:`read_limit`, or the file
                is damaged.
        """
        n = len(self)
        if indices is None:
            self.file.check_read(self.name, n)
            ds = self.file.dataset(self.name)
            with _reading(self.file.path, self.name):
                return torch.from_numpy(_to_uint8(ds[()]))
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"indices out of range for split {self.name!r} of size {n}")
        idx %= max(n, 1)
        if idx.size == 0:
            return torch.empty((0, *self.spec.view_shape), dtype=torch.uint8)
        # h5py needs increasing unique indices; the result is put back in the order asked for.
        unique, inverse = np.unique(idx, return_inverse=True)
        gather = unique.size != idx.size or not np.array_equal(unique, idx)
        self.file.check_read(self.name, int(unique.size), gathered=int(idx.size) if gather else 0)
        ds = self.file.dataset(self.name)
        with _reading(self.file.path, self.name):
            block = _to_uint8(ds[unique])
        return torch.from_numpy(block[inverse] if gather else block)

    def blocks(self, max_bytes: int = _SCAN_BYTES) -> Iterator[torch.Tensor]:
        """The split in order, as uint8 ``[k, N, M, C, H, W]`` blocks of about ``max_bytes``.

        Each block is one slice read (no per-sample selection) of whole rows of chunks when a
        chunk holds several samples, so each chunk is decompressed once.
        """
        n = len(self)
        per_sample = max(1, math.prod(self.spec.view_shape))
        step = max(1, max_bytes // per_sample)
        rows = self.file._chunk_rows[self.name]
        if step >= rows:
            step -= step % rows
        for start in range(0, n, step):
            stop = min(start + step, n)
            self.file.check_read(self.name, stop - start)
            ds = self.file.dataset(self.name)
            with _reading(self.file.path, self.name):
                block = _to_uint8(ds[start:stop])
            yield torch.from_numpy(block)
