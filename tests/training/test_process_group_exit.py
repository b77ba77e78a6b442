"""The process group pyskick makes under torchrun is destroyed before the interpreter exits:
left to C++ destructors, gloo's threads sometimes aborted a rank after its work was done
("terminate called without an active exception", exit -6; seen in ``torchrun pyskick score``)."""

from __future__ import annotations

import textwrap
from pathlib import Path

from pyskick.testing import run_python

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
    run_python(script, cwd=tmp_path, ranks=2)
    # A file per rank: the ranks share torchrun's stdout, where their lines can interleave.
    lines = [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)]
    assert lines == ["rank 0 at exit: group destroyed", "rank 1 at exit: group destroyed"]
