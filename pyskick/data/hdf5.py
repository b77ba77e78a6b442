"""Viewgrid datasets in HDF5: the authors' layout, read lazily and validated on open.

A file holds one dataset per split (``train``, ``val``, ``test`` required, ``test_unseen``
optional), each ``[n, N, M, C, H, W]``, and root attributes describing the grid (see
docs/data-formats.md). Files without attributes, like the authors' SUN360 and ModelNet Hard files,
are recognised by their shape.
"""

from __future__ import annotations

import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from pyskick.data.spec import PRESET_SPECS, GridSpec

SCHEMA_VERSION = 1
REQUIRED_SPLITS = ("train", "val", "test")
OPTIONAL_SPLITS = ("test_unseen",)
SPLITS = REQUIRED_SPLITS + OPTIONAL_SPLITS
SPEC_ATTRS = (
    "n_elevations",
    "n_azimuths",
    "fov_deg",
    "elevations_deg",
    "azimuths_deg",
    "channel_mean",
)
# Recognised attribute-less layouts: (N, M, C) -> preset.
SHAPE_PRESETS = {(4, 8, 3): "sun360", (5, 9, 1): "modelnet-hard"}
# Optional group of per-sample names (source files), one string dataset per split.
NAMES_GROUP = "sample_names"
# Float files are scanned this many samples at a time when checked on open.
_SCAN_CHUNK = 256


def _attr_value(value: Any) -> Any:
    """HDF5 attribute -> plain Python value."""
    if isinstance(value, bytes):
        return value.decode("utf-8")
    if isinstance(value, np.ndarray):
        return [_attr_value(v) for v in value.tolist()]
    if isinstance(value, np.generic):
        return value.item()
    return value


def _spec_from_attrs(path: Path, attrs: Mapping[str, Any], shape: tuple[int, ...]) -> GridSpec:
    """The GridSpec of a file from its attributes, or from its shape when it has none."""
    n, m, c, h, _ = shape
    present = [a for a in SPEC_ATTRS if a in attrs]
    if not present:
        preset = SHAPE_PRESETS.get((n, m, c))
        if preset is None:
            raise ValueError(
                f"{path}: views of shape N={n}, M={m}, C={c} match no known preset (SUN360 is "
                "4x8x3, ModelNet Hard 5x9x1); add the root attributes "
                f"{', '.join(SPEC_ATTRS)} to describe the grid"
            )
        base = PRESET_SPECS[preset]
        return GridSpec(**{**base.__dict__, "view_size": h})
    missing = [a for a in SPEC_ATTRS if a not in attrs]
    if missing:
        raise ValueError(f"{path}: incomplete grid attributes, add {', '.join(missing)}")
    try:
        spec = GridSpec(
            n_elevations=int(attrs["n_elevations"]),
            n_azimuths=int(attrs["n_azimuths"]),
            channels=c,
            view_size=h,
            elevations_deg=tuple(float(e) for e in attrs["elevations_deg"]),
            azimuths_deg=tuple(float(a) for a in attrs["azimuths_deg"]),
            fov_deg=float(attrs["fov_deg"]),
            channel_mean=tuple(float(x) for x in attrs["channel_mean"]),
            preset=str(attrs.get("preset", "custom")),
        )
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: invalid grid attributes: {exc}") from None
    if (spec.n_elevations, spec.n_azimuths) != (n, m):
        raise ValueError(
            f"{path}: attributes say {spec.n_elevations}x{spec.n_azimuths} views but the splits "
            f"hold {n}x{m}; fix n_elevations/n_azimuths or the data"
        )
    return spec


