"""Atomic writes: a file appears whole or not at all, with the usual permissions."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from pyskick._io import atomic_path, write_json, write_text


def test_write_json_creates_folders_and_ends_with_newline(tmp_path: Path) -> None:
    path = write_json(tmp_path / "a" / "b" / "x.json", {"k": [1, 2]})
    assert path.read_text().endswith("}\n")
    assert json.loads(path.read_text()) == {"k": [1, 2]}
    assert [p.name for p in path.parent.iterdir()] == ["x.json"]


def test_failed_writer_keeps_the_old_file_and_leaves_no_temporary(tmp_path: Path) -> None:
    path = write_text(tmp_path / "x.txt", "old")

    def failing_writer() -> None:
        with atomic_path(path) as tmp:
            tmp.write_text("half")
            raise RuntimeError("boom")

    with pytest.raises(RuntimeError, match="boom"):
        failing_writer()
    assert path.read_text() == "old"
    assert [p.name for p in tmp_path.iterdir()] == ["x.txt"]


def test_permissions_follow_the_umask_not_mkstemp(tmp_path: Path) -> None:
    previous = os.umask(0o022)
    try:
        path = write_text(tmp_path / "x.txt", "data")
    finally:
        os.umask(previous)
    assert path.stat().st_mode & 0o777 == 0o644


def test_fsync_write_replaces_existing(tmp_path: Path) -> None:
    path = write_text(tmp_path / "x.bin", "old")
    with atomic_path(path, fsync=True) as tmp:
        tmp.write_bytes(b"new")
    assert path.read_bytes() == b"new"
