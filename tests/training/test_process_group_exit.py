"""The process group pyskick makes under torchrun is destroyed before the interpreter exits:
left to C++ destructors, gloo's threads sometimes aborted a rank after its work was done
("terminate called without an active exception", exit -6; seen in ``torchrun pyskick score``)."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

SCRIPT = textwrap.dedent(
    """
    import atexit
    from pathlib import Path

    import torch
    import torch.distributed as dist

    from pyskick.distributed import all_reduce_sum, init_distributed


    def report() -> None:  # registered first, so it runs after pyskick's exit handler
        state = "alive" if dist.is_initialized() else "destroyed"
        Path(f"rank{rank}.txt").write_text(f"rank {rank} at exit: group {state}")


    atexit.register(report)
    context = init_distributed(torch.device("cpu"))
    rank = context.rank
    total = all_reduce_sum(torch.ones(()), context)
    assert float(total) == 2.0, total
    """
)


def test_a_rank_destroys_the_group_it_joined_before_exiting(tmp_path: Path) -> None:
    script = tmp_path / "rank.py"
    script.write_text(SCRIPT)
    env = {**os.environ, "OMP_NUM_THREADS": "1", "PYTHONWARNINGS": "ignore"}
    env.pop("WORLD_SIZE", None)
    proc = subprocess.run(
        [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2",
         str(script)],
        env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    # A file per rank: the ranks share torchrun's stdout, where their lines can interleave.
    lines = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert lines == ["rank 0 at exit: group destroyed", "rank 1 at exit: group destroyed"]
