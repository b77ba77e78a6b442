"""Run by test_score_cache.py, alone, several at once, or under torchrun.

Usage:

- ``python scores_entry.py cached OUT CACHE LOG PEERS``: once PEERS processes are ready (an
  ``OUT.ready`` file each), :func:`cached_scores` of the grids with a slow :class:`ViewMeans`
  (every compute appends a line to LOG); writes ``OUT`` (JSON).
- ``python scores_entry.py sharded OUT_DIR LOG``: under torchrun (gloo): sharded, non-shardable
  and failing computations and a cached one; each rank writes ``OUT_DIR/rank{r}.json``.
"""

from __future__ import annotations

import hashlib
import json
import logging
import os
import sys
import time
from pathlib import Path
from typing import Any

import torch
import torch.distributed as dist
from torch import Tensor

from pyskick.sidekicks.base import ScoredSidekick
from pyskick.sidekicks.scores import cached_scores, compute_scores_sharded


class ViewMeans(ScoredSidekick):
    """Scores every view by its mean intensity (``means`` ``[n, N, M]``) and names each grid's
    brightest view (``peak`` ``[n]``); appends ``pid n`` to ``log`` for every computation."""

    name = "view-means"

    def __init__(self, log: Path | None = None, *, scale: float = 1.0, delay: float = 0.0) -> None:
        self.log, self.scale, self.delay = log, scale, delay
        self.loaded: dict[str, Tensor] | None = None

    def score_options(self, T: int) -> dict[str, Any]:
        return {"scale": self.scale}

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        if self.log is not None:
            with self.log.open("a") as handle:
                handle.write(f"{os.getpid()} {len(grids)}\n")
        time.sleep(self.delay)
        means = grids.to(device, torch.float32).mean((3, 4, 5)).cpu() * self.scale
        return {"means": means, "peak": means.flatten(1).argmax(1)}

    def load_scores(self, scores: dict[str, Tensor], *, T: int, device: torch.device) -> None:
        self.loaded = scores


class Solo(ViewMeans):
    """The same scores, computed in one piece."""

    shardable = False


class FailsAfterFirstSlice(ViewMeans):
    """Fails on every slice that does not start the data (rank 1's under torchrun)."""

    def compute_scores(self, grids: Tensor, *, T: int, device: torch.device) -> dict[str, Tensor]:
        if not torch.equal(grids[0], example_grids()[0]):
            raise ValueError("this slice is refused")
        return super().compute_scores(grids, T=T, device=device)


def example_grids(n: int = 7) -> Tensor:
    """``[n, 2, 3, 1, 4, 4]`` uint8 viewgrids (7 samples: ranks get unequal slices)."""
    generator = torch.Generator().manual_seed(5)
    return torch.randint(0, 256, (n, 2, 3, 1, 4, 4), generator=generator, dtype=torch.uint8)


def digest(scores: dict[str, Tensor]) -> str:
    out = hashlib.sha256()
    for name in sorted(scores):
        out.update(name.encode())
        out.update(scores[name].contiguous().numpy().tobytes())
    return out.hexdigest()


def run_cached(out: Path, cache: Path, log: Path, peers: int) -> None:
    # Start together (imports take seconds), so that the others find the lock taken.
    out.with_suffix(".ready").touch()
    deadline = time.monotonic() + 60
    while len(list(out.parent.glob("*.ready"))) < peers and time.monotonic() < deadline:
        time.sleep(0.01)
    scores = cached_scores(
        ViewMeans(log, delay=1.0), example_grids(), T=2, device=torch.device("cpu"),
        cache_dir=cache,
    )  # fmt: skip
    out.write_text(json.dumps({"digest": digest(scores)}))


def run_sharded(out_dir: Path, log: Path) -> None:
    dist.init_process_group("gloo")
    rank, cpu, grids = dist.get_rank(), torch.device("cpu"), example_grids()
    result: dict[str, Any] = {"world": dist.get_world_size()}
    result["sharded"] = digest(compute_scores_sharded(ViewMeans(log), grids, T=2, device=cpu))
    result["solo"] = digest(compute_scores_sharded(Solo(log), grids, T=2, device=cpu))
    try:
        compute_scores_sharded(FailsAfterFirstSlice(), grids, T=2, device=cpu)
    except RuntimeError as exc:
        result["failure"] = str(exc)
    cache = out_dir / "cache"
    result["cached"] = [
        digest(cached_scores(ViewMeans(log), grids, T=2, device=cpu, cache_dir=cache))
        for _ in range(2)
    ]
    (out_dir / f"rank{rank}.json").write_text(json.dumps(result))
    dist.destroy_process_group()


if __name__ == "__main__":
    torch.set_num_threads(1)
    # pyskick says what the cache does in INFO log records (the CLI shows them on stderr).
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if sys.argv[1] == "cached":
        run_cached(Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4]), int(sys.argv[5]))
    else:
        run_sharded(Path(sys.argv[2]), Path(sys.argv[3]))
