"""A training run's folder: its lock, records, checkpoints and log, in one place.

A run folder holds ``config.json`` and ``dataset.json`` (records), ``latest.pt`` and
``best.pt`` (checkpoints), ``metrics.jsonl`` (the log) and ``.lock``. One process writes a
run folder at a time: the writer holds an exclusive ``flock`` on ``RUN/.lock`` and writes its
pid there. The kernel drops the lock when the process ends, however it ends, so a lock left by
a killed process never blocks; the pid in the file only names the holder in the refusal.

Every refusal is decided before a run folder is locked (:meth:`RunDir.check_free` looks
without writing); once locked, stale temporaries of the folder's own files (left by a killed
atomic write, see :mod:`pyskick._io`) are removed.

This module is low in the layering: it imports nothing from training, evaluation, sidekicks or
actors.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from pyskick._io import remove_temporaries, write_json, write_text
from pyskick.errors import UserError, UserFileNotFoundError

CONFIG = "config.json"
DATASET = "dataset.json"
LATEST = "latest.pt"
BEST = "best.pt"
METRICS = "metrics.jsonl"
LOCK = ".lock"

OUTPUTS = (CONFIG, DATASET, LATEST, BEST, METRICS)
"""The files a run writes atomically (their stale temporaries are removed when it starts)."""

# Open lock files of this process: resolved folder -> (fd, depth). flock locks belong to an
# open file description, so a second open-and-lock in the same process would refuse itself.
_HELD: dict[Path, tuple[int, int]] = {}


class RunLockedError(UserError):
    """Another process writes this run folder (exit 2 on the command line)."""

    def __init__(self, path: Path, pid: int | None) -> None:
        holder = f"pid {pid}" if pid is not None else "pid unknown"
        super().__init__(
            f"run folder {path} is in use by another pyskick process ({holder}); wait for it "
            "to finish or stop it"
        )
        self.path = path
        self.pid = pid


def is_main_process() -> bool:
    """Rank 0 of a ``torchrun`` launch, or a plain process: the one that writes run folders."""
    return int(os.environ.get("RANK", "0")) == 0


class RunDir:
    """The folder of one training run.

    Args:
        path: the folder (it need not exist yet).
    """

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)

    def __repr__(self) -> str:
        return f"RunDir({str(self.path)!r})"

    # ------------------------------------------------------------------------ paths
    @property
    def latest(self) -> Path:
        """The checkpoint written after every epoch."""
        return self.path / LATEST

    @property
    def best(self) -> Path:
        """The checkpoint of the best validation error so far."""
        return self.path / BEST

    @property
    def metrics(self) -> Path:
        """The metrics log (one JSON object per epoch)."""
        return self.path / METRICS

    @property
    def lock_file(self) -> Path:
        """The file the writer locks; it holds the writer's pid."""
        return self.path / LOCK

    def has_checkpoint(self) -> bool:
        """Whether the run has finished at least one epoch (``latest.pt`` exists)."""
        return self.latest.is_file()

    # ---------------------------------------------------------------------- records
    def read_record(self, name: str) -> dict[str, Any] | None:
        """A JSON record of the run (``config.json``, ``dataset.json``), or None without one.

        Raises:
            ValueError: the record is not a JSON object (names the file).
        """
        path = self.path / name
        if not path.is_file():
            return None
        try:
            record = json.loads(path.read_text())
        except (UnicodeDecodeError, json.JSONDecodeError) as exc:
            raise UserError(f"{path} is not a readable run record ({exc})") from None
        if not isinstance(record, dict):
            raise UserError(f"{path} is not a run record (not a JSON object)")
        return record

    def write_record(self, name: str, payload: dict[str, Any]) -> Path:
        """Write a JSON record atomically (the caller holds the lock)."""
        self._check_held()
        return write_json(self.path / name, payload)

    def recorded_stage(self) -> str | None:
        """The stage ``config.json`` records (``"pretrain"``, ``"train"``), or None."""
        record = self.read_record(CONFIG)
        return None if record is None else record.get("stage")

    def check_resumable(self, stage: str) -> None:
        """Refuse ``--resume`` of a folder that holds no run of ``stage``.

        A run killed before its first checkpoint is resumable: it records its config when it
        starts, and starts again from scratch.

        Raises:
            FileNotFoundError: neither a checkpoint nor a recorded config.
            ValueError: the folder records a run of another stage.
        """
        recorded = self.recorded_stage()
        if recorded is None and not self.has_checkpoint():
            raise UserFileNotFoundError(
                f"{self.path} holds no run to resume (no {LATEST} or {CONFIG}); start it "
                "without --resume"
            )
        if recorded is not None and recorded != stage:
            raise UserError(f"cannot resume a {recorded!r} run as a {stage!r} run")

    # ------------------------------------------------------------------------- lock
    def check_free(self) -> None:
        """Refuse a folder that another process writes. Looks without writing anything (the
        folder and the lock file are not created).

        Raises:
            RunLockedError: the holder's pid in the message.
        """
        if self._key() in _HELD or not self.lock_file.is_file():
            return
        try:
            fd = os.open(self.lock_file, os.O_RDONLY)
        except OSError:
            return
        try:
            try:
                # Shared: two processes that look at once do not refuse each other.
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                raise RunLockedError(self.path, _read_pid(fd)) from None
            fcntl.flock(fd, fcntl.LOCK_UN)
        finally:
            os.close(fd)

    def acquire(self) -> None:
        """Create the folder and take its lock (re-entrant within a process), write this
        process's pid in the lock file, and remove stale temporaries of the run's files.

        Raises:
            RunLockedError: another process holds the lock.
        """
        key = self._key()
        if key in _HELD:
            fd, depth = _HELD[key]
            _HELD[key] = (fd, depth + 1)
            return
        self.path.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
        # A process merely looking (check_free) holds a shared lock for microseconds.
        for attempt in range(20):
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if attempt == 19:
                    pid = _read_pid(fd)
                    os.close(fd)
                    raise RunLockedError(self.path, pid) from None
                time.sleep(0.01)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = (fd, 1)
        self.clean()

    def release(self) -> None:
        """Give the lock back (the last of nested :meth:`acquire` calls releases it)."""
        key = self._key()
        if key not in _HELD:
            return
        fd, depth = _HELD[key]
        if depth > 1:
            _HELD[key] = (fd, depth - 1)
            return
        del _HELD[key]
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)

    @contextmanager
    def locked(self) -> Iterator[RunDir]:
        """:meth:`acquire` for the duration of a ``with`` block."""
        self.acquire()
        try:
            yield self
        finally:
            self.release()

    def is_locked_here(self) -> bool:
        """Whether this process holds the folder's lock."""
        return self._key() in _HELD

    # -------------------------------------------------------------------- lifecycle
    def clean(self) -> list[Path]:
        """Remove temporaries of the run's files left by a killed writer (lock held)."""
        self._check_held()
        removed: list[Path] = []
        for name in OUTPUTS:
            removed += remove_temporaries(self.path / name)
        return removed

    def reset(self) -> None:
        """Forget an abandoned attempt before a run starts from scratch: its log and its
        ``best.pt`` (a fresh run has no best yet). The caller holds the lock."""
        self._check_held()
        self.metrics.unlink(missing_ok=True)
        self.best.unlink(missing_ok=True)

    # ---------------------------------------------------------------------- helpers
    def _key(self) -> Path:
        return self.path.resolve()

    def _check_held(self) -> None:
        if self._key() not in _HELD:
            raise RuntimeError(f"{self.path} is written without holding its lock")


def trim_log(path: str | os.PathLike[str], last_step: int) -> None:
    """Rewrite a ``metrics.jsonl`` log atomically with its records of steps ``<= last_step``.

    A torn last line (a process killed while appending) is dropped too.
    """
    path = Path(path)
    if not path.is_file():
        return
    kept = []
    for line in path.read_text().splitlines():
        step = _step(line)
        if step is not None and step <= last_step:
            kept.append(f"{line}\n")
    write_text(path, "".join(kept))


def _step(line: str) -> int | None:
    """The step of a log line; None for a blank or torn one."""
    try:
        return int(json.loads(line)["step"])
    except (ValueError, KeyError, TypeError):
        return None


def _read_pid(fd: int) -> int | None:
    """The pid in a lock file; the holder writes it just after locking, so wait a moment for
    it when the file is still empty."""
    for _ in range(50):
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text:
            return int(text) if text.isdigit() else None
        time.sleep(0.01)
    return None
