"""tools/step_ops.py, the operator count docs/training.md quotes, keeps working: it counts a
real training step, decoding once dispatches fewer operators than decoding each glimpse, and a
pack's step about as many as a run's, whatever its size."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

TOOL = Path(__file__).resolve().parents[1] / "tools" / "step_ops.py"


def _count(*flags: str) -> tuple[int, str]:
    done = subprocess.run(
        [sys.executable, str(TOOL), "--preset", "cpu-demo", "--batch-size", "4", *flags],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    found = re.search(r": (\d+) operators that compute in (one|a pack of \d+ runs') training step",
                      done.stdout)  # fmt: skip
    assert found, done.stdout
    return int(found.group(1)), done.stdout


def test_step_ops_counts_a_training_step_and_sees_decoding_once() -> None:
    per_glimpse, out = _count("--top", "5")
    once, _ = _count("--decode-once")
    assert per_glimpse > 200
    assert once < per_glimpse
    assert "by function:" in out
    assert "by operator:" in out
    assert "step.py:train_step" in out  # the backward pass, counted where train_step calls it


def test_step_ops_counts_a_packs_step() -> None:
    alone, _ = _count("--decode-once")
    two, out = _count("--decode-once", "--runs", "2", "--top", "30")
    four, _ = _count("--decode-once", "--runs", "4")
    assert "a pack of 2 runs' training step" in out
    assert "pack.py:" in out  # the pack's own step
    # Batched over the runs: each run more adds a few operators (its own action draws: 3 here),
    # not a run's worth (426 for a run alone at this size, a pack of 2 619, of 4 625; the
    # transposed convolutions one run after another would add 9 a run).
    assert alone < two < four <= two + 2 * 5
