"""A training run's folder: its lock, records, checkpoints and log, and loading its policy.

A run folder holds ``config.json`` and ``dataset.json`` (records), ``latest.pt`` and
``best.pt`` (checkpoints), ``metrics.jsonl`` (the log) and ``.lock``. The trainer writes both
records when a run starts (:meth:`RunDir.record_start`), so a run started from Python is as
complete as one started by ``pyskick train``. ``dataset.json`` holds the data file's path and
SHA-256 (when the run's :class:`~pyskick.training.TrainData` came from a file) and the
one-view run it started from.

One process writes a run folder at a time: the writer holds an exclusive ``flock`` on
``RUN/.lock`` and writes its pid there. The kernel drops the lock when the process ends,
however it ends, so a lock left by a killed process never blocks; the pid in the file only
names the holder in the refusal.

A command locks its run folder before any check or work (:meth:`RunDir.claimed`) and, when
it is refused, undoes what the lock changed (a folder it created is removed again), so a
refused command leaves the disk as it was; :meth:`RunDir.check_free` looks without writing.
Once locked, stale temporaries of the folder's own files (left by a killed atomic write, see
:mod:`pyskick._io`) are removed.

:func:`load_policy` is the one way to get the policy of a run folder (its ``best.pt``), of an
export folder (``pyskick export``: safetensors weights) or of a checkpoint file, with how that
run acts (its glimpse budget, actor, config and one-view run).

This module sits below actors, evaluation, sidekicks and training (``docs/architecture.md``):
it imports the checkpoint format, the config and the networks only.
"""

from __future__ import annotations

import fcntl
import json
import os
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeAlias

import torch

from pyskick._io import read_json_object, remove_temporaries, write_json, write_text
from pyskick.checkpoint import (
    EXPORT_WEIGHTS,
    POLICY_KEYS,
    is_export,
    load_checkpoint,
    load_run,
    policy_from_state,
    read_run,
)
from pyskick.config import TrainConfig
from pyskick.errors import UserError, UserFileNotFoundError
from pyskick.files import file_digest
from pyskick.models import CompletionPolicy, ModelConfig

if TYPE_CHECKING:
    from pyskick.data.hdf5_read import ViewgridFile
    from pyskick.data.spec import GridSpec

Dataset: TypeAlias = "str | os.PathLike[str] | ViewgridFile"
"""A data file, as a path or as an opened :class:`~pyskick.data.ViewgridFile` (hashed once)."""

CONFIG = "config.json"
DATASET = "dataset.json"
LATEST = "latest.pt"
BEST = "best.pt"
METRICS = "metrics.jsonl"
LOCK = ".lock"

OUTPUTS = (CONFIG, DATASET, LATEST, BEST, METRICS, LATEST + ".next", BEST + ".next")
"""The files a run writes atomically (their stale temporaries are removed when it starts); the
``.next`` checkpoints are a pack's, written before it commits them
(:mod:`pyskick.training.pack`)."""
REPRODUCE_RECORD = "reproduce.json"
"""The settings record that marks a ``pyskick reproduce`` folder (its runs lie in subfolders:
:mod:`pyskick.experiments.layout`)."""

# Open lock files of this process: resolved folder -> (fd, depth). flock locks belong to an
# open file description, so a second open-and-lock in the same process would refuse itself.
_HELD: dict[Path, tuple[int, int]] = {}


def dataset_path(dataset: Dataset) -> Path:
    """The file of a dataset given as a path or an opened :class:`ViewgridFile`."""
    return Path(dataset.path if hasattr(dataset, "path") else dataset)


