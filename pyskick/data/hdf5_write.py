"""Writing viewgrid HDF5 files (the format: :mod:`pyskick.data.hdf5_format`), atomically."""

from __future__ import annotations

import io
import math
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import h5py
import numpy as np
import torch

from pyskick._io import atomic_path
from pyskick.data.hdf5_format import (
    NAMES_GROUP,
    REQUIRED_SPLITS,
    SCHEMA_VERSION,
    SPLITS,
    ViewgridFileError,
)
from pyskick.data.hdf5_read import ViewgridFile
from pyskick.data.spec import GridSpec
from pyskick.memory import check_memory


def _check_attr(key: str, value: Any) -> None:
    """Refuse an attribute HDF5 cannot store as given: a non-finite number, or an integer that
    does not fit in 64 bits (h5py fails only once the file is being written)."""
    for item in value if isinstance(value, list | tuple) else (value,):
        if isinstance(item, float) and not math.isfinite(item):
            raise ValueError(f"attribute {key!r} is not finite: {value}")
        if isinstance(item, int) and not -(2**63) <= item < 2**63:
            raise ValueError(f"attribute {key!r} = {item} does not fit in a 64-bit integer")


def write_viewgrids(
    path: str | os.PathLike[str],
    splits: Mapping[str, np.ndarray | torch.Tensor],
    spec: GridSpec,
    *,
    source: str,
    classes: Sequence[str] | None = None,
    extra_attrs: Mapping[str, Any] | None = None,
    sample_names: Mapping[str, Sequence[str]] | None = None,
    sample_data: Mapping[str, Mapping[str, np.ndarray]] | None = None,
    compression: str | None = "gzip",
) -> Path:
    """Write viewgrid splits and their attributes, atomically.

    Args:
        path: destination ``.h5`` file; replaced only once the new file is complete. Temporary
            files of writers killed before they finished are removed first.
        splits: split name -> uint8 ``[n, N, M, C, H, W]``; train, val and test required.
        spec: the grid geometry; its shape must match the arrays.
        source: where the data comes from (generator name and options, or input folder).
        classes: optional class names (object datasets).
        extra_attrs: more root attributes (numbers, strings or lists of them).
        sample_names: optional split -> one name per sample (e.g. source file), stored as
            string datasets ``sample_names/<split>``.
        sample_data: optional group -> split -> numeric array ``[n, ...]`` with one row per
            sample of the split, stored as datasets ``<group>/<split>`` (e.g. the source index of
            each augmented viewgrid).
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
        _check_attr(key, value)
    for name, names in (sample_names or {}).items():
        if name not in arrays or len(names) != arrays[name].shape[0]:
            raise ValueError(
                f"sample_names[{name!r}] must name each of the split's samples, got {len(names)}"
            )
    for group, per_split in (sample_data or {}).items():
        if group in SPLITS or group == NAMES_GROUP:
            raise ValueError(f"sample_data group {group!r} would overwrite a split or the names")
        for name, values in per_split.items():
            if name not in arrays or len(values) != arrays[name].shape[0]:
                raise ValueError(
                    f"sample_data[{group!r}][{name!r}] must have one row per sample of the split"
                )
    # Assembled in memory and written to disk with plain file I/O: HDF5 never sees a failed
    # write, after which its library crashed the process at exit (a full disk: exit 139). The
    # image (compressed: at most the arrays' size) must fit beside the arrays.
    check_memory(
        sum(array.nbytes for array in arrays.values()),
        f"writing {path}",
        "write fewer viewgrids per file",
    )
    image = io.BytesIO()
    with h5py.File(image, "w") as f:
        for name, array in arrays.items():
            f.create_dataset(
                name, data=array, chunks=(1, *array.shape[1:]), compression=compression
            )
        for name, names in (sample_names or {}).items():
            f.create_dataset(f"{NAMES_GROUP}/{name}", data=list(names), dtype=h5py.string_dtype())
        for group, per_split in (sample_data or {}).items():
            for name, values in per_split.items():
                f.create_dataset(f"{group}/{name}", data=np.asarray(values))
        for key, value in attrs.items():
            if isinstance(value, list | tuple) and all(isinstance(v, str) for v in value):
                f.attrs.create(key, list(value), dtype=h5py.string_dtype())
            else:
                f.attrs[key] = value
    # Published without replacing a file another writer made meanwhile (declare_outputs).
    with atomic_path(path) as tmp:
        with tmp.open("wb") as handle:
            handle.write(image.getbuffer())
        del image
        try:
            ViewgridFile(tmp)  # what we hand out must open
        except ViewgridFileError as exc:
            raise ViewgridFileError(str(exc).replace(str(tmp), str(path))) from None
    return path
