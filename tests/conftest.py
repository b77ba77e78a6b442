"""Shared settings of the test suite: the hypothesis profile and a private cache.

The devices to test on (``device``), the kernels' two implementations (``backend``) and the
native-vs-reference runner (``native_and_reference``) come from the test kit,
:mod:`pyskick.testing`, like the tiny datasets: plugin authors get the same fixtures.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

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