def dataset_digest(dataset: Dataset) -> str:
    """The SHA-256 of a dataset's file: an opened :class:`ViewgridFile` hashes it once for the
    whole command (its ``digest``); a path is hashed now."""
    digest = getattr(dataset, "digest", None)
    return digest if isinstance(digest, str) else file_digest(dataset_path(dataset))


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

    def holds_run(self) -> bool:
        """Whether a run started here: a checkpoint, or the config it records at its start."""
        return self.has_checkpoint() or (self.path / CONFIG).is_file()

    def check_not_other_output(self) -> None:
        """Refuse to start a run in a folder another command made, whose files the run's would
        mix with: a reproduce folder or an export folder. (Any other folder is fine: the run
        adds its own files and changes no other.)

        Raises:
            UserError: one line naming the folder and what it is.
        """
        if (self.path / REPRODUCE_RECORD).is_file():
            raise UserError(
                f"{self.path} is a reproduce folder (its runs are METHOD/seed-K inside), not a "
                "run folder; choose another folder"
            )
        if is_export(self.path):
            raise UserError(f"{self.path} is an export folder, not a run folder; choose another")

    def epochs_done(self) -> int:
        """Epochs the run's ``latest.pt`` covers (0 without one)."""
        if not self.has_checkpoint():
            return 0
        return int(load_checkpoint(self.latest)["epoch"]) + 1

    # ---------------------------------------------------------------------- records
    def read_record(self, name: str) -> dict[str, Any] | None:
        """A JSON record of the run (``config.json``, ``dataset.json``), or None without one.

        Raises:
            ValueError: the record is not a JSON object (names the file).
        """
        path = self.path / name
        if not path.is_file():
            return None
        return read_json_object(path, "run record")

    def write_record(self, name: str, payload: dict[str, Any]) -> Path:
        """Write a JSON record atomically (the caller holds the lock)."""
        self._check_held()
        return write_json(self.path / name, payload)

    def recorded_config(self) -> dict[str, Any] | None:
        """``config.json``: the stage and every :class:`~pyskick.config.TrainConfig` field the
        run started with, or None without one."""
        return self.read_record(CONFIG)

    def recorded_stage(self) -> str | None:
        """The stage ``config.json`` records (``"pretrain"``, ``"train"``), or None."""
        record = self.recorded_config()
        return None if record is None else record.get("stage")

    def dataset_record(self) -> dict[str, Any] | None:
        """``dataset.json``, or None without one.

        Raises:
            ValueError: a record that is damaged or lacks the data file's path and digest
                (names the file).
        """
        record = self.read_record(DATASET)
        if record is not None and not (
            isinstance(record.get("path"), str) and isinstance(record.get("sha256"), str)
        ):
            raise UserError(f"{self.path / DATASET} is not a dataset record (no path or sha256)")
        return record

    def recorded_dataset(self) -> Path | None:
        """The data file the run was trained on, or None when it does not record one."""
        record = self.dataset_record()
        return None if record is None else Path(record["path"])

    def recorded_init(self) -> Path | None:
        """The one-view run this run started from, as ``dataset.json`` records it."""
        record = self.dataset_record()
        init = None if record is None else record.get("init")
        return Path(init) if init else None

    def check_dataset(self, dataset: Dataset) -> None:
        """Refuse to continue the run on a data file with other contents than it recorded.

        Raises:
            ValueError: the recorded file and ``dataset`` differ (or the record is damaged).
        """
        record = self.dataset_record()
        if record is not None and record["sha256"] != dataset_digest(dataset):
            raise UserError(
                f"{self.path} was trained on {record['path']}; {dataset_path(dataset)} has "
                "other contents"
            )

    def record_dataset(
        self,
        dataset: Dataset,
        *,
        init: str | os.PathLike[str] | None = None,
        init_sha256: str | None = None,
    ) -> Path:
        """Write ``dataset.json``: the data file's resolved path and SHA-256, and the one-view
        run the run started from (where it is now) with its checkpoint's SHA-256 when the run
        started. The caller holds the lock."""
        payload: dict[str, Any] = {
            "path": str(dataset_path(dataset).resolve()),
            "sha256": dataset_digest(dataset),
        }
        if init is not None:
            payload["init"] = str(Path(init).resolve())
            payload["init_relative"] = relative_init(self.path, init)
        if init_sha256 is not None:
            payload["init_sha256"] = init_sha256
        return self.write_record(DATASET, payload)

    def record_start(
        self,
        stage: str,
        config: Mapping[str, Any],
        *,
        dataset: Dataset | None = None,
        init: str | os.PathLike[str] | None = None,
        init_sha256: str | None = None,
        loggers: Sequence[str] | None = None,
        pack: Mapping[str, Any] | None = None,
        device: str | None = None,
    ) -> None:
        """Record a starting (or resumed) run: ``config.json`` (``stage`` and ``config``, a
        :meth:`TrainConfig.to_dict <pyskick.config.TrainConfig.to_dict>`, plus the metric
        ``loggers`` when given, the ``pack`` the run is trained in and the device it runs on
        (``device_used``, what ``config.device`` resolved to: ``"auto"`` is CUDA when there is
        one): recorded, not part of the config) and, when the data file is
        known, ``dataset.json`` (see :meth:`record_dataset`). The caller holds the lock; a
        resumed run's data file was checked before (:meth:`check_dataset`)."""
        record = {"stage": stage, **config}
        if loggers is not None:
            record["loggers"] = list(loggers)
        if pack is not None:
            record["pack"] = dict(pack)
        if device is not None:
            record["device_used"] = device
        self.write_record(CONFIG, record)
        if dataset is not None:
            self.record_dataset(dataset, init=init, init_sha256=init_sha256)

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
        for _ in range(20):
            self.path.mkdir(parents=True, exist_ok=True)
            try:
                fd = os.open(self.lock_file, os.O_RDWR | os.O_CREAT, 0o644)
            except FileNotFoundError:  # a refused holder removed the folder meanwhile: again
                continue
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
            if _same_file(fd, self.lock_file):
                break
            # The holder was refused and removed the folder it had created (claimed()): this
            # lock is of a deleted file; take the new one.
            os.close(fd)
        else:  # pragma: no cover - a folder created and removed 20 times in a row
            raise RunLockedError(self.path, None)
        os.ftruncate(fd, 0)
        os.pwrite(fd, f"{os.getpid()}\n".encode(), 0)
        _HELD[key] = (fd, 1)
        self.clean()

    @contextmanager
    def claimed(self) -> Iterator[RunDir]:
        """Lock the folder for a whole command, before any check or work: another writer is
        refused at once, naming this process. If the block raises, what this call created is
        removed again (the lock file, and the folder and its parents when they hold nothing
        else), so that a refused command leaves the disk as it was.

        Raises:
            RunLockedError: another process holds the lock.
        """
        if self._key() in _HELD:
            with self.locked():
                yield self
            return
        created = _missing_ancestors(self.path)
        try:  # a lock file left by an earlier writer: its pid and times, restored on refusal
            before = self.lock_file.stat(), self.lock_file.read_bytes()
        except OSError:
            before = None
        self.acquire()
        try:
            yield self
        except BaseException:
            self._unclaim(created, before)
            raise
        finally:
            self.release()

    def _unclaim(self, created: list[Path], before: tuple[os.stat_result, bytes] | None) -> None:
        """Undo what :meth:`claimed` changed (lock held): the lock file as it was (its earlier
        writer's pid and times), or removed with the folders ``created`` that hold nothing
        else."""
        if before is not None:
            stat, pid = before
            fd, _ = _HELD[self._key()]
            try:
                os.ftruncate(fd, 0)
                os.pwrite(fd, pid, 0)
                os.utime(self.lock_file, ns=(stat.st_atime_ns, stat.st_mtime_ns))
            except OSError:  # e.g. another user's .lock: the refusal, not this, is the error
                pass
            return
        self.lock_file.unlink(missing_ok=True)
        for folder in created:  # the deepest first
            try:
                folder.rmdir()
            except OSError:  # not empty (or not ours to remove): keep it and its parents
                return

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


