"""Run by test_train_distributed.py, alone or under torchrun: pretrain, then train, tiny data.

Usage: ``python ddp_entry.py OUT_DIR``. Each rank writes ``OUT_DIR/rank{r}.json`` with a digest
of its final policy and critic weights.
"""

from __future__ import annotations

import hashlib
import json
import sys
from pathlib import Path

import torch
import torch.distributed as dist

from pyskick.config import train_preset
from pyskick.distributed import end_process
from pyskick.training.data import TrainData
from pyskick.training.trainer import Trainer, pretrain


def grids(n: int, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    coarse = torch.rand(n, 12, 4, 4, generator=generator)
    fine = torch.nn.functional.interpolate(coarse, size=16, mode="bilinear", align_corners=False)
    return (fine.view(n, 3, 4, 1, 16, 16) * 255).round().to(torch.uint8)


def main(out: Path) -> None:
    torch.set_num_threads(1)
    data = TrainData(grids(16, 1), grids(5, 2), (120.0,))
    # Two CPU ranks (gloo), compared with one process bit for bit.
    config = (
        train_preset("cpu-demo")
        .replace(
            batch_size=8, pretrain_epochs=2, epochs=1, T=3, critic="critic", eval_batch_size=64
        )
        .replace(device="cpu")
    )
    pretrain(config, out / "pre", data)
    trainer = Trainer(config, out / "train", data, stage="train", init=out / "pre")
    trainer.fit()
    digest = hashlib.sha256()
    for module in (trainer.policy, trainer.critic):
        for key, value in sorted(module.state_dict().items()):
            digest.update(key.encode())
            digest.update(value.detach().cpu().contiguous().numpy().tobytes())
    rank = dist.get_rank() if dist.is_initialized() else 0
    payload = {"rank": rank, "world": trainer.dist.world_size, "digest": digest.hexdigest()}
    (out / f"rank{rank}.json").write_text(json.dumps(payload))
    # The results are written: leave without the interpreter's teardown, which can hang in
    # torch's gloo process group (pyskick.distributed.end_process; not what this test checks).
    end_process(0)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
