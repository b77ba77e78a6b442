"""The reliability corpus' harness (issue 14): a refused command changes nothing on disk.

``refuse(args, code, *needles, watch=...)`` runs ``pyskick ARGS`` in process (the same entry
point as the console script) and asserts the documented contract of a refusal:

- the exit code (2 for bad input, 1 for a runtime failure);
- exactly one non-empty line on stderr, naming what was wrong (every needle is in it,
  case-insensitively), and no traceback;
- every watched folder or file has the same listing, sizes and SHA-256 digests afterwards
  (nothing created, nothing changed, nothing removed).
"""

from __future__ import annotations

import ctypes
import hashlib
import os
import subprocess
import sys
from collections.abc import Iterable
from pathlib import Path

import pytest

from pyskick_cli.main import main

Snapshot = dict[str, str]


def snapshot(*roots: Path) -> Snapshot:
    """Relative path -> ``"dir"`` or ``"<size>:<sha256>"`` for every entry under ``roots``.

    A root that does not exist is recorded as missing, so creating it counts as a change.
    """
    listing: Snapshot = {}
    for root in roots:
        root = Path(root)
        if not root.exists() and not root.is_symlink():
            listing[str(root)] = "missing"
            continue
        entries = [root, *sorted(root.rglob("*"))] if root.is_dir() else [root]
        for entry in entries:
            if entry.is_symlink():  # dangling or not, a link is its target's name
                listing[str(entry)] = f"link:{entry.readlink()}"
            elif entry.is_dir():
                listing[str(entry)] = "dir"
            else:
                data = entry.read_bytes()
                listing[str(entry)] = f"{len(data)}:{hashlib.sha256(data).hexdigest()}"
    return listing


def run_cli(args: Iterable[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """``pyskick ARGS`` in process -> ``(exit code, stdout, stderr)``."""
    with pytest.raises(SystemExit) as exc:
        main([str(a) for a in args])
    out, err = capsys.readouterr()
    return int(exc.value.code or 0), out, err


class Refuse:
    """Callable fixture: assert that a command is refused cleanly (see the module doc)."""

    def __init__(self, capsys: pytest.CaptureFixture[str]) -> None:
        self.capsys = capsys

    def __call__(
        self,
        args: Iterable[str],
        code: int,
        *needles: str,
        watch: Iterable[Path] = (),
    ) -> str:
        """Run ``args``; return the one error line after checking the contract."""
        watched = [Path(p) for p in watch]
        before = snapshot(*watched)
        got, _out, err = run_cli(args, self.capsys)
        lines = [line for line in err.splitlines() if line.strip()]
        assert got == code, f"exit {got}, expected {code}; stderr: {err!r}"
        assert len(lines) == 1, f"expected one error line, got {len(lines)}: {err!r}"
        assert "Traceback" not in err, err
        line = lines[0]
        for needle in needles:
            assert needle.lower() in line.lower(), f"{needle!r} not in {line!r}"
        after = snapshot(*watched)
        assert after == before, _describe_change(before, after)
        return line


def save_evaluation(
    path: Path, errors: list[float], *, metric: str = "avg", samples_sha256: str = "ab" * 32
) -> Path:
    """Write ``path``, an evaluation ``.npz`` as ``pyskick evaluate`` saves it, of these
    per-sample ``errors`` (two starts each, both with the sample's error)."""
    import torch

    from pyskick.evaluation.evaluate import EvalResult
    from pyskick.evaluation.stats import summarize

    per_sample = torch.tensor(errors, dtype=torch.float64)
    path.parent.mkdir(parents=True, exist_ok=True)
    EvalResult(
        metric=metric,
        actor="learned",
        T=4,
        starts=torch.arange(2),
        per_start=per_sample[:, None].repeat(1, 2),
        per_sample=per_sample,
        summary=summarize(per_sample),
        samples_sha256=samples_sha256,
    ).save(path)
    return path


def _describe_change(before: Snapshot, after: Snapshot) -> str:
    changed = sorted(k for k in before.keys() | after.keys() if before.get(k) != after.get(k))
    return "the refusal changed the disk: " + ", ".join(
        f"{k} ({before.get(k, 'absent')} -> {after.get(k, 'absent')})" for k in changed[:10]
    )


@pytest.fixture
def refuse(capsys: pytest.CaptureFixture[str]) -> Refuse:
    """See :class:`Refuse`."""
    return Refuse(capsys)


def without_write_override() -> None:
    """In a child process, before exec: root ignores permissions through CAP_DAC_OVERRIDE and
    CAP_DAC_READ_SEARCH; drop both from the bounding set so that a root process (like any
    other) cannot write a read-only folder."""
    libc = ctypes.CDLL(None, use_errno=True)
    for capability in (1, 2):  # CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH
        if libc.prctl(24, capability, 0, 0, 0) != 0:  # PR_CAPBSET_DROP
            raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def run_unprivileged(
    args: Iterable[object], env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    """``pyskick ARGS`` in a subprocess that cannot override file permissions, even as root."""
    return subprocess.run(
        [sys.executable, "-m", "pyskick_cli", *map(str, args)],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=without_write_override if os.geteuid() == 0 else None,
    )


@pytest.fixture
def unprivileged() -> object:
    """:func:`run_unprivileged`, for tests (conftest helpers are not importable modules)."""
    return run_unprivileged


@pytest.fixture
def disk() -> object:
    """:func:`snapshot`, for tests."""
    return snapshot
