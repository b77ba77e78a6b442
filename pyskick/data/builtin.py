"""Built-in dataset generators, by name.

``BUILTIN_DATASETS[name] = (generate(path, num, seed), default_num, default_seed)``. A generator
may carry a ``generator_version`` attribute; it is part of the cache file name so that a changed
generator never reuses a stale cache.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyskick import progress
from pyskick.data import synthetic_objects, synthetic_scenes
from pyskick.errors import UserError

Generator = Callable[[Path, int, int], Any]

BUILTIN_DATASETS: dict[str, tuple[Generator, int, int]] = {
    "synthetic-scenes": (
        synthetic_scenes.generate_synthetic_scenes,
        synthetic_scenes.DEFAULT_NUM,
        synthetic_scenes.DEFAULT_SEED,
    ),
    "synthetic-objects": (
        synthetic_objects.make_synthetic_objects,
        synthetic_objects.DEFAULT_NUM,
        synthetic_objects.DEFAULT_SEED,
    ),
}


def cache_file_name(name: str, generate: Generator, num: int, seed: int) -> str:
    """File name of a generated dataset: name, generator version, size and seed."""
    version = getattr(generate, "generator_version", "0")
    return f"{name}-v{version}-n{num}-s{seed}.h5"


def check_builtin_name(name: str) -> None:
    """Raise ValueError (listing the valid names) unless ``name`` is a built-in dataset."""
    if name not in BUILTIN_DATASETS:
        raise UserError(
            f"unknown dataset {name!r}; built-in datasets: {', '.join(sorted(BUILTIN_DATASETS))}"
        )


def make_builtin(
    name: str, path: str | Path, num: int | None = None, seed: int | None = None
) -> Path:
    """Generate built-in dataset ``name`` into ``path`` (defaults: its registered size and seed).

    Reported as the progress stage ``make NAME`` (the generator's own stages inside it).
    """
    check_builtin_name(name)
    generate, default_num, default_seed = BUILTIN_DATASETS[name]
    num = default_num if num is None else num
    with progress.stage(f"make {name}", total=num, unit="grid") as making:
        generate(Path(path), num, default_seed if seed is None else seed)
        making.advance(num)
    return Path(path)
