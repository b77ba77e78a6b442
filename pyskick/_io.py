"""Atomic file writes: every file pyskick produces appears whole or not at all.

A writer fills a temporary file in the destination's folder, which is then renamed over the
destination; an interrupted or failing writer leaves the old file (or none) and no temporary.
"""

from __future__ import annotations

import json
import os
import re
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyskick.errors import UserError

_SUFFIX = ".tmp"
# mkstemp's names: the prefix, 8 characters of this alphabet, the suffix.
_RANDOM = "[a-z0-9_]{8}"


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
    fd, name = tempfile.mkstemp(prefix=f".{path.name}.", suffix=_SUFFIX, dir=path.parent)
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


def read_json_object(path: Path, what: str) -> dict[str, Any]:
    """The JSON object in file ``path``, whose kind ``what`` the errors name.

    Raises:
        UserError: the file is not readable JSON, or holds something other than an object.
    """
    try:
        value = json.loads(path.read_text())
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise UserError(f"{path} is not a readable {what} ({exc})") from None
    if not isinstance(value, dict):
        raise UserError(f"{path} is not a {what} (not a JSON object)")
    return value


def temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """The temporaries :func:`atomic_path` made for ``path`` that are still there: a writer
    killed (SIGKILL, power loss) before its rename leaves one behind."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    pattern = re.compile(rf"\.{re.escape(path.name)}\.{_RANDOM}{re.escape(_SUFFIX)}")
    return sorted(p for p in path.parent.iterdir() if pattern.fullmatch(p.name))


def remove_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove :func:`temporaries` of ``path``; only call it while no other process can be
    writing ``path`` (e.g. holding the run folder's lock). Returns what was removed."""
    found = temporaries(path)
    for tmp in found:
        tmp.unlink(missing_ok=True)
    return found


def check_writable_folder(folder: str | os.PathLike[str]) -> None:
    """Refuse an output folder that cannot be written, before any work: the folder, or the
    nearest existing folder it would be created in, must be a writable folder.

    Raises:
        ValueError: one line naming the folder that is in the way.
    """
    folder = Path(folder)
    existing = folder
    while not existing.exists() and not existing.is_symlink() and existing != existing.parent:
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"cannot create folder {folder}: {existing} is not a folder")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise UserError(f"cannot write in folder {existing}: permission denied")
