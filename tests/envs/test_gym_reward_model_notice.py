"""Issue 26: the default reconstruction reward model trained inside ``gymnasium.make`` with no
output at all in a plain script (tens of minutes on 2 cores at the docs' sizes). It now says
so on stderr when logging is not configured, and when each of its two models is ready; a
finished model is reused without a word."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
import gymnasium
import pyskick.envs  # registers pyskick/LookAround-v0
tiny = {"batch_size": 8, "epochs": 1, "pretrain_epochs": 1, "eval_batch_size": 64}
gymnasium.make("pyskick/LookAround-v0", dataset=sys.argv[1], T=3, reward="reconstruction",
               reward_training=tiny)
"""


def _make(dataset: Path, cache: Path) -> str:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(dataset)],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "PYSKICK_CACHE_DIR": str(cache), "OMP_NUM_THREADS": "1"},
    )
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_training_the_default_reward_model_is_said_in_a_plain_script(
    tiny_scenes: Path, tmp_path: Path
) -> None:
    lines = _make(tiny_scenes, tmp_path / "cache").splitlines()
    assert lines[0].startswith(
        "training the default reward model (a one-view model, then a random-motions model, "
        "1 + 1 epochs) in "
    )
    assert lines[0].endswith("; cached for later environments, or pass reward_model=")
    assert lines[1].startswith("reward model: the one-view model is ready (")
    assert lines[2].startswith("reward model: the random-motions model is ready (")
    assert len(lines) == 3
    # The second environment reuses the finished model: nothing to say.
    assert _make(tiny_scenes, tmp_path / "cache") == ""
