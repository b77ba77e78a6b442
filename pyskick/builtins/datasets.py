"""Built-in datasets: the procedural generators shipped with pyskick.

Each factory returns the path of the dataset's HDF5 file, generating it once into the cache
(``$PYSKICK_DATA_DIR`` or ``~/.cache/pyskick/datasets``) on first use.
"""

from __future__ import annotations

from pathlib import Path

from pyskick.hookspecs import Register, hookimpl


def synthetic_scenes(data_dir: Path | None = None) -> Path:
    """Procedural 360° outdoor/indoor scenes, 4x8 RGB views (the embedded default)."""
    from pyskick.data.builtin import builtin_dataset

    return builtin_dataset("synthetic-scenes", data_dir)


def synthetic_objects(data_dir: Path | None = None) -> Path:
    """Procedural CAD-like objects in 10 families, 5x9 grayscale views, 2 families unseen."""
    from pyskick.data.builtin import builtin_dataset

    return builtin_dataset("synthetic-objects", data_dir)


@hookimpl
def pyskick_register_datasets(register: Register) -> None:
    register("synthetic-scenes", synthetic_scenes)
    register("synthetic-objects", synthetic_objects)
