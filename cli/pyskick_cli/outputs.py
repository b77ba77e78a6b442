"""CLI output files: an existing one is replaced only when asked (``--overwrite``).

Commands that write files check their outputs with :func:`check_outputs` before any work, so a
refusal (exit 2, one line naming the file) leaves the disk as it was. Without ``--overwrite``
the outputs are also declared new (:func:`pyskick._io.declare_outputs`): if another process writes
one while this one works, this one's is not published over it (exit 2, one line).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

import click

from pyskick._io import check_writable_folder, declare_outputs
from pyskick.errors import UserError

F = TypeVar("F", bound=Callable[..., Any])

OVERWRITE_HELP = "Replace output files that already exist (default: refuse, exit 2)."


def overwrite_option(f: F) -> F:
    """The ``--overwrite`` flag of every command that writes files."""
    return click.option("--overwrite", is_flag=True, help=OVERWRITE_HELP)(f)


def check_outputs(paths: Iterable[Path], *, overwrite: bool) -> None:
    """Refuse outputs that exist (without ``overwrite``) or that cannot be written.

    Args:
        paths: the files a command is about to write.
        overwrite: the user's ``--overwrite``.

    Raises:
        UserError: (exit 2) one line naming the first file that exists or is a folder, or that
            lies under a folder that cannot be made or written (a file, a dangling link, a
            read-only folder: see :func:`pyskick._io.check_writable_folder`).
    """
    paths = [Path(path) for path in paths]
    for path in paths:
        path = Path(path)
        if path.is_dir():
            raise UserError(f"{path} is a folder; the output must be a file")
        if not overwrite and (path.exists() or path.is_symlink()):
            raise UserError(f"{path} already exists; pass --overwrite to replace it")
        try:
            check_writable_folder(path.parent)
        except ValueError as exc:
            raise UserError(f"cannot write {path}: {exc}") from None
    declare_outputs(paths, new=not overwrite)


RECORD_SUFFIXES = (".pt", ".json", ".jsonl", ".safetensors")
"""The files of a run or export folder that commands read: checkpoints and records."""


def check_not_inputs(paths: Iterable[Path], inputs: Iterable[Path | None]) -> None:
    """Refuse an output that is one of the command's inputs, ``--overwrite`` or not: a file it
    reads, or a checkpoint or record (:data:`RECORD_SUFFIXES`) directly inside a run or export
    folder it reads. Other files in such a folder (an earlier ``--save`` there) may be
    replaced.

    Raises:
        UserError: (exit 2) one line naming the output.
    """
    read = [Path(i) for i in inputs if i is not None]
    for path in (Path(p) for p in paths):
        if path.exists() and any(_is_input(path, source) for source in read):
            raise UserError(f"{path} is one of this command's inputs; choose another file")


def check_not_in_input_folder(paths: Iterable[Path], folder: Path) -> None:
    """Refuse an output inside ``folder``, the tree of inputs a conversion reads (``--overwrite``
    or not): it may be one of them (a panorama, a mesh), and a new file there would be one of
    the next conversion's inputs.

    Raises:
        UserError: (exit 2) one line naming the output and the folder.
    """
    inside = folder.resolve()
    for path in (Path(p) for p in paths):
        if inside in path.resolve().parents:
            raise UserError(
                f"{path} is in {folder}, whose files this command reads; choose another file"
            )


def _is_input(path: Path, source: Path) -> bool:
    if not source.exists():
        return False
    if source.is_dir():
        own = path.resolve().parent == source.resolve()
        return own and path.suffix in RECORD_SUFFIXES
    return path.resolve() == source.resolve()
