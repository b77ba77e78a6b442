"""Built-in datasets: the procedural generators shipped with pyskick."""

from __future__ import annotations

from pathlib import Path

from pyskick.hookspecs import Register, hookimpl


def synthetic_scenes(data_dir: Path | None = None) -> Path:
    """Procedural 360° outdoor/indoor scenes, 4x8 RGB views (the embedded default)."""
    from pyskick.data import resolve_dataset

    return resolve_dataset("synthetic-scenes", data_dir=data_dir)


@hookimpl
def pyskick_register_datasets(register: Register) -> None:
    register("synthetic-scenes", synthetic_scenes)
