"""Atomic file writes: every file pyskick produces appears whole or not at all.

A writer fills a temporary in the destination's folder (:func:`temporary_path`:
``.NAME.tmp-HOST-PID-RANDOM.SUFFIX``, a file or a folder), which is then published
(:func:`publish`): renamed over the destination, or, for an output that must be new, linked
into place without replacing anything, so that of two writers of one new file exactly one
succeeds. An interrupted or failing writer leaves the old file (or none) and no temporary; a
writer killed outright (SIGKILL, power loss) leaves its temporary, which the next writer of the
same destination removes, because its writer's pid is gone (:func:`remove_stale_temporaries`).
"""

from __future__ import annotations

import errno
import json
import os
import re
import resource
import secrets
import shutil
import socket
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyskick.errors import UserError

# mkstemp's names, the scheme of earlier versions: their temporaries are still recognised.
_OLD_RANDOM = "[a-z0-9_]{8}"
_NEW_ONLY: set[Path] = set()
_PID_GROUPS = ("pid", "datapid", "exportpid", "figurepid")


_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})
_NEARLY_FULL_BYTES = 1 << 20
_OS_ERROR_IN_TEXT = re.compile(r"\(os error (\d+)\)")


class DiskFullError(OSError):
    """An output could not be written for lack of space (a full disk, a quota, a file-size
    limit); the message names the file and what is left on its device."""


def disk_full_error(
    exc: BaseException, path: str | os.PathLike[str], written: Path | None = None
) -> DiskFullError | None:
    """``exc``, raised while writing ``path`` (through the temporary ``written``), as a
    :class:`DiskFullError` when its cause is a lack of space: an OSError with
    ENOSPC/EDQUOT/EFBIG anywhere in its chain (or such an errno named in a library's text, as
    safetensors' "(os error 28)"), or a library's error that lost the errno
    (torch's zip writer, safetensors) while the device of ``path`` is nearly full (under 1 MiB
    free) or ``written`` reached the process's file-size limit (``ulimit -f``); None
    otherwise."""
    path = Path(path)
    cause: BaseException | None = exc
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        code = cause.errno if isinstance(cause, OSError) else None
        if code is None:  # a library in another language may name the errno in its text
            named = _OS_ERROR_IN_TEXT.search(str(cause))  # safetensors: "(os error 27)"
            code = int(named.group(1)) if named is not None else None
        if code in _DISK_FULL:
            return _disk_full(code, f"cannot write {path}: {os.strerror(code)}{_free_note(path)}")
        cause = cause.__cause__ or cause.__context__
    # A guess only for errors that lost their errno: never for bad input or a known errno.
    if isinstance(exc, UserError) or not (
        isinstance(exc, RuntimeError) or (isinstance(exc, OSError) and exc.errno is None)
    ):
        return None
    limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
    if limit != resource.RLIM_INFINITY and _largest_file(written) >= limit:
        return _disk_full(
            errno.EFBIG,
            f"cannot write {path}: it exceeds this process's file-size limit (ulimit -f) of "
            f"{limit} bytes ({type(exc).__name__}: {exc})",
        )
    if _free_bytes(path) < _NEARLY_FULL_BYTES:
        return _disk_full(
            errno.ENOSPC,
            f"cannot write {path}: its device is full{_free_note(path)} "
            f"({type(exc).__name__}: {exc})",
        )
    return None


def _largest_file(written: Path | None) -> int:
    """The size of ``written``, or of the largest file in it (a folder); 0 when absent."""
    if written is None or not written.exists():
        return 0
    files = [written] if written.is_file() else [p for p in written.rglob("*") if p.is_file()]
    return max((p.stat().st_size for p in files), default=0)


def _disk_full(code: int, message: str) -> DiskFullError:
    error = DiskFullError(message)  # one argument: the message is the whole text
    error.errno = code
    return error


