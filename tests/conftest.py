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
