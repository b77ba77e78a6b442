"""Shared settings of the test suite: the hypothesis profile and a private cache.

The devices to test on (``device``), the kernels' two implementations (``backend``) and the
native-vs-reference runner (``native_and_reference``) come from the test kit,
:mod:`pyskick.testing`, like the tiny datasets: plugin authors get the same fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

# Generated inputs are tensors, slow to build on a loaded 2-core machine: that is not a test
# failure. CI (CI=true) replays a fixed sequence of examples so that a run is reproducible.
settings.register_profile(
    "pyskick",
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    derandomize=os.environ.get("CI", "").lower() == "true",
)
settings.load_profile("pyskick")


@pytest.fixture(autouse=True, scope="session")
def _private_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """Tests never read or fill the user's cache (one-view models, sidekick scores); a test
    that needs a cache of its own sets ``PYSKICK_CACHE_DIR`` itself."""
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("PYSKICK_CACHE_DIR", str(tmp_path_factory.mktemp("pyskick-cache")))
        yield


@pytest.fixture(autouse=True, scope="session")
def _kept_freed_memory() -> Iterator[None]:
    """Every test runs under the malloc settings of the ``pyskick`` command
    (``keep_freed_memory``), applied once when the session starts: with glibc's defaults the
    suite's training steps page-fault their tensors in at every step (``make test``: 810 s
    against 727 s), and
    applied by the first in-process CLI call they would make the tests after it run under other
    settings than the tests before. (tests/reliability/test_heap_settings.py checks the
    settings in fresh processes.)"""
    import pyskick_cli.main
    from pyskick.memory import keep_freed_memory

    keep_freed_memory()
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(pyskick_cli.main, "keep_freed_memory", lambda: False)
        yield


GPU_REPEAT_REL = 1e-6
"""How closely a GPU repeats a float computation (the relative difference allowed): cuDNN's
and cuBLAS's algorithms, and atomic additions, sum in orders that can vary between two calls
on the same inputs. Measured on an H200 (2026-11-30, the GPU check's ``autocuda`` step, where
device "auto" meant the GPU): 1.4e-8 to 1.8e-7 between evaluations of one model, and 8e-8
between a resumed run's losses and the uninterrupted run's (the first comparison of each test
that differed)."""

GPU_REPEAT_TENSOR = {"rtol": 1e-4, "atol": 1e-6}
"""The same for a trained model's weights, element by element (``torch.testing.assert_close``):
rounding that differs at one step is carried by the steps after it. Not yet measured: a
first choice, looser than the losses' (those tests stopped at their first difference)."""


class AutoRepeat:
    """How two computations that device "auto" runs are compared: bit for bit on the CPU, as
    the test kit keeps "auto"; to a GPU's repeatability where "auto" is a GPU
    (``$PYSKICK_AUTO_DEVICE=cuda``: the GPU check runs the command-line flows so)."""

    def __init__(self) -> None:
        from pyskick.distributed import resolve_device

        self.on_gpu = resolve_device("auto").type != "cpu"

    def approx(self, expected: float, cpu_rel: float = 0.0) -> Any:
        """What ``actual == ...`` compares to: ``expected`` itself on the CPU (or within
        ``cpu_rel``), within :data:`GPU_REPEAT_REL` at least on a GPU."""
        if self.on_gpu:
            return pytest.approx(expected, rel=max(cpu_rel, GPU_REPEAT_REL))
        return pytest.approx(expected, rel=cpu_rel) if cpu_rel else expected

    def assert_same(self, actual: Any, expected: Any, name: str = "") -> None:
        """Two tensors equal (``torch.equal``) on the CPU, close on a GPU."""
        import torch

        if self.on_gpu:
            torch.testing.assert_close(actual, expected, msg=name or None, **GPU_REPEAT_TENSOR)
        else:
            assert torch.equal(actual, expected), name


@pytest.fixture(scope="session")
def auto_repeat() -> AutoRepeat:
    """:class:`AutoRepeat`: compares two computations as device "auto" repeats them."""
    return AutoRepeat()