def checkpoint_file(run_or_checkpoint: str | os.PathLike[str]) -> Path:
    """The checkpoint a run folder (its ``best.pt``), an export folder (its
    ``model.safetensors``) or a checkpoint path names."""
    path = Path(run_or_checkpoint)
    if is_export(path):
        return path / EXPORT_WEIGHTS
    return path / BEST if path.is_dir() else path


def relative_init(run_dir: str | os.PathLike[str], init: str | os.PathLike[str]) -> str:
    """Where the one-view run ``init`` is from the run folder ``run_dir`` (a relative path,
    ``../one-view`` in a study), recorded as ``init_relative``: a project folder moved as a
    whole keeps it."""
    return os.path.relpath(Path(init).resolve(), Path(run_dir).resolve())


def locate_init(run_dir: str | os.PathLike[str], record: Mapping[str, Any]) -> str | None:
    """Where a run's one-view run is now, from a checkpoint or ``dataset.json`` (``record``):
    the recorded ``init`` while it holds the recorded checkpoint bytes (``init_sha256``); else
    the place at the recorded ``init_relative`` from ``run_dir`` (the run and its one-view run
    moved or copied together) when that does; else the recorded one (gone or changed; also
    for records without the digest), or None for a run without one."""
    init = record.get("init")
    if not init:
        return None
    relative, digest = record.get("init_relative"), record.get("init_sha256")
    if not isinstance(digest, str) or holds_checkpoint(init, digest):
        return str(init)
    if isinstance(relative, str):
        moved = (Path(run_dir) / relative).resolve()
        if holds_checkpoint(moved, digest):
            return str(moved)
    return str(init)


