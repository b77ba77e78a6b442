"""Issue 24, item 1: a run's sidekick is resolved once per command. ``train --sidekick NAME``
asked the registry 4 times on a new run and 6 on a resume, and its resume rules lived in the
CLI, ``reproduce``, ``score`` and the trainer; :func:`pyskick.sidekicks.for_run` is now the one
resolver (and the only reader of what a run recorded about its sidekick)."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pyskick.sidekicks import factory


@pytest.fixture
def resolutions(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """Counts of for_run calls and of the registry lookups of sidekicks."""
    counts: Counter[str] = Counter()
    resolve, entry = factory.for_run, factory.sidekick_entry

    def counted_for_run(*args: Any, **kwargs: Any) -> Any:
        counts["for_run"] += 1
        return resolve(*args, **kwargs)

    def counted_entry(*args: Any, **kwargs: Any) -> Any:
        counts["lookup"] += 1
        return entry(*args, **kwargs)

    monkeypatch.setattr(factory, "for_run", counted_for_run)
    monkeypatch.setattr(factory, "sidekick_entry", counted_entry)
    return counts


def test_train_resolves_its_sidekick_once(
    tmp_path: Path, tiny_scenes: Path, tiny_one_view: Path, cli_runner: Any, one_thread: None,
    resolutions: Counter[str],
) -> None:  # fmt: skip
    run = tmp_path / "rew"
    args = ["train", "--dataset", tiny_scenes, "--init", tiny_one_view, "--preset", "cpu-demo",
            "--batch-size", "8", "--out", run]  # fmt: skip
    code, _, err = cli_runner(*args, "--epochs", "1", "--sidekick", "rew",
                              "--sidekick-option", "decay_every=3")  # fmt: skip
    assert code == 0, err
    assert resolutions == {"for_run": 1, "lookup": 1}
    resolutions.clear()
    # A resume names neither the sidekick nor its options: the recorded ones, resolved once.
    code, _, err = cli_runner(*args[:3], *args[5:], "--epochs", "2", "--resume")
    assert code == 0, err
    assert resolutions == {"for_run": 1, "lookup": 1}
    resolutions.clear()
    # Another value of a recorded option is refused by the same resolver.
    code, _, err = cli_runner(*args[:3], *args[5:], "--epochs", "3", "--resume",
                              "--sidekick-option", "decay_every=5")  # fmt: skip
    assert code == 2
    assert "cannot resume: sidekick 'rew' option decay_every is 5 but the run used 3" in err
    assert resolutions == {"for_run": 1, "lookup": 1}