def _free_bytes(path: Path) -> int:
    folder = path.parent
    while not folder.exists() and folder != folder.parent:
        folder = folder.parent
    try:
        stats = os.statvfs(folder)
    except OSError:
        return 1 << 62
    return stats.f_bavail * stats.f_frsize


def _free_note(path: Path) -> str:
    free = _free_bytes(path)
    return "" if free >= 1 << 62 else f" ({free / 2**20:.1f} MiB free on its device)"


class OutputExistsError(UserError):
    """An output that had to be new appeared while this process wrote it (another writer
    finished first); nothing was replaced."""


def _host() -> str:
    """This machine's name as it appears in temporaries' names (letters, digits, hyphens)."""
    return re.sub(r"[^A-Za-z0-9-]", "-", socket.gethostname().split(".")[0]) or "host"


def temporary_path(path: str | os.PathLike[str]) -> Path:
    """Where this process writes ``path`` before publishing it: ``.NAME.tmp-HOST-PID-RANDOM``
    and the destination's suffix (writers that pick a format by the suffix see the right
    one), beside it. Not created. The host and pid tell whether its writer is gone."""
    path = Path(path)
    token = f"{_host()}-{os.getpid()}-{secrets.token_hex(4)}"
    return path.with_name(f".{path.name}.tmp-{token}{path.suffix}")


def _temporary_pattern(path: Path) -> re.Pattern[str]:
    name = re.escape(path.name)
    return re.compile(
        rf"\.{name}\.tmp-(?P<host>[A-Za-z0-9-]+)-(?P<pid>\d+)-[0-9a-f]{{8}}{re.escape(path.suffix)}"
        # Earlier versions' names: mkstemp's, data files', exports' and figures'.
        rf"|\.{name}\.{_OLD_RANDOM}\.tmp"
        rf"|\.{name}\.tmp-(?P<datapid>\d+)"
        rf"|\.{name}\.export-(?P<exportpid>\d+)"
        rf"|\.{name}\.(?P<figurepid>\d+)-\d+\.tmp"
    )


def temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """The temporaries of ``path`` still beside it (files or folders), of any writer."""
    path = Path(path)
    if not path.parent.is_dir():
        return []
    pattern = _temporary_pattern(path)
    try:
        return sorted(p for p in path.parent.iterdir() if pattern.fullmatch(p.name))
    except OSError:  # a folder that cannot be listed (write-only): nothing to clean
        return []


def _alive(pid: int) -> bool:
    """Whether a process ``pid`` exists (one we may not signal exists too)."""
    if pid == os.getpid():
        return True
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def _remove(entry: Path) -> None:
    if entry.is_dir() and not entry.is_symlink():
        shutil.rmtree(entry, ignore_errors=True)
    else:
        entry.unlink(missing_ok=True)


