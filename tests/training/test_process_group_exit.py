"""How a rank ends: the process group pyskick makes under torchrun is destroyed before the
interpreter exits (left to C++ destructors, gloo's threads sometimes aborted a rank after its
work was done: "terminate called without an active exception", exit -6, seen in ``torchrun
pyskick score``), and the command line ends a rank without the teardown
(:func:`pyskick.distributed.end_process`), a script or the command line alike."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from pyskick.checkpoint import load_checkpoint
from pyskick.testing import run_python
from pyskick.training.loggers import read_metrics

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


ENDING = textwrap.dedent(
    """
    import atexit
    from pathlib import Path

    import torch.distributed as dist

    from pyskick.distributed import destroy_distributed, end_process


    class TornDown:
        def __del__(self) -> None:  # runs in the interpreter's teardown, not after os._exit
            Path("teardown.txt").write_text("torn down")


    def report() -> None:  # runs after destroy_distributed would (handlers run last first)
        state = "alive" if dist.is_initialized() else "destroyed"
        Path("handler.txt").write_text(f"group {state}")


    keep = TornDown()
    dist.init_process_group("gloo", init_method=f"file://{Path('store').resolve()}", rank=0,
                            world_size=1)
    atexit.register(report)
    atexit.register(destroy_distributed)  # as init_distributed does
    print("written", end="")  # no newline: only a flush brings it out
    end_process(3)
    """
)


def test_end_process_runs_the_exit_handlers_flushes_and_skips_the_teardown(
    tmp_path: Path,
) -> None:
    script = tmp_path / "end.py"
    script.write_text(ENDING)
    proc = subprocess.run(
        [sys.executable, str(script)], cwd=tmp_path, capture_output=True, text=True, timeout=60
    )
    assert proc.returncode == 3, proc.stderr
    assert proc.stdout == "written"
    # The other handlers ran, pyskick's own did not destroy the group, and the interpreter's
    # teardown (where the group would be freed) did not run.
    assert (tmp_path / "handler.txt").read_text() == "group alive"
    assert not (tmp_path / "teardown.txt").exists()


class Ended(Exception):
    """What the patched end_process raises instead of ending the test's process."""


@pytest.mark.parametrize(
    ("args", "code"),
    [(["--version"], 0), (["no-such-command"], 2), (["data", "info", "missing.h5"], 2)],
)
def test_a_torchrun_rank_leaves_the_command_line_through_end_process(
    args: list[str], code: int, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    import pyskick.distributed
    from pyskick_cli.main import main

    def end_process(status: int) -> None:
        raise Ended(status)

    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(pyskick.distributed, "in_process_group", lambda: True)
    monkeypatch.setattr(pyskick.distributed, "end_process", end_process)
    with pytest.raises(SystemExit) as plain:  # not a launch: a plain exit
        main(args)
    assert plain.value.code == code
    monkeypatch.setenv("WORLD_SIZE", "2")
    with pytest.raises(Ended) as ended:
        main(args)
    assert ended.value.args == (code,)


@pytest.mark.slow
def test_the_command_line_trains_under_torchrun_and_ends_each_rank(
    tiny_scenes: Path, tmp_path: Path
) -> None:
    out = tmp_path / "one"
    args = ["pretrain", "--dataset", tiny_scenes, "--preset", "cpu-demo", "--epochs", "2"]
    args += ["--batch-size", "8", "--device", "cpu", "--out", out]
    proc = run_python("-m", "pyskick_cli", *args, cwd=tmp_path, ranks=2)
    # Rank 0 alone speaks and writes; its last line came out before the process ended.
    assert proc.stderr.count("pretrain finished: 2 epochs") == 1, proc.stderr
    assert len(read_metrics(out / "metrics.jsonl")) == 2
    assert load_checkpoint(out / "latest.pt")["epoch"] == 1  # the last epoch's index