def _check_values(path: Path, name: str, ds: h5py.Dataset) -> None:
    """Check that a non-uint8 split holds finite values in [0, 255] (one pass over the data)."""
    for start in range(0, ds.shape[0], _SCAN_CHUNK):
        block = ds[start : start + _SCAN_CHUNK]
        if np.issubdtype(block.dtype, np.floating) and not np.isfinite(block).all():
            bad = int(np.argwhere(~np.isfinite(block))[0][0]) + start
            raise ValueError(
                f"{path}: split {name!r} holds non-finite values (first in sample {bad}); "
                "remove or repair those samples"
            )
        lo, hi = block.min(), block.max()
        if lo < 0 or hi > 255:
            raise ValueError(
                f"{path}: split {name!r} holds values in [{lo}, {hi}], expected pixel "
                "intensities in [0, 255]; rescale the data to 0-255"
            )


def _validate(path: Path, f: h5py.File) -> tuple[GridSpec, tuple[str, ...], dict[str, Any]]:
    """Validate an open file; returns its spec, splits and root attributes."""
    missing = [s for s in REQUIRED_SPLITS if s not in f]
    if missing:
        raise ValueError(
            f"{path}: missing split(s) {', '.join(missing)}; a viewgrid file needs datasets "
            f"{', '.join(REQUIRED_SPLITS)} (and optionally {', '.join(OPTIONAL_SPLITS)})"
        )
    splits = tuple(s for s in SPLITS if s in f)
    shape: tuple[int, ...] | None = None
    for name in splits:
        ds = f[name]
        if not isinstance(ds, h5py.Dataset):
            raise ValueError(f"{path}: {name!r} must be a dataset, found a group")
        if ds.ndim != 6:
            raise ValueError(
                f"{path}: split {name!r} has shape {ds.shape}, expected 6 dimensions "
                "[n, N, M, C, H, W]"
            )
        kind = ds.dtype.kind
        if kind not in "uif":
            raise ValueError(
                f"{path}: split {name!r} has dtype {ds.dtype}, expected uint8 pixel intensities "
                "(or a float/integer array with values in [0, 255])"
            )
        if ds.shape[0] == 0:
            raise ValueError(f"{path}: split {name!r} is empty; every split needs samples")
        if ds.shape[4] != ds.shape[5]:
            raise ValueError(f"{path}: split {name!r} has non-square views {ds.shape[4:]}")
        if shape is None:
            shape = ds.shape[1:]
        elif ds.shape[1:] != shape:
            raise ValueError(
                f"{path}: split {name!r} has viewgrids of shape {ds.shape[1:]} but "
                f"{splits[0]!r} has {shape}; all splits need the same [N, M, C, H, W]"
            )
        if ds.dtype != np.uint8:
            _check_values(path, name, ds)
    assert shape is not None
    attrs = {k: _attr_value(v) for k, v in f.attrs.items()}
    return _spec_from_attrs(path, attrs, shape), splits, attrs


class ViewgridFile:
    """A validated, read-only viewgrid HDF5 file.

    The h5py handle is opened lazily in each process (keyed on the process id), so the object can
    be pickled into DataLoader workers and used after a fork.

    Attributes:
        path: the file.
        spec: its grid geometry (from attributes, or from the preset its shape matches).
        splits: the splits present, in the order train, val, test, test_unseen.
        attrs: its root attributes as plain Python values.
    """

    def __init__(self, path: str | os.PathLike) -> None:
        self.path = Path(path)
        if not self.path.is_file():
            raise FileNotFoundError(f"no viewgrid file at {self.path}")
        try:
            f = h5py.File(self.path, "r")
        except OSError as exc:
            raise ValueError(f"{self.path}: not a readable HDF5 file ({exc})") from None
        with f:
            self.spec, self.splits, self.attrs = _validate(self.path, f)
            self._lengths = {s: int(f[s].shape[0]) for s in self.splits}
        self._handle: h5py.File | None = None
        self._pid: int | None = None

    def __repr__(self) -> str:
        sizes = ", ".join(f"{s}={n}" for s, n in self._lengths.items())
        return f"ViewgridFile({str(self.path)!r}, preset={self.spec.preset!r}, {sizes})"

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_handle"], state["_pid"] = None, None
        return state

    def dataset(self, split: str) -> h5py.Dataset:
        """The h5py dataset of a split, opening this process's handle if needed."""
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
        return [_attr_value(v) for v in handle[key][()]] if key in handle else None

    def split(self, name: str) -> ViewgridSplit:
        """A map-style torch Dataset over one split."""
        self._check_split(name)
        return ViewgridSplit(self, name)

    def _check_split(self, name: str) -> None:
        if name not in self.splits:
            raise ValueError(f"{self.path}: no split {name!r}; available: {', '.join(self.splits)}")


