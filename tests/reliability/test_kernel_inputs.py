"""Kernels refuse non-finite inputs on every backend (issue 14, F11).

``coverage_matrix`` accepted NaN and the backends disagreed (native: one NaN, reference: 32).
Like ``nms_rewards`` and ``greedy_coverage``, it now raises ``ValueError`` naming the input.
The CPU kernel detects it in its own pass (every value enters some squared error), so the
hypothesis case puts one non-finite value anywhere in either tensor.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from pyskick.ops import coverage_matrix

NON_FINITE = {"nan": math.nan, "+inf": math.inf, "-inf": -math.inf}
# (N, M, C, H, W): the datasets' grids, a single view and odd sizes (D not a multiple of 8).
GRIDS = [(4, 8, 3, 2, 2), (5, 9, 1, 3, 3), (1, 1, 1, 1, 1), (2, 3, 3, 1, 3)]


def inputs(B: int, grid: tuple[int, ...], seed: int = 0) -> tuple[torch.Tensor, torch.Tensor]:
    """Finite ``recon [B, V, N, M, C, H, W]`` and ``grid [B, N, M, C, H, W]`` in [0, 1)."""
    gen = torch.Generator().manual_seed(seed)
    V = grid[0] * grid[1]
    return torch.rand(B, V, *grid, generator=gen), torch.rand(B, *grid, generator=gen)


@pytest.mark.parametrize("value", NON_FINITE.values(), ids=NON_FINITE.keys())
@pytest.mark.parametrize("which", ["recon", "grid"])
def test_coverage_matrix_refuses_non_finite(
    backend: str, device: str, value: float, which: str
) -> None:
    recon, grid = inputs(2, GRIDS[0])
    target = recon if which == "recon" else grid
    target.view(-1)[target.numel() // 3] = value
    with pytest.raises(ValueError, match=f"^coverage_matrix: {which} contains NaN or infinite"):
        coverage_matrix(recon.to(device), grid.to(device), backend=backend)


@settings(deadline=None, max_examples=120)
@given(
    B=st.integers(1, 2),
    grid=st.sampled_from(GRIDS),
    which=st.sampled_from(["recon", "grid"]),
    value=st.sampled_from(list(NON_FINITE.values())),
    position=st.floats(0, 1, exclude_max=True),
    seed=st.integers(0, 2**16),
)
def test_one_non_finite_value_anywhere_is_refused_by_both_backends(
    device: str, B: int, grid: tuple, which: str, value: float, position: float, seed: int
) -> None:
    recon, truth = inputs(B, grid, seed)
    target = recon if which == "recon" else truth
    target.view(-1)[int(position * target.numel())] = value
    for backend in ("native", "reference"):
        with pytest.raises(ValueError, match=f"^coverage_matrix: {which} contains NaN"):
            coverage_matrix(recon.to(device), truth.to(device), backend=backend)


def test_huge_finite_values_are_results_but_one_nan_is_refused(device: str) -> None:
    # The native kernel's check flags a squared error that overflows float32 too: finite inputs
    # must still give the twin's result, not an error.
    recon, grid = inputs(1, GRIDS[0])
    recon[0, 3] = 1e20
    recon, grid = recon.to(device), grid.to(device)
    native = coverage_matrix(recon, grid, backend="native")
    torch.testing.assert_close(native, coverage_matrix(recon, grid, backend="reference"))
    grid[0, 1, 2, 0, 0, 0] = math.nan
    for backend in ("native", "reference"):
        with pytest.raises(ValueError, match="coverage_matrix: grid contains NaN"):
            coverage_matrix(recon, grid, backend=backend)


def _import_ops(library: str) -> subprocess.CompletedProcess[str]:
    """``import pyskick.ops`` in a fresh process with ``PYSKICK_NATIVE_LIBRARY=library``."""
    code = (
        "import json, pyskick.ops as o, pyskick._C as c; "
        "assert c is o._native.native_module(); print(c.__file__); "
        "print(json.dumps(o.build_info()))"
    )
    return subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYSKICK_NATIVE_LIBRARY": library},
        capture_output=True,
        text=True,
        check=False,
    )


def test_native_library_override_loads_that_file(tmp_path: Path) -> None:
    # `make sanitize` runs the tests against its own build this way; `import pyskick._C`
    # must see the same module as the ops.
    import pyskick._C as installed

    copy = tmp_path / Path(installed.__file__).name
    shutil.copyfile(installed.__file__, copy)
    loaded = _import_ops(str(copy))
    assert loaded.returncode == 0, loaded.stderr
    path, info = loaded.stdout.splitlines()
    assert path == str(copy)
    assert json.loads(info) == {"native": True, **installed.build_info()}


def test_native_library_override_that_does_not_load_is_an_error(tmp_path: Path) -> None:
    # Never a silent fallback to the reference ops: a sanitizer run would test nothing.
    for library in (tmp_path / "missing.so", tmp_path):
        failed = _import_ops(str(library))
        assert failed.returncode != 0
        assert f"PYSKICK_NATIVE_LIBRARY={library}" in failed.stderr
    bogus = tmp_path / "_C.so"
    bogus.write_bytes(b"not an ELF file")
    failed = _import_ops(str(bogus))
    assert failed.returncode != 0
    assert f"PYSKICK_NATIVE_LIBRARY={bogus} does not load" in failed.stderr
