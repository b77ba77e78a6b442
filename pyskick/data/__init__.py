"""Viewgrid datasets: geometry presets, HDF5 files, projection, generators, converters, and
resolving a dataset name or path (:func:`resolve_dataset`)."""

from __future__ import annotations

from pyskick.data.builtin import BUILTIN_DATASETS
from pyskick.data.hdf5_format import ViewgridFileError
from pyskick.data.hdf5_read import ViewgridFile, ViewgridSplit
from pyskick.data.hdf5_write import write_viewgrids
from pyskick.data.resolve import resolve_dataset
from pyskick.data.spec import MODELNET_HARD, SUN360, GridSpec

__all__ = [
    "BUILTIN_DATASETS",
    "MODELNET_HARD",
    "SUN360",
    "GridSpec",
    "ViewgridFile",
    "ViewgridFileError",
    "ViewgridSplit",
    "resolve_dataset",
    "write_viewgrids",
]