def holds_checkpoint(run_or_checkpoint: str | os.PathLike[str], digest: str) -> bool:
    """Whether a run folder, export folder or checkpoint path names a checkpoint with these
    bytes (SHA-256 ``digest``)."""
    path = checkpoint_file(run_or_checkpoint)
    return path.is_file() and checkpoint_digest(path) == digest


def checkpoint_digest(run_or_checkpoint: str | os.PathLike[str]) -> str:
    """SHA-256 of the checkpoint a run folder, export folder or checkpoint path names
    (:func:`checkpoint_file`): the model's identity in score cache keys and evaluation records.

    Raises:
        UserFileNotFoundError: no such checkpoint.
    """
    from pyskick.files import file_digest

    path = checkpoint_file(run_or_checkpoint)
    if not path.is_file():
        raise UserFileNotFoundError(f"model checkpoint {path} does not exist")
    return file_digest(path)


@dataclass(frozen=True)
class SavedPolicy:
    """A policy loaded from a run folder, an export folder or a checkpoint, and how that run
    acts."""

    policy: CompletionPolicy
    """The policy, in eval mode, on the device it was loaded to."""
    checkpoint: Path
    """The checkpoint file it was read from (an export's ``model.safetensors``)."""
    stage: str | None
    """``"pretrain"`` or ``"train"``; None for a checkpoint that holds only a policy."""
    config: TrainConfig | None
    """The run's training config (what actor factories are given); None as for ``stage``."""
    init: Path | None
    """The one-view run it started from: the checkpoint's ``init``, else the one
    ``dataset.json`` beside it records; None when neither does (nor for an export)."""
    spec: GridSpec | None = None
    """The geometry and channel mean of the data it was trained on, as an export folder
    records them; None for a run folder or checkpoint (their data file holds them)."""
    sha256: str | None = None
    """SHA-256 of the bytes the policy was loaded from (``checkpoint``'s, read once): what an
    evaluation of it records."""

    def _run_config(self) -> TrainConfig:
        if self.config is None or self.stage is None:
            missing = "config" if self.config is None else "stage"
            raise ValueError(
                f"{self.checkpoint} is not a pyskick training checkpoint (no {missing!r})"
            )
        return self.config

    @property
    def T(self) -> int:
        """Glimpses per episode: 1 for a pretrained (one-view) model, else the run's ``T``.

        Raises:
            ValueError: the checkpoint records no run config or stage.
        """
        config = self._run_config()
        return 1 if self.stage == "pretrain" else config.T

    @property
    def actor(self) -> str:
        """The run's actor name; ``"learned"`` for a pretrained model, which moves nowhere
        (its config's actor is moot).

        Raises:
            ValueError: the checkpoint records no run config or stage.
        """
        config = self._run_config()
        return "learned" if self.stage == "pretrain" else config.actor


