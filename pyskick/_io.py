"""Atomic file writes: every file pyskick produces appears whole or not at all.

A writer fills a temporary file in the destination's folder, which is then renamed over the
destination; an interrupted or failing writer leaves the old file (or none) and no temporary.
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any


def _default_mode() -> int:
    """The mode a plain ``open()`` would give a new file (0666 minus the umask)."""
    umask = os.umask(0)
    os.umask(umask)
    return 0o666 & ~umask


@contextmanager
def atomic_path(path: str | os.PathLike[str], *, fsync: bool = False) -> Iterator[Path]:
    """Yield a temporary path to write; on success it replaces ``path``.

    The folder is created; the file gets the usual permissions (``mkstemp`` alone would make
    it private). ``fsync`` flushes the data to disk before the rename (checkpoints).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(name)
    try:
        yield tmp
        tmp.chmod(_default_mode())
        if fsync:
            with tmp.open("rb+") as handle:
                os.fsync(handle.fileno())
        tmp.replace(path)
    finally:
        tmp.unlink(missing_ok=True)


def write_text(path: str | os.PathLike[str], text: str) -> Path:
    """Write ``text`` to ``path`` atomically."""
    with atomic_path(path) as tmp:
        tmp.write_text(text)
    return Path(path)


def write_json(path: str | os.PathLike[str], payload: Any) -> Path:
    """Write ``payload`` as indented JSON (with a final newline) atomically."""
    return write_text(path, json.dumps(payload, indent=2) + "\n")
