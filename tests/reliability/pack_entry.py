"""Train a pack of two tiny runs in this process, and stop at a chosen moment of a checkpoint
commit so that a test can SIGKILL it there (test_pack_kill_resume.py; deterministic moments).

Usage: ``python pack_entry.py OUT EPOCHS RESUME MOMENT SIGNAL_FILE``. MOMENT is ``none`` or
``pending:K:I`` (epoch K's commit has written I of its pending checkpoints) or ``renamed:K:I``
(I of them are renamed into place); there the process writes its pid to SIGNAL_FILE and sleeps
until it is killed. Torch runs on one thread, so results compare bit for bit.
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import torch
from kill_entry import _stop_here  # this script's folder is on sys.path

from pyskick.config import train_preset
from pyskick.training import TrainData, pretrain
from pyskick.training import pack as pack_module
from pyskick.training.pack import PackMember, pending, train_pack


def grids(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 12, 4, 4, generator=generator)
    fine = torch.nn.functional.interpolate(coarse, size=16, mode="bilinear", align_corners=False)
    return (fine.view(n, 3, 4, 1, 16, 16) * 255).round().to(torch.uint8)


def install(moment: str, signal_file: Path) -> None:
    if moment == "none":
        return
    kind, epoch, count = moment.split(":")
    epoch_at, count_at = int(epoch), int(count)
    save = pack_module.save_checkpoint

    def commit(writes: list[tuple[Path, dict[str, Any]]]) -> None:
        here = writes[0][1]["epoch"] == epoch_at
        for i, (path, state) in enumerate(writes):
            if here and kind == "pending" and i == count_at:
                _stop_here(signal_file)
            save(pending(path), state)
        for i, (path, _) in enumerate(writes):
            if here and kind == "renamed" and i == count_at:
                _stop_here(signal_file)
            pending(path).replace(path)

    pack_module.commit = commit  # type: ignore[assignment]


if __name__ == "__main__":
    torch.set_num_threads(1)
    out, epochs, resume, moment, signal = sys.argv[1:]
    root = Path(out)
    data = TrainData(grids(16, 1), grids(6, 2), (120.0,))
    # On the CPU: a resumed pack is compared with an uninterrupted one bit for bit.
    config = (
        train_preset("cpu-demo")
        .replace(batch_size=8, pretrain_epochs=1, epochs=int(epochs), T=3, eval_batch_size=64)
        .replace(device="cpu")
    )
    one = root / "one"
    if not (one / "best.pt").exists():
        pretrain(config, one, data)
    install(moment, Path(signal))
    members = [
        PackMember(config.replace(seed=1), root / "a", init=one),
        PackMember(config.replace(seed=2, actor="random"), root / "b", init=one),
        PackMember(config.replace(seed=3, critic="average"), root / "c", init=one),
    ]
    train_pack(members, data, resume=resume == "resume")