def remove_stale_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove the temporaries of ``path`` whose writer is gone (killed before it published):
    written on this machine by a process that no longer exists. A live writer's are left
    alone, as are another machine's (a shared folder) and those whose writer cannot be told
    (mkstemp names of earlier versions: :func:`remove_temporaries` under a lock takes those).
    Returns what was removed."""
    path = Path(path)
    pattern = _temporary_pattern(path)
    removed = []
    for entry in temporaries(path):
        match = pattern.fullmatch(entry.name)
        assert match is not None
        if match.group("host") not in (None, _host()):
            continue  # another machine's writer (a shared folder): not ours to judge
        pid = next((match.group(g) for g in _PID_GROUPS if match.group(g)), None)
        if pid is not None and not _alive(int(pid)):
            _remove(entry)
            removed.append(entry)
    return removed


def remove_temporaries(path: str | os.PathLike[str]) -> list[Path]:
    """Remove every temporary of ``path``; only call it while no other process can be writing
    ``path`` (e.g. holding the run folder's lock). Returns what was removed."""
    found = temporaries(path)
    for entry in found:
        _remove(entry)
    return found


def declare_outputs(paths: Iterable[str | os.PathLike[str]], *, new: bool) -> None:
    """Declare outputs this process is about to write: ``new`` (a command without
    ``--overwrite``) if it must create them, not replace them, so that :func:`publish` never
    replaces one, even when another writer created it after the command checked that it did
    not exist; otherwise (``--overwrite``) they are replaced as usual."""
    for path in paths:
        (_NEW_ONLY.add if new else _NEW_ONLY.discard)(_key(path))


def _key(path: str | os.PathLike[str]) -> Path:
    """One name per file however it is spelled (links in its folder, ``..``)."""
    path = Path(path)
    return Path(os.path.realpath(path.parent)) / path.name


def publish(tmp: Path, path: Path, *, exclusive: bool | None = None) -> None:
    """Move the finished temporary ``tmp`` (a file or a folder) to ``path``.

    Args:
        tmp: the finished temporary, beside ``path`` (:func:`temporary_path`).
        path: the destination.
        exclusive: never replace ``path`` (an atomic link for a file, a rename that fails on
            an existing folder); default: whether :func:`declare_outputs` declared it new.
            Otherwise an existing file is replaced atomically and an existing folder swapped
            out.

    Raises:
        OutputExistsError: exclusive, and ``path`` exists (``tmp`` is left for the caller to
            remove).
    """
    if exclusive is None:
        exclusive = _key(path) in _NEW_ONLY
    exists = f"{path} was created by another writer while this one wrote it; nothing replaced"
    if tmp.is_dir():
        if path.exists() or path.is_symlink():
            if exclusive:
                raise OutputExistsError(exists)
            old = temporary_path(path)
            path.rename(old)
            try:
                tmp.rename(path)
            except OSError:
                old.rename(path)  # the previous folder back in place, not left to be reaped
                raise
            _remove(old)
            return
        try:
            tmp.rename(path)  # fails if a non-empty folder appeared meanwhile
        except OSError as exc:
            if exc.errno in (errno.EEXIST, errno.ENOTEMPTY, errno.ENOTDIR, errno.EISDIR):
                raise OutputExistsError(exists) from None
            raise
        _NEW_ONLY.discard(_key(path))  # this process's own now: its later writes replace it
        return
    if not exclusive:
        tmp.replace(path)
        return
    try:
        os.link(tmp, path)
    except FileExistsError:
        raise OutputExistsError(exists) from None
    except OSError as exc:  # no hard links on this file system: check, then rename
        if exc.errno not in (
            errno.EPERM,
            errno.ENOTSUP,
            errno.EOPNOTSUPP,
            errno.EMLINK,
            errno.EXDEV,
            errno.ENOSYS,
        ):
            raise
        if path.exists() or path.is_symlink():
            raise OutputExistsError(exists) from None
        tmp.rename(path)
    else:
        tmp.unlink()
    _NEW_ONLY.discard(_key(path))  # this process's own now: its later writes replace it


@contextmanager
def atomic_path(
    path: str | os.PathLike[str], *, fsync: bool = False, exclusive: bool | None = None
) -> Iterator[Path]:
    """Yield a temporary path to write (not created); on success it is published to ``path``
    (:func:`publish`; ``exclusive`` as there).

    The folder is created and dead writers' temporaries of ``path`` are removed first. The
    file gets the usual permissions (it is created by the caller). ``fsync`` flushes the data
    to disk before the rename (checkpoints). A failure for lack of space is raised as a
    :class:`DiskFullError` naming ``path`` (:func:`disk_full_error`).
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    tmp = temporary_path(path)
    try:
        yield tmp
        if fsync:
            with tmp.open("rb+") as handle:
                os.fsync(handle.fileno())
        publish(tmp, path, exclusive=exclusive)
    except (OSError, RuntimeError) as exc:
        full = disk_full_error(exc, path, tmp)
        if full is None:
            raise
        raise full from exc
    finally:
        if tmp.exists() or tmp.is_symlink():
            _remove(tmp)


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
