"""The viewgrid HDF5 format: the authors' layout, its attributes and its error.

A file holds one dataset per split (``train``, ``val``, ``test`` required, ``test_unseen``
optional), each ``[n, N, M, C, H, W]``, and root attributes describing the grid (see
docs/data-formats.md). Files without attributes, like the authors' SUN360 and ModelNet Hard files,
are recognised by their shape (:data:`SHAPE_PRESETS`). :mod:`pyskick.data.hdf5_read` reads and
validates such files, :mod:`pyskick.data.hdf5_write` writes them.
"""

from __future__ import annotations

from pyskick.errors import UserError

# The ``schema_version`` root attribute pyskick writes.
SCHEMA_VERSION = 1
# Split datasets, each ``[n, N, M, C, H, W]``: train, val and test in every file.
REQUIRED_SPLITS = ("train", "val", "test")
OPTIONAL_SPLITS = ("test_unseen",)
SPLITS = REQUIRED_SPLITS + OPTIONAL_SPLITS
# Root attributes describing the grid (a GridSpec); all or none of them.
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


class ViewgridFileError(UserError):
    """A viewgrid file that cannot be used: not HDF5, damaged, malformed or too large to read.

    The message is one line naming the file (and the split, when one is at fault). It is a
    :class:`~pyskick.errors.UserError`, so the CLI reports it as bad input (exit 2).
    """