def _to_uint8(block: np.ndarray) -> np.ndarray:
    """Validated pixel data of any numeric dtype -> uint8 (floats rounded to nearest)."""
    if block.dtype == np.uint8:
        return block
    if np.issubdtype(block.dtype, np.floating):
        block = np.rint(block)
    return block.astype(np.uint8)


class ViewgridSplit(torch.utils.data.Dataset):
    """One split of a :class:`ViewgridFile`; items are uint8 ``[N, M, C, H, W]`` tensors."""

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
        return torch.from_numpy(_to_uint8(self.file.dataset(self.name)[index % n]))

    def load(self, indices: Sequence[int] | None = None) -> torch.Tensor:
        """Read many viewgrids at once.

        Args:
            indices: sample indices in any order (repeats allowed); ``None`` reads the split.

        Returns:
            uint8 ``[n, N, M, C, H, W]``, in the order of ``indices``.
        """
        ds = self.file.dataset(self.name)
        if indices is None:
            return torch.from_numpy(_to_uint8(ds[()]))
        idx = np.asarray(indices, dtype=np.int64).reshape(-1)
        n = len(self)
        if idx.size and (idx.min() < -n or idx.max() >= n):
            raise IndexError(f"indices out of range for split {self.name!r} of size {n}")
        idx %= max(n, 1)
        if idx.size == 0:
            return torch.empty((0, *ds.shape[1:]), dtype=torch.uint8)
        # h5py needs increasing unique indices.
        unique, inverse = np.unique(idx, return_inverse=True)
        return torch.from_numpy(_to_uint8(ds[unique])[inverse])


