"""The cached one-view model: a finished one is reused as it is, whatever the number of
processes. Before, every reuse resumed the cached run, and a resume compares the process count
with the one it trained with: a cache filled by ``pyskick train`` was refused under torchrun
("cannot resume: the run used 1 processes, this one has 2"; found by the docs test running the
README's torchrun block)."""

from __future__ import annotations

from pathlib import Path

import pytest

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
    # A longer pretraining is another cache entry, trained from scratch.
    with pytest.raises(AssertionError, match="trained"):
        cached_one_view(tiny_scenes, config.replace(pretrain_epochs=2), data)
