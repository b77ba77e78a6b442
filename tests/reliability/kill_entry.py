"""Run ``pyskick ARGS`` in this process and stop at a chosen moment so that a test can SIGKILL
it there (used by test_kill_resume.py; the moments are deterministic, not timed).

Usage: ``python kill_entry.py MOMENT SIGNAL_FILE ARGS...``. At MOMENT the process writes its
pid to SIGNAL_FILE and sleeps until it is killed:

- ``start:K``: epoch K is about to be trained (the folder is locked and recorded, epoch K-1's
  checkpoint is written);
- ``logged:K``: epoch K is trained and logged, its checkpoint not yet written;
- ``writing:K``: epoch K's ``latest.pt`` is half written (its temporary holds half the bytes).

Torch runs on one thread, as in the tests' uninterrupted runs, so results compare bit for bit.
"""

from __future__ import annotations

import io
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch

from pyskick._io import atomic_path
from pyskick.training import trainer as trainer_module
from pyskick.training.trainer import Trainer
from pyskick_cli.main import main


def _stop_here(signal_file: Path) -> None:
    """Tell the test where we are, then wait for its SIGKILL."""
    tmp = signal_file.with_suffix(".part")
    tmp.write_text(str(os.getpid()))
    tmp.replace(signal_file)
    while True:
        time.sleep(60)


def _install(moment: str, signal_file: Path) -> None:
    kind, _, value = moment.partition(":")
    epoch = int(value)
    if kind == "start":
        train_epoch = Trainer.train_epoch

        def stopping_train_epoch(self: Trainer, at: int) -> dict[str, float]:
            if at == epoch:
                _stop_here(signal_file)
            return train_epoch(self, at)

        Trainer.train_epoch = stopping_train_epoch  # type: ignore[method-assign]
    elif kind == "logged":
        save = Trainer.save

        def stopping_save(self: Trainer, at: int, *, best: bool) -> None:
            if at == epoch:
                _stop_here(signal_file)
            save(self, at, best=best)

        Trainer.save = stopping_save  # type: ignore[method-assign]
    elif kind == "writing":
        save_checkpoint = trainer_module.save_checkpoint

        def half_written(path: Path, state: dict[str, Any]) -> Path:
            if state["epoch"] != epoch or Path(path).name != "latest.pt":
                return save_checkpoint(path, state)
            buffer = io.BytesIO()
            torch.save({"format": 1, **state}, buffer)
            data = buffer.getvalue()
            with atomic_path(path, fsync=True) as tmp:
                tmp.write_bytes(data[: len(data) // 2])
                _stop_here(signal_file)
            raise AssertionError("not reached")

        trainer_module.save_checkpoint = half_written  # type: ignore[assignment]
    else:
        raise SystemExit(f"unknown moment {moment!r}")


if __name__ == "__main__":
    torch.set_num_threads(1)
    moment_arg, signal_arg, *args = sys.argv[1:]
    _install(moment_arg, Path(signal_arg))
    main(args)
