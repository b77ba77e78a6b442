"""Issue 26: Gymnasium's async vector env (``fork``, its default on Linux) hung without a word
once one pyskick env had stepped in the parent: the forked workers inherited torch's OpenMP
pool state without its threads. Forked children now run torch on one thread
(:func:`pyskick.envs.gym.make_forks_safe`). The repro runs in its own process, since a hang
must not take the test session with it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import sys
import gymnasium
import pyskick.envs  # registers pyskick/LookAround-v0
kwargs = dict(dataset=sys.argv[1], split="train", T=3)
env = gymnasium.make("pyskick/LookAround-v0", **kwargs)
env.reset(seed=0)
env.step(env.action_space.sample())  # torch has run parallel work in this process
vec = gymnasium.make_vec("pyskick/LookAround-v0", num_envs=2, vectorization_mode="async",
                         vector_kwargs={"context": "fork"}, **kwargs)
vec.reset(seed=0)
vec.step(vec.action_space.sample())
vec.close()
print("stepped")
"""


def test_an_async_vector_env_forked_after_a_step_runs(tiny_scenes: Path) -> None:
    done = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tiny_scenes)],
        capture_output=True,
        text=True,
        timeout=120,  # it hung for good before: 120 s is ~20x what it takes on 2 cores
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "stepped"
