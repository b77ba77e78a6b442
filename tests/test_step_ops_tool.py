"""tools/step_ops.py, the operator count docs/training.md quotes, keeps working: it counts a
real training step, and decoding once dispatches fewer operators than decoding each glimpse."""

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
    found = re.search(r": (\d+) operators that compute in one training step", done.stdout)
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
