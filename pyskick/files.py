"""Where pyskick keeps its caches, what identifies a file, and who may fill a cache entry.

A bottom-layer module (of pyskick, it imports only :mod:`pyskick.errors`): the dataset
generators, the one-view model cache, the sidekick score cache and the run folders share these
helpers.

- :func:`cache_root`: ``$PYSKICK_CACHE_DIR`` or ``~/.cache/pyskick`` (one-view models, scores);
- :func:`data_dir`: ``$PYSKICK_DATA_DIR`` or ``~/.cache/pyskick/datasets`` (generated datasets);
- :func:`file_digest`: SHA-256 of a file's bytes (cache keys, dataset records);
- :func:`file_lock`: an exclusive ``flock``, so that concurrent processes fill an entry once.
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pyskick.errors import UserError

_LOG = logging.getLogger(__name__)


def cache_root() -> Path:
    """``$PYSKICK_CACHE_DIR`` or ``~/.cache/pyskick``.

    Raises:
        UserError: the variable names something that is not a folder.
    """
    return _folder_of("PYSKICK_CACHE_DIR", Path.home() / ".cache" / "pyskick")


def data_dir() -> Path:
    """Cache of generated datasets: ``$PYSKICK_DATA_DIR`` or ``~/.cache/pyskick/datasets``.

    Raises:
        UserError: the variable names something that is not a folder.
    """
    return _folder_of("PYSKICK_DATA_DIR", Path.home() / ".cache" / "pyskick" / "datasets")


def _folder_of(variable: str, default: Path) -> Path:
    """The folder an environment variable names (created later, where needed), else
    ``default``; one that exists as something else is the user's error, named."""
    env = os.environ.get(variable)
    if not env:
        return default
    path = Path(env)
    # The folder, or the first of its parents that exists, must be a folder (one under a
    # file can never be made).
    existing = next((p for p in (path, *path.parents) if p.exists()), None)
    if existing is not None and not existing.is_dir():
        raise UserError(f"{variable}={env!r} is not a folder; point it at one (or unset it)")
    return path


def file_digest(path: str | os.PathLike[str]) -> str:
    """SHA-256 of a file's bytes, read in 1 MiB blocks (hex)."""
    digest = hashlib.sha256()
    with Path(path).open("rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


@contextmanager
def file_lock(path: str | os.PathLike[str], waiting: str) -> Iterator[None]:
    """Hold an exclusive ``flock`` on ``path`` (created) for a ``with`` block.

    The kernel drops the lock when the process ends, however it ends, so a killed holder
    never blocks the next one.

    Args:
        path: the lock file; its folder must exist.
        waiting: logged (INFO, logger ``pyskick.files``) when another process holds the lock
            and this one waits for it.
    """
    with Path(path).open("w") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            _LOG.info(waiting)
            fcntl.flock(handle, fcntl.LOCK_EX)
        yield
