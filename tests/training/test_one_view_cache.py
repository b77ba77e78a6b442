"""The cached one-view model: a finished one is reused as it is, whatever the number of
processes. Before, every reuse resumed the cached run, and a resume compares the process count
with the one it trained with: a cache filled by ``pyskick train`` was refused under torchrun
("cannot resume: the run used 1 processes, this one has 2"; found by the docs test running the
README's torchrun block)."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from pyskick.errors import UserError
from pyskick.testing import run_python
from pyskick.training import TrainData, one_view_cache
from pyskick.training.one_view_cache import cached_one_view


def test_a_finished_cached_model_is_reused_without_resuming(
    tiny_scenes: Path, tiny_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:  # fmt: skip
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    data = TrainData.from_file(tiny_scenes)
    config = tiny_config.replace(pretrain_epochs=1)
    run = cached_one_view(tiny_scenes, config, data)
    assert (run / "best.pt").is_file()

    def no_training(*args: object, **kwargs: object) -> None:
        raise AssertionError("a finished cached model was trained (resumed) again")

    monkeypatch.setattr(one_view_cache, "pretrain", no_training)
    assert cached_one_view(tiny_scenes, config, data) == run
    # Whatever runtime settings ask for: a finished model is not pretrained, so not refused
    # as a pretraining would be (a CUDA graph on the CPU).
    assert cached_one_view(tiny_scenes, config.replace(cuda_graph=True, device="cpu"), data) == run
    # A longer pretraining is another cache entry, trained from scratch.
    with pytest.raises(AssertionError, match="trained"):
        cached_one_view(tiny_scenes, config.replace(pretrain_epochs=2), data)


def test_a_pretraining_that_would_be_refused_makes_no_cache_entry(
    tiny_scenes: Path, tiny_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # `pyskick score` without --model on data smaller than a batch left the cache's folder and
    # an empty lock file behind.
    cache = tmp_path / "cache"
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(cache))
    data = TrainData.from_file(tiny_scenes)
    too_big = tiny_config.replace(batch_size=data.train.shape[0] + 1)
    with pytest.raises(UserError, match=r"^batch_size \d+ exceeds the \d+ training viewgrids"):
        cached_one_view(tiny_scenes, too_big, data)
    assert not cache.exists()


RANK_SCRIPT = textwrap.dedent(
    """
    import sys
    from pathlib import Path

    import torch

    from pyskick.distributed import rank
    from pyskick.run_dir import RunDir
    from pyskick.testing import tiny_train_config
    from pyskick.training import TrainData
    from pyskick.training.one_view_cache import cached_one_view

    torch.set_num_threads(1)
    dataset, out = sys.argv[1], Path(sys.argv[2])
    if rank() == 1:
        # Rank 1 as if it had read the cache folder before another process finished the
        # pretraining that rank 0, waiting for the lock, then finds finished.
        RunDir.epochs_done = lambda self: 0
    config = tiny_train_config().replace(pretrain_epochs=1)
    run = cached_one_view(dataset, config, TrainData.from_file(dataset))
    (out / f"rank{rank()}.txt").write_text(str(run))
    """
)


def test_under_torchrun_every_rank_follows_what_rank_0_read(
    tiny_scenes: Path, tiny_config, tmp_path: Path, monkeypatch: pytest.MonkeyPatch,
    one_thread: None,
) -> None:  # fmt: skip
    monkeypatch.setenv("PYSKICK_CACHE_DIR", str(tmp_path / "cache"))
    run = cached_one_view(
        tiny_scenes, tiny_config.replace(pretrain_epochs=1), TrainData.from_file(tiny_scenes)
    )
    before = (run / "latest.pt").read_bytes()
    script = tmp_path / "rank.py"
    script.write_text(RANK_SCRIPT)
    run_python(script, tiny_scenes, tmp_path, cwd=tmp_path, ranks=2, timeout=180)
    assert [(tmp_path / f"rank{r}.txt").read_text() for r in (0, 1)] == [str(run)] * 2
    assert (run / "latest.pt").read_bytes() == before  # reused, not trained again