def write_viewgrids(
    path: str | os.PathLike,
    splits: Mapping[str, np.ndarray | torch.Tensor],
    spec: GridSpec,
    *,
    source: str,
    classes: Sequence[str] | None = None,
    extra_attrs: Mapping[str, Any] | None = None,
    sample_names: Mapping[str, Sequence[str]] | None = None,
    compression: str | None = "gzip",
) -> Path:
    """Write viewgrid splits and their attributes, atomically.

    Args:
        path: destination ``.h5`` file; replaced only once the new file is complete.
        splits: split name -> uint8 ``[n, N, M, C, H, W]``; train, val and test required.
        spec: the grid geometry; its shape must match the arrays.
        source: where the data comes from (generator name and options, or input folder).
        classes: optional class names (object datasets).
        extra_attrs: more root attributes (numbers, strings or lists of them).
        sample_names: optional split -> one name per sample (e.g. source file), stored as
            string datasets ``sample_names/<split>``.
        compression: h5py compression filter of each split (chunks are one viewgrid).

    Returns:
        The written path.
    """
    path = Path(path)
    unknown = sorted(set(splits) - set(SPLITS))
    if unknown:
        raise ValueError(f"unknown split(s) {', '.join(unknown)}; allowed: {', '.join(SPLITS)}")
    missing = [s for s in REQUIRED_SPLITS if s not in splits]
    if missing:
        raise ValueError(f"missing split(s) {', '.join(missing)}; train, val and test are required")
    arrays: dict[str, np.ndarray] = {}
    for name in SPLITS:
        if name not in splits:
            continue
        value = splits[name]
        array = value.detach().cpu().numpy() if isinstance(value, torch.Tensor) else value
        if not isinstance(array, np.ndarray) or array.dtype != np.uint8:
            raise TypeError(
                f"split {name!r} must be a uint8 array or tensor, got "
                f"{getattr(array, 'dtype', type(array).__name__)}"
            )
        if array.ndim != 6 or array.shape[1:] != spec.view_shape:
            raise ValueError(
                f"split {name!r} has shape {array.shape}, expected [n, *{spec.view_shape}]"
            )
        if array.shape[0] == 0:
            raise ValueError(f"split {name!r} is empty")
        arrays[name] = np.ascontiguousarray(array)
    attrs: dict[str, Any] = {
        "schema_version": SCHEMA_VERSION,
        **spec.to_attrs(),
        "source": source,
        "classes": list(classes or []),
    }
    for key, value in (extra_attrs or {}).items():
        if key in attrs:
            raise ValueError(f"extra attribute {key!r} would overwrite a standard attribute")
        attrs[key] = value
    for key, value in attrs.items():
        if isinstance(value, float) and not math.isfinite(value):
            raise ValueError(f"attribute {key!r} is not finite: {value}")
    for name, names in (sample_names or {}).items():
        if name not in arrays or len(names) != arrays[name].shape[0]:
            raise ValueError(
                f"sample_names[{name!r}] must name each of the split's samples, got {len(names)}"
            )
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    try:
        with h5py.File(tmp, "w") as f:
            for name, array in arrays.items():
                f.create_dataset(
                    name, data=array, chunks=(1, *array.shape[1:]), compression=compression
                )
            for name, names in (sample_names or {}).items():
                f.create_dataset(
                    f"{NAMES_GROUP}/{name}", data=list(names), dtype=h5py.string_dtype()
                )
            for key, value in attrs.items():
                if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                    f.attrs.create(key, list(value), dtype=h5py.string_dtype())
                else:
                    f.attrs[key] = value
        ViewgridFile(tmp)  # what we hand out must open
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)
    return path


def default_data_dir() -> Path:
    """Cache of generated datasets: ``$PYSKICK_DATA_DIR`` or ``~/.cache/pyskick/datasets``."""
    env = os.environ.get("PYSKICK_DATA_DIR")
    return Path(env) if env else Path.home() / ".cache" / "pyskick" / "datasets"


def resolve_dataset(name_or_path: str | os.PathLike, *, data_dir: Path | None = None) -> Path:
    """Path of a viewgrid file from an ``.h5`` path or a built-in dataset name.

    A built-in dataset is generated once with its default size and seed and cached under
    ``data_dir`` (default: :func:`default_data_dir`); the cache file name holds the generator
    version, size and seed, so a changed generator never reuses a stale file.

    Raises:
        ValueError: unknown name (the message lists the valid ones) or invalid file.
    """
    from pyskick.data.builtin import BUILTIN_DATASETS, cache_file_name

    name = os.fspath(name_or_path)
    if name in BUILTIN_DATASETS:
        entry = BUILTIN_DATASETS[name]
        generate, num, seed = entry[0], entry[1], entry[2]
        path = (data_dir or default_data_dir()) / cache_file_name(name, generate, num, seed)
        if path.is_file():
            try:
                ViewgridFile(path)
                return path
            except ValueError:
                pass  # a damaged cache file is regenerated below
        path.parent.mkdir(parents=True, exist_ok=True)
        generate(path, num, seed)
        ViewgridFile(path)
        return path
    path = Path(name).expanduser()
    if path.is_file():
        ViewgridFile(path)
        return path
    valid = ", ".join(sorted(BUILTIN_DATASETS))
    if path.suffix in (".h5", ".hdf5") or os.sep in name:
        raise FileNotFoundError(f"no dataset file at {path} (built-in datasets: {valid})")
    raise ValueError(f"unknown dataset {name!r}; use one of {valid} or a path to an .h5 file")
