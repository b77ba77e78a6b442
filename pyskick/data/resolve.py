"""The one way from a ``--dataset`` value to a viewgrid file: a registered name or a path.

The command line (every ``--dataset`` option and ``pyskick data info/preview``), the Gymnasium
environment (``gymnasium.make("pyskick/LookAround-v0", dataset=...)``) and library callers all
resolve datasets here, through the plugin registry, so a dataset a plugin registers works
wherever a built-in one does.
"""

from __future__ import annotations

import os
from pathlib import Path

from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.plugins import lookup
from pyskick.registry import UnknownNameError

DATASET_SUFFIXES = (".h5", ".hdf5")


def _is_path(value: str) -> bool:
    """Whether ``value`` names a file rather than a registered dataset: it has an HDF5 suffix
    or a folder separator, or a file of that name exists."""
    separators = {os.sep, os.altsep or os.sep, "/"}
    return (
        Path(value).suffix in DATASET_SUFFIXES
        or any(sep in value for sep in separators)
        or Path(value).expanduser().exists()
    )


def resolve_dataset(name_or_path: str | os.PathLike[str]) -> Path:
    """The viewgrid file behind a registered dataset name or a path.

    A path (an ``.h5``/``.hdf5`` name, a name with a folder separator, or an existing file) is
    returned as it is once it names a file. Anything else is looked up in the ``dataset``
    registry (built-ins and plugins, :func:`pyskick.plugins.lookup`) and its factory is called
    with no arguments: it builds or locates the file (a built-in generates its file once into
    the cache). The file's contents are checked by whoever opens it
    (:class:`~pyskick.data.ViewgridFile`).

    Raises:
        FileNotFoundError: a path that names no file.
        UnknownNameError: (a ValueError) a name no plugin registered; lists the valid ones.
        ValueError: a folder, or a factory that gave no existing file (names its plugin).
    """
    value = os.fspath(name_or_path)
    if not value.strip():
        raise UserError("the dataset is empty: give a viewgrid .h5 file or a registered name")
    if isinstance(name_or_path, os.PathLike) or _is_path(value):
        path = Path(value).expanduser()
        if path.is_dir():
            raise UserError(f"dataset {path} is a folder, not a viewgrid file")
        if path.exists() and not path.is_file():  # a FIFO, a socket, a device
            raise UserError(f"dataset {path} is not a regular file")
        if not path.is_file():
            raise UserFileNotFoundError(f"dataset file {path} does not exist")
        return path
    try:
        entry = lookup("dataset", value)
    except UnknownNameError as exc:
        raise UnknownNameError(f"{exc}; or give the path of a viewgrid .h5 file") from None
    made = entry.factory()
    found = Path(made) if isinstance(made, str | os.PathLike) else None
    if found is None or not found.is_file():
        raise ValueError(
            f"dataset {entry.name!r} (plugin {entry.plugin}) gave {made!r}, not an existing file"
        )
    return found