def load_policy(
    run_or_checkpoint: str | os.PathLike[str], device: str | torch.device = "cpu"
) -> SavedPolicy:
    """The policy of a run folder (its ``best.pt``), an export folder (its safetensors
    weights; nothing is unpickled) or checkpoint file, in eval mode on ``device`` (torch's
    global RNG left as it was), with its run's stage, config and one-view run.

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: not a pyskick checkpoint, or one without a policy (``model``,
            ``model_config``).
    """
    path, state, digest = read_run(run_or_checkpoint, keys=POLICY_KEYS)
    policy = policy_from_state(state, device)
    stage = state.get("stage")
    config = TrainConfig.from_dict(state["config"]) if "config" in state else None
    init = _one_view_of(path, state)
    spec = state.get("spec")
    return SavedPolicy(
        policy,
        path,
        None if stage is None else str(stage),
        config,
        Path(init) if init else None,
        None if spec is None else grid_spec_from_dict(spec),
        digest,
    )


def one_view_of(run_or_checkpoint: str | os.PathLike[str]) -> Path | None:
    """The one-view run a run folder, export folder or checkpoint started from, where
    :func:`load_policy` finds it, without building the policy; None for one without.

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: not a pyskick checkpoint.
    """
    path, state, _ = read_run(run_or_checkpoint, keys=())
    init = _one_view_of(path, state)
    return Path(init) if init else None


def _one_view_of(checkpoint: Path, state: Mapping[str, Any]) -> str | None:
    """The one-view run of a checkpoint's run, where it is now (:func:`locate_init`); for a
    checkpoint that names none, or one no longer there (a ``best.pt`` of before a move), the
    ``dataset.json`` beside it (rewritten by every resume) when it names the same model (the
    same ``init_sha256``)."""
    run = checkpoint.parent
    init = locate_init(run, state)
    if init and Path(init).exists():
        return init
    record = RunDir(run).dataset_record() or {}
    if not init or (
        state.get("init_sha256") is not None
        and record.get("init_sha256") == state.get("init_sha256")
    ):
        return locate_init(run, record) or init
    return init


def grid_spec_from_dict(fields: Mapping[str, Any]) -> GridSpec:
    """A :class:`~pyskick.data.spec.GridSpec` from its fields as JSON holds them (lists for
    tuples), as an export's ``dataset.json`` records it.

    Raises:
        ValueError: missing, unknown or invalid fields.
    """
    from pyskick.data.spec import GridSpec  # the data package (h5py) only for an export

    values: dict[str, Any] = {
        key: tuple(v) if isinstance(v, list) else v for key, v in fields.items()
    }
    try:
        return GridSpec(**values)
    except (TypeError, ValueError) as exc:
        raise UserError(f"not a dataset geometry record ({exc})") from None


def load_model_config(run_or_checkpoint: str | os.PathLike[str]) -> ModelConfig:
    """The :class:`~pyskick.models.ModelConfig` of a run folder's ``best.pt`` or a checkpoint,
    without building the policy.

    Raises:
        FileNotFoundError: no such run or checkpoint.
        ValueError: not a pyskick checkpoint, or one without a policy.
    """
    return ModelConfig.from_dict(load_run(run_or_checkpoint, keys=POLICY_KEYS)[1]["model_config"])


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


def _same_file(fd: int, path: Path) -> bool:
    """Whether the open ``fd`` is the file at ``path`` now (not one unlinked meanwhile)."""
    try:
        on_disk = path.stat()
    except FileNotFoundError:
        return False
    held = os.fstat(fd)
    return (held.st_dev, held.st_ino) == (on_disk.st_dev, on_disk.st_ino)


def _missing_ancestors(path: Path) -> list[Path]:
    """``path`` and its parents that do not exist yet, the deepest first."""
    missing: list[Path] = []
    while not path.exists() and not path.is_symlink() and path != path.parent:
        missing.append(path)
        path = path.parent
    return missing


def _read_pid(fd: int) -> int | None:
    """The pid in a lock file; the holder writes it just after locking, so wait a moment for
    it when the file is still empty."""
    for _ in range(50):
        text = os.pread(fd, 32, 0).decode(errors="replace").strip()
        if text:
            return int(text) if text.isdigit() else None
        time.sleep(0.01)
    return None
