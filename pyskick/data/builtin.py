"""Built-in dataset generators, by name, and their cache of generated files.

``BUILTIN_DATASETS[name] = (generate(path, num, seed), default_num, default_seed)``. A generator
may carry a ``generator_version`` attribute; it is part of the cache file name so that a changed
generator never reuses a stale cache. The built-in plugin (:mod:`pyskick.builtins.datasets`)
registers each of them by name, so they resolve like any plugin's dataset
(:func:`pyskick.data.resolve_dataset`).

Generating a default-size dataset on first use takes a while (synthetic-scenes: about 90 MB,
tens of seconds), so :func:`builtin_dataset` says so before it starts, as one INFO record of
the ``pyskick.data.builtin`` logger (shown by the CLI; a program sees it once it configures
:mod:`logging`, e.g. ``logging.basicConfig(level=logging.INFO)``: library code never writes to
stderr itself), and reports the work as the progress stage ``make NAME``.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pyskick import progress
from pyskick.data import synthetic_objects, synthetic_scenes
from pyskick.data.hdf5_read import ViewgridFile
from pyskick.errors import UserError
from pyskick.files import data_dir as default_data_dir

_LOG = logging.getLogger(__name__)

Generator = Callable[..., Any]
"""``generate(path, num, seed, **options)``; synthetic-scenes also takes ``view_size``."""

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


def builtin_of_cache_file(path: str | os.PathLike[str]) -> str | None:
    """The built-in dataset whose file at its default size and seed has ``path``'s file name
    (:func:`builtin_dataset`'s, in whatever data folder), or None: a run trained on the
    default dataset finds it again by name where its recorded file is gone (another cache
    folder, another machine)."""
    for name, (generate, num, seed) in BUILTIN_DATASETS.items():
        if Path(path).name == cache_file_name(name, generate, num, seed):
            return name
    return None


def check_builtin_name(name: str) -> None:
    """Raise ValueError (listing the valid names) unless ``name`` is a built-in dataset."""
    if name not in BUILTIN_DATASETS:
        raise UserError(
            f"unknown dataset {name!r}; built-in datasets: {', '.join(sorted(BUILTIN_DATASETS))}"
        )


def make_builtin(
    name: str,
    path: str | Path,
    num: int | None = None,
    seed: int | None = None,
    view_size: int | None = None,
) -> Path:
    """Generate built-in dataset ``name`` into ``path`` (defaults: its registered size and seed).

    ``view_size`` (synthetic-scenes only; default 32) is the side of every view in pixels.
    Reported as the progress stage ``make NAME`` (the generator's own stages inside it).

    Raises:
        ValueError: an unknown ``name``, or a ``view_size`` for another dataset than
            synthetic-scenes or one the policies cannot take.
        TypeError: a ``view_size`` that is not an int.
    """
    check_builtin_name(name)
    generate, default_num, default_seed = BUILTIN_DATASETS[name]
    num = default_num if num is None else num
    sized: dict[str, int] = {}
    if view_size is not None:
        if name != "synthetic-scenes":
            raise UserError(f"only synthetic-scenes takes a view size, not {name}")
        synthetic_scenes.check_view_size(view_size)
        sized["view_size"] = view_size
    with progress.stage(f"make {name}", total=num, unit="grid") as making:
        generate(Path(path), num, default_seed if seed is None else seed, **sized)
        making.advance(num)
    return Path(path)


def builtin_dataset(name: str, data_dir: Path | None = None) -> Path:
    """The file of built-in dataset ``name`` at its default size and seed, generated once.

    The file is cached under ``data_dir`` (default :func:`pyskick.files.data_dir`:
    ``$PYSKICK_DATA_DIR`` or ``~/.cache/pyskick/datasets``); its name holds the generator
    version, size and seed (:func:`cache_file_name`), so a changed generator never reuses a
    stale file. A damaged cache file is generated again. Generating logs one INFO line first
    (what, how many viewgrids, where) and runs as the progress stage ``make NAME``
    (:func:`make_builtin`).

    Raises:
        ValueError: ``name`` is not a built-in dataset (the message lists them).
    """
    check_builtin_name(name)
    generate, num, seed = BUILTIN_DATASETS[name]
    path = (data_dir or default_data_dir()) / cache_file_name(name, generate, num, seed)
    again = ""
    if path.is_file():
        try:
            ViewgridFile(path)
            return path
        except ValueError as exc:
            again = f" again (the cached file is damaged: {exc})"
    path.parent.mkdir(parents=True, exist_ok=True)
    # INFO where logging is set up (the CLI shows INFO). Where nobody listens (plain Python,
    # `gymnasium.make`), a first use that writes tens of MB for tens of seconds must still be
    # seen: WARNING reaches Python's last-resort handler (stderr) without any set-up.
    level = logging.INFO if _LOG.hasHandlers() else logging.WARNING
    _LOG.log(
        level,
        "generating dataset %s (%d viewgrids) into %s%s; once, then cached",
        name,
        num,
        path,
        again,
    )
    make_builtin(name, path, num, seed)
    ViewgridFile(path)
    return path
